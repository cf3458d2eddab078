# Figures and paper tables; one named target per ablation.


from tersetalk import figmeta  # report captions: what each file recorded


include: "helpers/figures.smk"


# The main figures and table: the headline runs (each system's default, the baselines,
# the format study's encoders); the ablation runs have a figure each (plot_ablation).
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


rule plot_ablation:
    input:
        scores=ablation_files(paths.SCORES),
        records=ablation_files(paths.METRICS),
    output:
        png=report(
            paths.figure("ablation_{ablation}.png"),
            caption="../report/ablation.rst",
            category="Ablations",
            subcategory="{ablation}",
        ),
        pdf=paths.figure("ablation_{ablation}.pdf"),
    log:
        paths.results("logs/plot/ablation_{ablation}.log"),
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        system=lambda wildcards: config["ablations"][wildcards.ablation]["system"],
        setting=lambda wildcards: config["ablations"][wildcards.ablation]["setting"],
        variants=lambda wildcards: ",".join(config["ablations"][wildcards.ablation]["variants"]),
        values=lambda wildcards: json.dumps(ablation_values(config, wildcards.ablation)),
        stem=lambda wildcards, output: output.pdf.removesuffix(".pdf"),
    shell:
        "tersetalk plot-ablation {input.scores} --records {input.records} "
        "--system {params.system} --setting {params.setting} "
        "--variants {params.variants} --values {params.values:q} --out-stem {params.stem} "
        "> {log} 2>&1"


# One target per configured ablation (ablation_caps, ablation_budget, ... and whatever
# else the config names), so `snakemake --cores all ablation_<name>` builds one figure.
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
