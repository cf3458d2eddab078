# Microbenchmarks: MB-1 field extraction, MB-2 stream boundaries, MB-3 wire
# formats, MB-4 the M# memory store (insert/lookup/evict at 1k-10k entries).
# Target: `snakemake --cores 1 bench` (not part of `all`: timings describe
# this machine, not the paper's data). The corpus reads the config's run files
# that exist when it is built (bench_corpus_runs(): a param, so the benchmarks
# never force a model run; after new runs, `--forcerun bench_corpus` reads
# them) and adds a seeded synthetic size sweep; MB-4 needs no corpus (seeded
# synthetic texts).


from tersetalk.core import figmeta  # report captions: what each file recorded


include: "helpers/bench.smk"


BENCHMARKS = ["mb1", "mb2", "mb3", "mb4"]


rule bench_corpus:
    output:
        paths_module.BENCH_CORPUS,
    log:
        paths_module.shared_log("bench/corpus.log"),
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        runs=bench_corpus_runs(),
    shell:
        "tersetalk bench corpus --present-runs {params.runs} --out {output} > {log} 2>&1"


rule bench_run:
    input:
        paths_module.BENCH_CORPUS,
    output:
        parquet=paths_module.BENCH_RESULT,
        csv=paths_module.BENCH_TABLE,
    log:
        paths_module.shared_log("bench/{mb}.log"),
    wildcard_constraints:
        mb="mb[123]",
    conda:
        ENV
    # every core (scaled down to --cores): a benchmark that shares the CPU with other
    # jobs measures them too, so bench jobs run one at a time and alone
    threads: os.cpu_count() or 1
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        repeats=config["bench"]["repeats"],
    shell:
        "tersetalk bench run --which {wildcards.mb} --corpus {input} "
        "--repeats {params.repeats} --out {output.parquet} > {log} 2>&1"


rule bench_mb4:
    output:
        parquet=paths_module.BENCH_RESULT.format(mb="mb4"),
        csv=paths_module.BENCH_TABLE.format(mb="mb4"),
    log:
        paths_module.shared_log("bench/mb4.log"),
    conda:
        ENV
    # alone on every core, as bench_run
    threads: os.cpu_count() or 1
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        repeats=config["bench"]["repeats"],
    shell:
        "tersetalk bench run --which mb4 --repeats {params.repeats} "
        "--out {output.parquet} > {log} 2>&1"


rule bench_plot:
    input:
        mb1=paths_module.BENCH_RESULT.format(mb="mb1"),
        mb2=paths_module.BENCH_RESULT.format(mb="mb2"),
        mb3=paths_module.BENCH_RESULT.format(mb="mb3"),
        mb4=paths_module.BENCH_RESULT.format(mb="mb4"),
    output:
        pdf=paths_module.BENCH_PDF,
        png=report(
            paths_module.BENCH_PNG,
            caption="../report/bench.rst",
            category="Microbenchmarks",
        ),
    log:
        paths_module.shared_log("bench/plot.log"),
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        stem=lambda wildcards, output: output.pdf.removesuffix(".pdf"),
    shell:
        "tersetalk bench plot --mb1 {input.mb1} --mb2 {input.mb2} --mb3 {input.mb3} "
        "--mb4 {input.mb4} --out-stem {params.stem} > {log} 2>&1"


# The dashboard's progress events: whole runs of the reference system with
# events on and off, alternating, call cache warm (the runner's cheapest real case).
# Target: `snakemake --cores 2 bench_events`. Not part of `bench`, which never calls the
# model: this one fills the call cache for its first examples once (free after a run).
EVENTS_BENCH_TASK = "hotpotqa" if "hotpotqa" in config["tasks"] else config["tasks"][0]


rule bench_events:
    input:
        sample=paths.SAMPLE.format(task=EVENTS_BENCH_TASK),
    output:
        paths_module.BENCH_EVENTS,
    log:
        paths_module.shared_log("bench/events.log"),
    conda:
        ENV
    threads: os.cpu_count() or 1
    resources:
        mem_mb=4000,
        runtime=20,
    params:
        spec=lambda wildcards: json.dumps(
            run_spec(config, EVENTS_BENCH_TASK, "freeform", "default")
        ),
        repeats=config["bench"]["repeats"],
        examples=2,
    shell:
        "tersetalk bench events --spec-json {params.spec:q} --sample {input.sample} "
        "--limit {params.examples} --repeats {params.repeats} --out {output} > {log} 2>&1"


# The driver's own cost per model call (target `snakemake --cores 2 bench_driver`; not
# part of `bench`: it takes minutes): `tersetalk run` against a loopback
# OpenAI-compatible server answering after bench.driver.latency_ms, at each
# bench.driver.in_flight level, beside the plain OpenAI SDK making as many calls.
rule bench_driver:
    output:
        parquet=paths_module.BENCH_DRIVER,
        csv=paths_module.BENCH_DRIVER_TABLE,
        png=paths_module.BENCH_DRIVER_PNG,
        pdf=paths_module.BENCH_DRIVER_PDF,
    log:
        paths_module.shared_log("bench/driver.log"),
    conda:
        ENV
    # alone on every core: the client's CPU per call is what is measured
    threads: os.cpu_count() or 1
    resources:
        mem_mb=3000,
        runtime=60,
    params:
        latency=" ".join(str(v) for v in config["bench"]["driver"]["latency_ms"]),
        in_flight=" ".join(str(v) for v in config["bench"]["driver"]["in_flight"]),
        examples=config["bench"]["driver"]["examples"],
    shell:
        "python -m tersetalk.bench.driver measure --latency-ms '{params.latency}' "
        "--in-flight '{params.in_flight}' --examples {params.examples} "
        "--out {output.parquet} --plot {output.png} > {log} 2>&1"


rule bench:
    input:
        expand(paths_module.BENCH_RESULT, mb=BENCHMARKS),
        paths_module.BENCH_PDF,
        paths_module.BENCH_PNG,
