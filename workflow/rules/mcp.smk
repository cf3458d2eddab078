# The MCP proxy on real servers (issue 30, deliverables 5 and 6). Target:
# `snakemake --cores all mcp` (not part of `all`: it builds two venvs from the package
# registry and its timings describe this machine). mcp-server-sqlite and mcp-server-git
# run each from its own venv (pins in envs/mcp-server-<name>.txt); the sqlite server
# serves a database built from shipped data, the git server a throwaway repository.
# The SDK's client replays a scripted session against each, directly and through
# `tersetalk mcp-proxy` per budget (mcp.budgets); MB-5 times the proxy's session pipeline.
#   results/mcp/<server>.parquet   one row per arm and step (t_* columns: timings)
#   results/mcp/summary.csv        per server, arm and tool: tokens, dedup, retrievals
#   results/mcp/mb5.{parquet,csv}  hashing, dedup and encoding against bare hashlib
#   figures/mcp.{png,pdf}


from tersetalk import figmeta  # report captions: what each file recorded


include: "helpers/mcp.smk"


rule mcp:
    input:
        "results/mcp/summary.csv",
        "figures/mcp.pdf",
        "figures/mcp.png",
        "results/mcp/mb5.parquet",


rule mcp_env:
    input:
        "envs/mcp-server-{server}.txt",
    output:
        "results/mcp/envs/{server}.json",
    log:
        "results/logs/mcp/env_{server}.log",
    wildcard_constraints:
        server="sqlite|git",
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=20,
    params:
        dest=lambda wildcards: os.path.join(MCP_ENV_DIR, wildcards.server),
    shell:
        "tersetalk mcp-experiment env --server {wildcards.server} --requirements {input} "
        "--dest {params.dest} --out {output} > {log} 2>&1"


rule mcp_database:
    input:
        hotpotqa=MCP_HOTPOTQA,
        toolresponses=MCP_TOOLRESPONSES,
    output:
        "results/mcp/data/questions.sqlite",
    log:
        "results/logs/mcp/database.log",
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        rows=config["mcp"]["rows"],
    shell:
        "tersetalk mcp-experiment database --hotpotqa {input.hotpotqa} "
        "--toolresponses {input.toolresponses} --rows {params.rows} --out {output} > {log} 2>&1"


rule mcp_repository:
    output:
        directory("results/mcp/data/repo"),
    log:
        "results/logs/mcp/repository.log",
    conda:
        ENV
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "tersetalk mcp-experiment repository --out {output} > {log} 2>&1"


rule mcp_run:
    input:
        env="results/mcp/envs/{server}.json",
        target=mcp_target,
    output:
        "results/mcp/{server}.parquet",
    log:
        "results/logs/mcp/run_{server}.log",
    wildcard_constraints:
        server="sqlite|git",
    conda:
        ENV
    # alone on every core, as the benchmarks: the latency ratios are timings
    threads: os.cpu_count() or 1
    resources:
        mem_mb=2000,
        runtime=20,
    params:
        budgets=mcp_budgets(),
    shell:
        "tersetalk mcp-experiment run --server {wildcards.server} --env-info {input.env} "
        "--target {input.target} --budgets {params.budgets} --out {output} > {log} 2>&1"


rule mcp_report:
    input:
        expand("results/mcp/{server}.parquet", server=config["mcp"]["servers"]),
    output:
        csv="results/mcp/summary.csv",
        pdf="figures/mcp.pdf",
        png=report(
            "figures/mcp.png",
            caption="../report/mcp.rst",
            category="MCP proxy",
        ),
    log:
        "results/logs/mcp/report.log",
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        stem=lambda wildcards, output: output.pdf.removesuffix(".pdf"),
    shell:
        "tersetalk mcp-experiment report --runs {input} --csv {output.csv} "
        "--out-stem {params.stem} > {log} 2>&1"


rule mcp_bench:
    output:
        parquet="results/mcp/mb5.parquet",
        csv="results/mcp/mb5.csv",
    log:
        "results/logs/mcp/mb5.log",
    conda:
        ENV
    # alone on every core, as bench_run
    threads: os.cpu_count() or 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        repeats=config["bench"]["repeats"],
        sizes=",".join(str(k) for k in config["mcp"]["bench"]["payload_kib"]),
        calls=config["mcp"]["bench"]["calls"],
    shell:
        "tersetalk bench run --which mb5 --repeats {params.repeats} "
        "--payload-kib {params.sizes} --calls {params.calls} --out {output.parquet} > {log} 2>&1"
