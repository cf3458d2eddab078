# One job = (task, system, variant[, shard]): the examples of the sample (or of one shard
# of it, with run.shard_size) through one system; shards are merged into one run file.


rule run_system:
    input:
        unpack(run_input),
    output:
        run_output(),
    log:
        run_log(),
    conda:
        ENV
    threads: config["models"]["threads"] or max(1, (os.cpu_count() or 2) // 2)
    resources:
        mem_mb=4000,
        runtime=run_runtime_min,
    params:
        spec=spec_json,
    shell:
        "tersetalk run --spec-json {params.spec:q} --sample {input.sample} "
        "--out {output} 2>&1 | tee {log}"


if SHARD_SIZE:

    # Shard i of n: rows [i * shard_size, (i + 1) * shard_size) of the sample.
    rule shard_sample:
        input:
            "results/samples/{task}.parquet",
        output:
            "results/samples/shards/{task}/{shard}.parquet",
        log:
            "results/logs/sample/shards/{task}/{shard}.log",
        conda:
            ENV
        resources:
            mem_mb=1000,
            runtime=5,
        params:
            size=SHARD_SIZE,
        shell:
            "tersetalk shard-sample --sample {input} --shard {wildcards.shard} "
            "--shard-size {params.size} --out {output} > {log} 2>&1"

    # The shards in order, checked against the sample: the run file of an unsharded job.
    rule merge_run:
        input:
            shards=run_shards,
            sample="results/samples/{task}.parquet",
        output:
            "results/runs/{task}/{system}/{variant}.parquet",
        log:
            "results/logs/run/{task}/{system}/{variant}.merge.log",
        conda:
            ENV
        resources:
            mem_mb=2000,
            runtime=5,
        shell:
            "tersetalk merge-runs {input.shards} --sample {input.sample} "
            "--out {output} > {log} 2>&1"
