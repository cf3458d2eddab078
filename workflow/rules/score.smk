# Per-run metrics (recomputed with the official scorers) and the summary table.


rule score:
    input:
        "results/runs/{task}/{system}/{variant}.parquet",
    output:
        "results/scores/{task}/{system}/{variant}.parquet",
    log:
        "results/logs/score/{task}/{system}/{variant}.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        "tersetalk score --run {input} --out {output} > {log} 2>&1"


rule aggregate:
    input:
        score_targets(),
    output:
        summary="results/summary.parquet",
        csv="results/summary.csv",
    log:
        "results/logs/aggregate.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        "tersetalk aggregate {input} --out {output.summary} --csv {output.csv} > {log} 2>&1"
