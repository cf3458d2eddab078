# The format study (issue 15): format-adaptive encoding of tool payloads over the
# corpus in data/toolresponses. Target: `snakemake --cores all formats` (also in `all`).
#   savings       tokens per payload x encoder x tokenizer (lossless only)
#   knapsack      exact vs greedy vs binary at budgets (fractions of compact-JSON tokens)
#   dedup         a seeded replay of repeated tool calls through the L0 cache
#   comprehension questions with gold answers by construction, answered by the model
# figures/formats_*.{png,pdf} and results/formats/*.csv summarise them.


include: "helpers/formats.smk"


FORMATS_DATA = [
    os.path.join(config["formats"]["data_dir"], f) for f in ("json.jsonl", "markdown.jsonl")
]


rule formats:
    input:
        formats_targets(),


rule formats_experiment:
    input:
        FORMATS_DATA,
    output:
        "results/formats/{experiment}.parquet",
    log:
        "results/logs/formats/{experiment}.log",
    wildcard_constraints:
        experiment="savings|knapsack|dedup",
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        data=lambda w, input: os.path.dirname(input[0]),
        seed=config["seed"],
        tokenizers=" ".join(config["formats"]["tokenizers"]),
        budgets=" ".join(str(b) for b in config["formats"]["budgets"]),
        dedup=shlex.quote(json.dumps(config["formats"]["dedup"])),
    shell:
        "tersetalk formats experiment {wildcards.experiment} "
        "--data-dir {params.data} --out {output} --seed {params.seed} "
        "--tokenizers {params.tokenizers} --budgets {params.budgets} "
        "--dedup-json {params.dedup} > {log} 2>&1"


rule formats_comprehension:
    input:
        FORMATS_DATA[0],
    output:
        "results/formats/comprehension.parquet",
    log:
        "results/logs/formats/comprehension.log",
    conda:
        ENV
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        data=lambda w, input: os.path.dirname(input[0]),
        seed=config["seed"],
        models=shlex.quote(json.dumps(config["models"])),
        opts=shlex.quote(json.dumps(formats_comprehension_options())),
        cache=os.path.join(config["cache_dir"], "calls"),
    shell:
        "tersetalk formats experiment comprehension "
        "--data-dir {params.data} --out {output} --seed {params.seed} "
        "--models-json {params.models} --comprehension-json {params.opts} "
        "--cache-dir {params.cache} > {log} 2>&1"


rule formats_figures:
    input:
        savings="results/formats/savings.parquet",
        knapsack="results/formats/knapsack.parquet",
        dedup="results/formats/dedup.parquet",
        comprehension="results/formats/comprehension.parquet",
    output:
        formats_targets(),
    log:
        "results/logs/formats/figures.log",
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "tersetalk formats plot --savings {input.savings} "
        "--knapsack {input.knapsack} --dedup {input.dedup} "
        "--comprehension {input.comprehension} --figures figures --tables results/formats "
        "> {log} 2>&1"
