# Sweep each calibrated system's grid on the calibration shard and choose its settings.


rule calibration_run:
    input:
        unpack(calibration_run_input),
    output:
        "results/calibration/runs/{task}/{system}/{point}.parquet",
    log:
        "results/logs/calibration/{task}/{system}/{point}.log",
    conda:
        ENV
    threads: config["models"]["threads"] or max(1, (os.cpu_count() or 2) // 2)
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
        runs=calibration_run_targets,
        # the facts whose arrival at the Worker is checked (answer preservation)
        sample="results/samples/{task}.calibration.parquet",
        reference="results/calibration/runs/{task}/"
        + config["evaluation"]["reference"]
        + ".parquet",
        # calibration.<system>.reference: a system judged against its own reference run
        system_references=calibration_reference_inputs,
    output:
        report(
            "results/calibration/{task}.yaml",
            caption="../report/calibration.rst",
            category="Calibration",
        ),
    log:
        "results/logs/calibration/{task}.log",
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        reference=config["evaluation"]["reference"],
        margin=config["evaluation"]["margin"],
        objectives=calibration_objective_args,
        preservation_margins=calibration_preservation_margin_args,
        system_references=calibration_reference_args,
    shell:
        "tersetalk calibrate {input.runs} --task {wildcards.task} --sample {input.sample} "
        "--reference-run {input.reference} --reference-label {params.reference} "
        "{params.system_references} --margin {params.margin} {params.objectives} "
        "{params.preservation_margins} --out {output} > {log} 2>&1"


rule calibration:
    input:
        calibration_targets(),
