# Per-example metrics (paired with the free-form reference run), per-run summary rows,
# and the summary table.


rule score:
    input:
        run="results/runs/{task}/{system}/{variant}.parquet",
        sample="results/samples/{task}.parquet",
        reference=reference_run,
    output:
        records="results/metrics/{task}/{system}/{variant}.parquet",
        score="results/scores/{task}/{system}/{variant}.parquet",
    log:
        "results/logs/score/{task}/{system}/{variant}.log",
    conda:
        ENV
    resources:
        mem_mb=3000,
        runtime=10,
    shell:
        "tersetalk score --run {input.run} --sample {input.sample} "
        "--reference {input.reference} --out-records {output.records} "
        "--out {output.score} > {log} 2>&1"


rule aggregate:
    input:
        score_targets(),
    output:
        summary="results/summary.parquet",
        csv=report(
            "results/summary.csv",
            caption="../report/summary.rst",
            category="Tables",
        ),
    log:
        "results/logs/aggregate.log",
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "tersetalk aggregate {input} --out {output.summary} --csv {output.csv} > {log} 2>&1"
