# Sweep each calibrated system's grid on the calibration shard and choose its settings.


from tersetalk import figmeta  # report captions: what each file recorded


include: "helpers/calibrate.smk"


rule calibration_run:
    input:
        unpack(calibration_run_input),
    output:
        paths.CALIBRATION_RUN,
    log:
        paths.results("logs/calibration/{task}/{system}/{point}.log"),
    priority: HEADLINE_PRIORITY
    conda:
        ENV
    threads: MODEL_THREADS
    resources:
        mem_mb=4000,
        runtime=run_runtime_min,
    params:
        spec=calibration_spec_json,
    shell:
        "tersetalk run --spec-json {params.spec:q} --sample {input.sample} "
        "--out {output} 2>&1 | tee {log}"


rule calibrate:
    input:
        # the reference runs: evaluation.reference's and the systems' own
        unpack(calibration_reference_inputs),
        runs=calibration_run_targets,
        # the facts whose arrival at the Worker is checked (answer preservation)
        sample=paths.CALIBRATION_SAMPLE,
    output:
        report(
            paths.CALIBRATION,
            caption="../report/calibration.rst",
            category="Calibration",
        ),
    log:
        paths.results("logs/calibration/{task}.log"),
    priority: HEADLINE_PRIORITY
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        spec=calibration_options_json,
    shell:
        "tersetalk calibrate {input.runs} --task {wildcards.task} --sample {input.sample} "
        "--reference-run {input.reference} {input.system_references} "
        "--spec-json {params.spec:q} --out {output} > {log} 2>&1"


rule calibration:
    input:
        calibration_targets(),
