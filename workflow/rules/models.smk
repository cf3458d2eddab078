# Model sensitivity (sensitivity.models): every system again per model, under
# results/models/{model}/ (calibration, runs, metrics, scores, summary), by the same rules
# as the default model's results/ tree; then one figure and table compare the models.
# Nothing here exists when sensitivity.models is empty (the default).


include: "helpers/models.smk"


if SENSITIVITY:

    use rule run_system as model_run_system with:
        output:
            model_path(run_output()),
        log:
            model_path(run_log()),

    if SHARD_SIZE:

        use rule merge_run as model_merge_run with:
            output:
                model_path(paths.RUN),
            log:
                "results/models/{model}/logs/run/{task}/{system}/{variant}.merge.log",

    use rule calibration_run as model_calibration_run with:
        output:
            model_path(paths.CALIBRATION_RUN),
        log:
            "results/models/{model}/logs/calibration/{task}/{system}/{point}.log",

    # the inputs are calibrate's: its input functions read the {model} wildcard
    use rule calibrate as model_calibrate with:
        output:
            model_path(paths.CALIBRATION),
        log:
            "results/models/{model}/logs/calibration/{task}.log",

    use rule score as model_score with:
        input:
            run=model_path(paths.RUN),
            sample=paths.SAMPLE,
            reference=reference_run,
        output:
            records=model_path(paths.METRICS),
            score=model_path(paths.SCORES),
        log:
            "results/models/{model}/logs/score/{task}/{system}/{variant}.log",

    use rule aggregate as model_aggregate with:
        input:
            model_score_targets,
        output:
            summary=model_path(paths.SUMMARY),
            csv="results/models/{model}/summary.csv",
        log:
            "results/models/{model}/logs/aggregate.log",

    rule model_sensitivity:
        input:
            **{name: paths.for_model(paths.SUMMARY, name) for name in SENSITIVITY},
        output:
            png=report(
                "figures/model_sensitivity.png",
                caption="../report/model_sensitivity.rst",
                category="Model sensitivity",
            ),
            pdf="figures/model_sensitivity.pdf",
            table="results/tables/models.csv",
        log:
            "results/logs/plot/model_sensitivity.log",
        conda:
            ENV
        resources:
            mem_mb=2000,
            runtime=10,
        params:
            summaries=lambda wildcards, input: " ".join(
                f"--summary {name}={path}" for name, path in input.items()
            ),
            reference=config["evaluation"]["reference"],
            stem=lambda wildcards, output: output.pdf.removesuffix(".pdf"),
        shell:
            "tersetalk models compare {params.summaries} --reference {params.reference} "
            "--table {output.table} --out-stem {params.stem} > {log} 2>&1"


rule sensitivity:
    input:
        sensitivity_targets(),
