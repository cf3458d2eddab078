# Figures and paper tables; one named target per ablation.


from tersetalk.core import figmeta  # report captions: what each file recorded


include: "helpers/figures.smk"


# The main figures and table: the headline runs (each system's default, the baselines,
# the format study's encoders); the ablation runs have a figure each (plot_ablations).
rule plot:
    input:
        summary=HEADLINE_SUMMARY,
        records=headline_files(paths.METRICS),
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
    shell:
        "tersetalk plot --summary {input.summary} --records {input.records} "
        "--reference {params.reference} --out-dir {params.out_dir} "
        "--tables-dir {params.tables_dir} --seed {params.seed} > {log} 2>&1"


# Every ablation's figure in one job: one read of the scores, one import of matplotlib
# (17 jobs of ~3 s, mostly imports, made one). Their scores come from the two
# score_ablations jobs, which score a task's ablation runs together, so building one
# ablation's target already needed the runs of every ablation on its tasks.
rule plot_ablations:
    input:
        scores=ablation_files(paths.SCORES),
        records=ablation_files(paths.METRICS),
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
        out_dir=lambda wildcards, output: os.path.dirname(output[0]),
    shell:
        "tersetalk plot-ablations {input.scores} --records {input.records} "
        "--ablations-json {params.ablations:q} --out-dir {params.out_dir} > {log} 2>&1"


# One target per configured ablation (ablation_caps, ablation_budget, ... and whatever
# else the config names): `snakemake --cores all ablation_<name>` builds what that figure
# needs (its tasks' ablation runs, scored together) and plot_ablations draws them all.
for _ablation in config["ablations"]:

    rule:
        name:
            f"ablation_{_ablation}"
        input:
            ablation_target(_ablation),


rule ablations:
    input:
        ablation_targets(),


rule figures:
    input:
        figure_targets(),


rule tables:
    input:
        table_targets(),
