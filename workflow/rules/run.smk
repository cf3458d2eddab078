# One job = (task, system, variant): every example of the sample through one system.


rule run_system:
    input:
        unpack(run_input),
    output:
        "results/runs/{task}/{system}/{variant}.parquet",
    log:
        "results/logs/run/{task}/{system}/{variant}.log",
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
