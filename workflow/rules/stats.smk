# Paired bootstrap CIs, non-inferiority of accuracy, paired tests of token reduction, and
# the targets table.


from tersetalk.core import figmeta  # report captions: what each file recorded


include: "helpers/stats.smk"


rule noninferiority:
    input:
        score_manifests(run_triples()),
    output:
        table=paths.results("stats/noninferiority.parquet"),
        csv=report(
            paths.results("stats/noninferiority.csv"),
            caption="../report/noninferiority.rst",
            category="Tables",
        ),
        tex=paths.results("stats/noninferiority.tex"),
    log:
        paths.results("logs/stats.log"),
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        records=run_targets(paths.METRICS),
        comparisons=json.dumps(config["evaluation"]["comparisons"]),
        # task -> runs scheduled on it: a comparison is tested where both of its runs are
        planned=json.dumps(planned_runs(config), sort_keys=True),
        margin=config["evaluation"]["margin"],
        alpha=config["evaluation"]["alpha"],
        n_resamples=config["evaluation"]["n_resamples"],
        seed=config["evaluation"]["seed"],
    shell:
        "tersetalk stats {params.records} --comparisons {params.comparisons:q} "
        "--planned {params.planned:q} "
        "--margin {params.margin} --alpha {params.alpha} "
        "--n-resamples {params.n_resamples} --seed {params.seed} "
        "--out {output.table} --csv {output.csv} --tex {output.tex} > {log} 2>&1"


rule stats:
    input:
        stats_targets(),
        paths.results("tables/targets.csv"),


rule targets:
    input:
        summary=paths.SUMMARY,
        stats=paths.results("stats/noninferiority.parquet"),
        records=score_manifests(run_triples()),
        # the format study's results, when the default target holds it (FORMATS_STUDIED)
        formats=(
            [
                paths.results("formats/dedup.parquet"),
                paths.results("formats/comprehension.parquet"),
                paths.results("formats/savings_by_shape.csv"),
            ]
            if FORMATS_STUDIED
            else []
        ),
    output:
        csv=report(
            paths.results("tables/targets.csv"),
            caption="../report/targets.rst",
            category="Tables",
        ),
        tex=paths.results("tables/targets.tex"),
    log:
        paths.results("logs/targets.log"),
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        # the sections the table reads: the reference, the margin, the mediator's budget,
        # which formats variants have a token budget
        config=json.dumps(targets_config(config), sort_keys=True),
        records=run_targets(paths.METRICS),
        # results/<key>/formats/, beside the table's results/<key>/tables/ (read if there)
        formats=lambda wildcards, output: os.path.join(
            os.path.dirname(os.path.dirname(output.csv)), "formats"
        ),
        # results/<key>/topology/, beside the table's results/<key>/tables/
        topology=lambda wildcards, output: os.path.join(
            os.path.dirname(os.path.dirname(output.csv)), "topology"
        ),
    shell:
        "tersetalk targets {params.records} --summary {input.summary} --stats {input.stats} "
        "--config-json {params.config:q} --bench-dir "
        + paths_module.BENCH_DIR
        + " --formats-dir {params.formats} "
        "--topology-dir {params.topology} --csv {output.csv} --tex {output.tex} > {log} 2>&1"


# The simulation study of the statistics (not in the default target: it needs no model and
# describes the methods, not the data): `snakemake --cores all stats_sim`. The grid is the
# config's stats_sim section; margin and alpha left at null are the evaluation section's.
rule stats_sim:
    output:
        table=paths.results("stats/sim/table.parquet"),
        csv=paths.results("stats/sim/table.csv"),
        summary=paths.results("stats/sim/summary.csv"),
        markdown=paths.results("stats/sim/summary.md"),
        figures=multiext(paths.figure("stats_sim"), ".png", ".pdf"),
        more=multiext(paths.figure("stats_sim_more"), ".png", ".pdf"),
    log:
        paths.results("logs/stats_sim.log"),
    conda:
        ENV
    # grid points run in worker processes (the table does not depend on their number)
    threads: os.cpu_count() or 1
    resources:
        mem_mb=2000,
        runtime=120,
    params:
        config=json.dumps(
            {
                "stats_sim": config["stats_sim"],
                "evaluation": {k: config["evaluation"][k] for k in ("margin", "alpha")},
            },
            sort_keys=True,
        ),
        stem=lambda wildcards, output: output.figures[0].removesuffix(".png"),
    shell:
        "tersetalk stats-sim --config-json {params.config:q} --workers {threads} "
        "--out {output.table} --csv {output.csv} --summary {output.summary} "
        "--markdown {output.markdown} --figure {params.stem} > {log} 2>&1"
