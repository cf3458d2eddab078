# Seeded samples of each task: an evaluation sample and a disjoint calibration shard.


include: "helpers/data.smk"


rule sample:
    input:
        sample_input,
    output:
        eval=paths.SAMPLE,
        calibration=paths.CALIBRATION_SAMPLE,
    log:
        paths_module.shared_log("sample/{task}.log"),
    priority: HEADLINE_PRIORITY
    conda:
        ENV
    resources:
        mem_mb=3000,
        runtime=10,
    params:
        n=config["n_eval"],
        # 0 where no calibrated system runs (systems.<name>.tasks): nothing to calibrate
        calibration_n=sample_calibration_n,
        seed=config["seed"],
        source=config["data"]["source"],
        data_dir=config["data"]["dir"],
        # the task's options that decide which examples exist (toolqa's payload size)
        options=sample_task_options,
    shell:
        "tersetalk sample --task {wildcards.task} --n {params.n} "
        "--calibration-n {params.calibration_n} --seed {params.seed} "
        "--source {params.source} --data-dir {params.data_dir} "
        "--task-options {params.options:q} "
        "--out {output.eval} --calibration-out {output.calibration} > {log} 2>&1"
