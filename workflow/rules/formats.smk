# The format study: format-adaptive encoding of tool payloads over the
# corpus in data/toolresponses. Target: `snakemake --cores all formats` (also in `all`).
#   savings       tokens per payload x encoder x tokenizer (lossless only)
#   knapsack      exact vs greedy vs binary at budgets (fractions of compact-JSON tokens)
#   dedup         a seeded replay of repeated tool calls through the L0 cache
#   comprehension questions with gold answers by construction, answered by the model
# figures/<key>/formats_*.{png,pdf} and results/<key>/formats/*.csv summarise them.


from tersetalk.core import figmeta  # report captions: what each file recorded


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
        paths.results("formats/{experiment}.parquet"),
    log:
        paths.results("logs/formats/{experiment}.log"),
    wildcard_constraints:
        experiment="savings|knapsack|dedup",
    priority: lambda wildcards: FORMATS_FILL[wildcards.experiment]
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
        paths.results("formats/comprehension.parquet"),
    log:
        paths.results("logs/formats/comprehension.log"),
    priority: FILL_PRIORITY
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
        savings=paths.results("formats/savings.parquet"),
        knapsack=paths.results("formats/knapsack.parquet"),
        dedup=paths.results("formats/dedup.parquet"),
        comprehension=paths.results("formats/comprehension.parquet"),
    output:
        figmeta.report_figures(formats_targets(), "Format study"),
    log:
        paths.results("logs/formats/figures.log"),
    priority: FORMATS_FILL["figures"]
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        figures=lambda wildcards, output: os.path.dirname(output[0]),
        tables=lambda wildcards, output: os.path.dirname(output[-1]),
    shell:
        "tersetalk formats plot --savings {input.savings} "
        "--knapsack {input.knapsack} --dedup {input.dedup} "
        "--comprehension {input.comprehension} --figures {params.figures} "
        "--tables {params.tables} "
        "> {log} 2>&1"
