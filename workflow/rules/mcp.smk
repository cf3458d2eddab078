# The MCP proxy on real servers. Target:
# `snakemake --cores all mcp` (not part of `all`: it installs the servers from the package
# registries and its timings describe this machine). Five servers (mcp.servers), each in
# its own environment as a client would launch it: mcp-server-sqlite and mcp-server-git
# from a venv each (pins in envs/mcp-server-<name>.txt); the reference filesystem, memory
# and everything servers with `npm install --prefix results/mcp/envs/<server>` at an
# exact version (src/tersetalk/mcp/servers.py), started as `node <entry script>` (no
# npx; needs Node.js and npm on PATH). The sqlite server serves a database built from
# shipped data, git a throwaway repository, filesystem a copy of it, memory a graph file
# of each arm's own, everything nothing. The SDK's client replays a scripted session
# against each, directly and through `tersetalk mcp-proxy` per budget (mcp.budgets);
# MB-5 times the proxy's session pipeline.
#   results/mcp/<server>.parquet   one row per arm and step (t_* columns: timings)
#   results/mcp/summary.csv        per server (and "(all)", weighted), arm and tool: o200k
#                                  and cl100k tokens direct vs proxied, round trips
#                                  checked exact, dedup, retrievals, added latency p50/p95
#   results/mcp/mb5.{parquet,csv}  hashing, dedup and encoding against bare hashlib
#   figures/mcp.{png,pdf}
# Tuned against default (target `mcp_tuned`; `mcp` takes its summary and figure among
# its inputs, so `snakemake mcp` measures it too): seeded sessions of the sqlite server
# (on the database), the git server (a coding agent on results/mcp/data/project_repo, a
# package of 28 files and 36 commits) and the memory server (an assistant recalling from
# results/mcp/data/memory_graph.jsonl, 28 entities and 49 relations about that project)
# split by seed (training 0..n-1, held-out
# evaluation 2000..; repeats at Zipf-distributed stack distances), training through
# the default proxy with local telemetry, `tersetalk mcp tune analyze` on it (the LRU
# size from the repeats' distances; a token knob changed only where a replay of the
# training sessions saves tokens), evaluation directly, default and --tuned. It is a
# target of its own as well so that the tuner can be judged without the other servers'
# runs; in CI it rides on `mcp` (6 + 6 sessions of 40 steps per server: about 3
# minutes for the three on one core).
#   results/mcp/tuned/<server>/{train.parquet,telemetry/,tuned.yaml,evidence.csv,eval.parquet}
#   results/mcp/tuned.parquet       one row per server, split, seed, arm and step
#   results/mcp/tuned_summary.csv   per server and arm: tokens/session, dedup hit rate,
#                                   hint tokens, retrievals, tuner changes, vs default;
#                                   per server: default_tokens, tuned_tokens,
#                                   tuned_saving_pct, meets_target (5%)
#   figures/mcp_tuned.{png,pdf}


from tersetalk.core import figmeta  # report captions: what each file recorded


include: "helpers/mcp.smk"


rule mcp:
    input:
        paths_module.MCP_SUMMARY,
        paths_module.MCP_PDF,
        paths_module.MCP_PNG,
        paths_module.MCP_BENCH,
        paths_module.MCP_TUNED_SUMMARY,
        paths_module.MCP_TUNED_PDF,
        paths_module.MCP_TUNED_PNG,


# the Node servers alone (the name of their target before `mcp` took them in)
rule mcp_npm:
    input:
        expand(paths_module.MCP_RUN, server=MCP_NPM_SERVERS),


rule mcp_tuned:
    input:
        paths_module.MCP_TUNED_SUMMARY,
        paths_module.MCP_TUNED_PDF,
        paths_module.MCP_TUNED_PNG,


rule mcp_env:
    input:
        mcp_requirements,
    output:
        paths_module.MCP_ENV,
    log:
        paths_module.shared_log("mcp/env_{server}.log"),
    wildcard_constraints:
        server=MCP_SERVER_PATTERN,
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=20,
    params:
        dest=lambda wildcards: os.path.join(paths_module.MCP_ENV_DIR, wildcards.server),
        requirements=lambda wildcards, input: f"--requirements {input}" if input else "",
    shell:
        "tersetalk mcp-experiment env --server {wildcards.server} {params.requirements} "
        "--dest {params.dest} --out {output} > {log} 2>&1"


rule mcp_database:
    input:
        hotpotqa=MCP_HOTPOTQA,
        toolresponses=MCP_TOOLRESPONSES,
    output:
        paths_module.MCP_DATABASE,
    log:
        paths_module.shared_log("mcp/database.log"),
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
        directory(paths_module.MCP_REPOSITORY),
    log:
        paths_module.shared_log("mcp/repository.log"),
    conda:
        ENV
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "tersetalk mcp-experiment repository --out {output} > {log} 2>&1"


# the tuned experiment's git server serves this one: a coding agent's project
rule mcp_project_repository:
    output:
        directory(paths_module.MCP_PROJECT_REPOSITORY),
    log:
        paths_module.shared_log("mcp/project_repository.log"),
    conda:
        ENV
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "tersetalk mcp-experiment repository --project --out {output} > {log} 2>&1"


