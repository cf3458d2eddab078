# Models side by side. Each model's results live in its own folder, results/<key>/ (the
# configured model's: paths; see tersetalk.core.paths), so switching `models:` adds results.
# Model sensitivity (sensitivity.models) runs every system again per listed model, under
# results/{model}/ (calibration, runs, metrics, scores, summary), by the same rules as the
# configured model's; `compare` draws every model that has a summary side by side.


from tersetalk.core import figmeta  # report captions: what each file recorded


include: "helpers/models.smk"


# The sensitivity models' twins of the rules that write one model's files: the same
# rules with a {model} wildcard, which matches only sensitivity.models' keys (none: the
# twins match no file), so every config has the same rules.
use rule run_system as model_run_system with:
    output:
        model_path(run_output()),
    log:
        model_path(run_log()),


use rule merge_run as model_merge_run with:
    output:
        model_path(paths.RUN),
    log:
        model_path(paths.results("logs/run/{task}/{system}/{variant}.merge.log")),


ruleorder: model_run_system > model_merge_run


use rule run_batch as model_run_batch with:
    output:
        model_path(paths.RUN_BATCH),
    log:
        model_path(paths.results("logs/run/{task}/{phase}_{batch}.log")),


use rule calibration_run as model_calibration_run with:
    output:
        model_path(paths.CALIBRATION_RUN),
    log:
        model_path(paths.results("logs/calibration/{task}/{system}/{point}.log")),


use rule calibration_sweep as model_calibration_sweep with:
    output:
        model_path(paths.SWEEP),
    log:
        model_path(paths.results("logs/calibration/{task}/{batch}.sweep.log")),


# the inputs are calibrate's: its input functions read the {model} wildcard
use rule calibrate as model_calibrate with:
    output:
        model_path(paths.CALIBRATION),
    log:
        model_path(paths.results("logs/calibration/{task}.log")),


use rule score as model_score with:
    output:
        model_path(paths.SCORE_GROUP),
    log:
        model_path(paths.results("logs/score/{task}/{group}.log")),


use rule score_run as model_score_run with:
    input:
        run=model_path(paths.RUN),
        sample=paths.SAMPLE,
        reference=reference_run,
    output:
        records=model_path(paths.METRICS),
        scores=model_path(paths.SCORES),
    log:
        model_path(paths.results("logs/score/{task}/{system}/{variant}.log")),


use rule aggregate as model_aggregate with:
    input:
        model_score_manifests,
    output:
        summary=model_path(paths.SUMMARY),
        csv=model_path(paths.results("summary.csv")),
    log:
        model_path(paths.results("logs/aggregate.log")),
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        scores=model_score_targets,


# Every model with results: the configured one and the sensitivity models (inputs, built
# if missing), and the models whose summaries are on disk when the job runs (an earlier
# `models:`, read as they are: `--others-in`; after a new one, `--forcerun
# model_sensitivity` reads it).
rule model_sensitivity:
    input:
        unpack(compared_summaries),
    output:
        png=report(
            paths_module.COMPARE_PNG,
            caption="../report/model_sensitivity.rst",
            category="Model sensitivity",
        ),
        pdf=paths_module.COMPARE_PDF,
        table=paths_module.COMPARE_TABLE,
    log:
        paths_module.shared_log("compare_models.log"),
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        summaries=lambda wildcards, input: " ".join(
            f"--summary {name}={path}" for name, path in input.items()
        ),
        reference=config["evaluation"]["reference"],
        stem=lambda wildcards, output: output.pdf.removesuffix(".pdf"),
        # the results folder the models' folders are in (results/<key>/summary.parquet)
        results=lambda wildcards, input: os.path.dirname(os.path.dirname(input[0])),
    shell:
        "tersetalk models compare {params.summaries} --others-in {params.results} "
        "--reference {params.reference} "
        "--table {output.table} --out-stem {params.stem} > {log} 2>&1"


rule sensitivity:
    input:
        sensitivity_targets(),


rule compare:
    input:
        paths_module.COMPARE_TABLE,
