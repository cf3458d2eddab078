# Paired bootstrap CIs, non-inferiority of accuracy, paired tests of token reduction.


rule stats:
    input:
        metric_targets(),
    output:
        table="results/stats/noninferiority.parquet",
        csv="results/stats/noninferiority.csv",
        tex="results/stats/noninferiority.tex",
    params:
        comparisons=json.dumps(config["evaluation"]["comparisons"]),
        margin=config["evaluation"]["margin"],
        alpha=config["evaluation"]["alpha"],
        n_resamples=config["evaluation"]["n_resamples"],
        seed=config["evaluation"]["seed"],
    log:
        "results/logs/stats.log",
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "tersetalk stats {input} --comparisons {params.comparisons:q} "
        "--margin {params.margin} --alpha {params.alpha} "
        "--n-resamples {params.n_resamples} --seed {params.seed} "
        "--out {output.table} --csv {output.csv} --tex {output.tex} > {log} 2>&1"
