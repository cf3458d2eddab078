# Scale: examples per second at several models.max_concurrency levels against
# local OpenAI-compatible servers (llama_cpp.server on the embedded model, several
# processes behind a least-busy proxy, since that server runs one request at a time).
# Target: `snakemake --cores 2 bench_concurrency`. Not part of `all` or `bench`: the
# numbers describe this machine, and every call reaches the model (empty call cache).
SCALE_BENCH_TASK = "gsm8k" if "gsm8k" in config["tasks"] else config["tasks"][0]
CONCURRENCY_LEVELS = "1,2,4"  # models.max_concurrency levels, measured in one run
CONCURRENCY_SERVERS = 2  # llama_cpp.server processes, one thread each
CONCURRENCY_EXAMPLES = 8  # the sample's first examples, the same at every level


rule bench_concurrency:
    input:
        sample=paths.SAMPLE.format(task=SCALE_BENCH_TASK),
    output:
        csv=paths_module.BENCH_CONCURRENCY,
        runs=paths_module.BENCH_CONCURRENCY_RUNS,
        png=paths_module.BENCH_CONCURRENCY_PNG,
    log:
        paths_module.shared_log("bench/concurrency.log"),
    conda:
        ENV
    # alone on every core: the servers are the work being measured
    threads: os.cpu_count() or 1
    resources:
        mem_mb=3000,
        runtime=60,
    params:
        spec=lambda wildcards: json.dumps(run_spec(config, SCALE_BENCH_TASK, "freeform", "default")),
        levels=CONCURRENCY_LEVELS,
        servers=CONCURRENCY_SERVERS,
        examples=CONCURRENCY_EXAMPLES,
        repeats=1,
    shell:
        "tersetalk bench concurrency --spec-json {params.spec:q} --sample {input.sample} "
        "--levels {params.levels} --servers {params.servers} --limit {params.examples} "
        "--repeats {params.repeats} --out {output.csv} > {log} 2>&1"
