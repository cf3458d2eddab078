# Figures and paper tables.


from tersetalk.core import figmeta  # report captions: what each file recorded


include: "helpers/figures.smk"


# The main figures and table: the headline runs (each system's default, the baselines,
# the format study's encoders); the ablation runs have a figure each (plot_ablations).
rule plot:
    input:
        summary=HEADLINE_SUMMARY,
        records=score_manifests(headline_triples()),
    output:
        pareto=report(
            paths.figure("quality_vs_tokens.png"),
            caption="../report/quality_vs_tokens.rst",
            category="Main results",
        ),
        pareto_pdf=paths.figure("quality_vs_tokens.pdf"),
        roles=report(
            paths.figure("token_breakdown.png"),
            caption="../report/token_breakdown.rst",
            category="Main results",
        ),
        roles_pdf=paths.figure("token_breakdown.pdf"),
        length=report(
            paths.figure("accuracy_by_length.png"),
            caption="../report/accuracy_by_length.rst",
            category="Main results",
        ),
        length_pdf=paths.figure("accuracy_by_length.pdf"),
        table=report(
            paths.results("tables/main.csv"),
            caption="../report/main_table.rst",
            category="Tables",
        ),
        tex=paths.results("tables/main.tex"),
    log:
        paths.results("logs/plot/main.log"),
    priority: HEADLINE_PRIORITY
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        out_dir=lambda wildcards, output: os.path.dirname(output.pareto),
        tables_dir=lambda wildcards, output: os.path.dirname(output.table),
        reference=config["evaluation"]["reference"],
        seed=config["evaluation"]["seed"],
        records=headline_files(paths.METRICS),
    shell:
        "tersetalk plot --summary {input.summary} --records {params.records} "
        "--reference {params.reference} --out-dir {params.out_dir} "
        "--tables-dir {params.tables_dir} --seed {params.seed} > {log} 2>&1"


# Every ablation's figure in one job: one read of the scores, one import of matplotlib
# (17 jobs of ~3 s, mostly imports, made one). Their scores come from each task's
# ablation score job (score, group ablations), which scores the task's ablation runs
# together.
rule plot_ablations:
    input:
        score_manifests(ablation_triples()),
    output:
        ablation_figures(),
    log:
        paths.results("logs/plot/ablations.log"),
    priority: ABLATION_PRIORITY
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        ablations=ablations_json(),
        scores=ablation_files(paths.SCORES),
        records=ablation_files(paths.METRICS),
        out_dir=lambda wildcards, output: os.path.dirname(output[0]),
    shell:
        "tersetalk plot-ablations {params.scores} --records {params.records} "
        "--ablations-json {params.ablations:q} --out-dir {params.out_dir} > {log} 2>&1"


# Every ablation's figure: plot_ablations draws them all in one job from the scores of
# every ablation's runs, so one ablation's figure needs what all of them need.
rule ablations:
    input:
        ablation_targets(),


rule figures:
    input:
        figure_targets(),


rule tables:
    input:
        table_targets(),
