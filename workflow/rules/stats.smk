# Paired bootstrap CIs, non-inferiority of accuracy, paired tests of token reduction.


rule noninferiority:
    input:
        metric_targets(),
    output:
        table="results/stats/noninferiority.parquet",
        csv=report(
            "results/stats/noninferiority.csv",
            caption="../report/noninferiority.rst",
            category="Tables",
        ),
        tex="results/stats/noninferiority.tex",
    log:
        "results/logs/stats.log",
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        comparisons=json.dumps(config["evaluation"]["comparisons"]),
        # task -> runs scheduled on it: a comparison is tested where both of its runs are
        planned=planned_runs_json(),
        margin=config["evaluation"]["margin"],
        alpha=config["evaluation"]["alpha"],
        n_resamples=config["evaluation"]["n_resamples"],
        seed=config["evaluation"]["seed"],
    shell:
        "tersetalk stats {input} --comparisons {params.comparisons:q} "
        "--planned {params.planned:q} "
        "--margin {params.margin} --alpha {params.alpha} "
        "--n-resamples {params.n_resamples} --seed {params.seed} "
        "--out {output.table} --csv {output.csv} --tex {output.tex} > {log} 2>&1"


rule stats:
    input:
        stats_targets(),