# the tuned experiment's memory server reads (a copy of) this graph
rule mcp_memory_graph:
    output:
        paths_module.MCP_MEMORY_GRAPH,
    log:
        paths_module.shared_log("mcp/memory_graph.log"),
    conda:
        ENV
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "tersetalk mcp-experiment graph --out {output} > {log} 2>&1"


rule mcp_run:
    input:
        env=paths_module.MCP_ENV,
        target=mcp_target,
    output:
        paths_module.MCP_RUN,
    log:
        paths_module.shared_log("mcp/run_{server}.log"),
    wildcard_constraints:
        server=MCP_SERVER_PATTERN,
    conda:
        ENV
    # alone on every core, as the benchmarks: the latency ratios are timings
    threads: os.cpu_count() or 1
    resources:
        mem_mb=2000,
        runtime=20,
    params:
        budgets=mcp_budgets(),
        # memory and everything serve no data of ours
        target=lambda wildcards, input: f"--target {input.target}" if input.target else "",
    shell:
        "tersetalk mcp-experiment run --server {wildcards.server} --env-info {input.env} "
        "{params.target} --budgets {params.budgets} --out {output} > {log} 2>&1"


rule mcp_report:
    input:
        expand(paths_module.MCP_RUN, server=config["mcp"]["servers"]),
    output:
        csv=paths_module.MCP_SUMMARY,
        pdf=paths_module.MCP_PDF,
        png=report(
            paths_module.MCP_PNG,
            caption="../report/mcp.rst",
            category="MCP proxy",
        ),
    log:
        paths_module.shared_log("mcp/report.log"),
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
        parquet=paths_module.MCP_BENCH,
        csv=paths_module.MCP_BENCH_TABLE,
    log:
        paths_module.shared_log("mcp/mb5.log"),
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


rule mcp_tuned_train:
    input:
        env=paths_module.MCP_ENV,
        target=mcp_tuned_target,
    output:
        parquet=mcp_tuned_file("train.parquet"),
        telemetry=directory(mcp_tuned_file("telemetry")),
    log:
        paths_module.shared_log("mcp/tuned_train_{server}.log"),
    wildcard_constraints:
        server="|".join(MCP_TUNED_SERVERS),
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=20,
    params:
        sessions=MCP_TUNED["sessions"],
        steps=MCP_TUNED["steps"],
        budget=mcp_tuned_budget(),
    shell:
        "tersetalk mcp-experiment tuned-train --server {wildcards.server} "
        "--env-info {input.env} --target {input.target} --sessions {params.sessions} "
        "--steps {params.steps} --budget {params.budget} "
        "--telemetry-dir {output.telemetry} --out {output.parquet} > {log} 2>&1"


rule mcp_tuned_analyze:
    input:
        mcp_tuned_file("telemetry"),
    output:
        tuned=mcp_tuned_file("tuned.yaml"),
        evidence=mcp_tuned_file("evidence.csv"),
    log:
        paths_module.shared_log("mcp/tuned_analyze_{server}.log"),
    wildcard_constraints:
        server="|".join(MCP_TUNED_SERVERS),
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "tersetalk mcp tune analyze --telemetry-dir {input} --out {output.tuned} "
        "--evidence {output.evidence} > {log} 2>&1"


rule mcp_tuned_eval:
    input:
        env=paths_module.MCP_ENV,
        target=mcp_tuned_target,
        tuned=mcp_tuned_file("tuned.yaml"),
        evidence=mcp_tuned_file("evidence.csv"),
    output:
        mcp_tuned_file("eval.parquet"),
    log:
        paths_module.shared_log("mcp/tuned_eval_{server}.log"),
    wildcard_constraints:
        server="|".join(MCP_TUNED_SERVERS),
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        sessions=MCP_TUNED["sessions"],
        steps=MCP_TUNED["steps"],
        budget=mcp_tuned_budget(),
    shell:
        "tersetalk mcp-experiment tuned-eval --server {wildcards.server} "
        "--env-info {input.env} --target {input.target} --sessions {params.sessions} "
        "--steps {params.steps} --budget {params.budget} --tuned {input.tuned} "
        "--evidence {input.evidence} --out {output} > {log} 2>&1"


rule mcp_tuned_report:
    input:
        expand(
            mcp_tuned_file("{split}.parquet"),
            server=mcp_tuned_servers(),
            split=["train", "eval"],
        ),
    output:
        parquet=paths_module.MCP_TUNED_RUNS,
        csv=paths_module.MCP_TUNED_SUMMARY,
        pdf=paths_module.MCP_TUNED_PDF,
        png=report(
            paths_module.MCP_TUNED_PNG,
            caption="../report/mcp_tuned.rst",
            category="MCP proxy",
        ),
    log:
        paths_module.shared_log("mcp/tuned_report.log"),
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        stem=lambda wildcards, output: output.pdf.removesuffix(".pdf"),
    shell:
        "tersetalk mcp-experiment tuned-report --runs {input} --out {output.parquet} "
        "--csv {output.csv} --out-stem {params.stem} > {log} 2>&1"
