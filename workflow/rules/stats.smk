# Paired bootstrap CIs, non-inferiority of accuracy, paired tests of token reduction, and
# the targets table.


include: "helpers/stats.smk"


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
        planned=json.dumps(planned_runs(config), sort_keys=True),
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
        "results/tables/targets.csv",


rule targets:
    input:
        summary=paths.SUMMARY,
        stats="results/stats/noninferiority.parquet",
        records=metric_targets(),
        formats=[
            "results/formats/dedup.parquet",
            "results/formats/comprehension.parquet",
            "results/formats/savings_by_shape.csv",
        ],
        optional=targets_optional_inputs,
    output:
        csv=report(
            "results/tables/targets.csv",
            caption="../report/targets.rst",
            category="Tables",
        ),
        tex="results/tables/targets.tex",
    log:
        "results/logs/targets.log",
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        # the sections the table reads: the reference, the margin, the mediator's budget,
        # which formats variants have a token budget
        config=json.dumps(targets_config(config), sort_keys=True),
    shell:
        "tersetalk targets {input.records} --summary {input.summary} --stats {input.stats} "
        "--config {params.config:q} --bench-dir results/bench --formats-dir results/formats "
        "--topology-dir results/topology --csv {output.csv} --tex {output.tex} > {log} 2>&1"
