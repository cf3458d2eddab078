# Sweep each calibrated system's grid on the calibration shard and choose its settings.


from tersetalk.core import figmeta  # report captions: what each file recorded


include: "helpers/calibrate.smk"


# A reference run on the calibration shard ({point}: its variant). The grid points are
# made by the sweeps below.
rule calibration_run:
    input:
        unpack(calibration_run_input),
    output:
        paths.CALIBRATION_RUN,
    log:
        paths.results("logs/calibration/{task}/{system}/{point}.log"),
    wildcard_constraints:
        point=REFERENCE_POINT,
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


# One job per task and batch runs the grids of its calibrated systems (a system alone, or
# LLMLingua and the hybrid together: tersetalk.pipeline.schedule.BATCH_WITH): `tersetalk run`
# with a spec per point, one after the other in one process, so the imports and
# LLMLingua's compressor are loaded once per job, not once per point or system. Each
# point still has its own run file, checkpoint and cached calls. As with run_batch, the
# rule declares the sweep's manifest (its points' run files with their digests).
rule calibration_sweep:
    input:
        unpack(calibration_sweep_input),
    output:
        paths.SWEEP,
    log:
        paths.results("logs/calibration/{task}/{batch}.sweep.log"),
    priority: HEADLINE_PRIORITY
    conda:
        ENV
    threads: MODEL_THREADS
    resources:
        mem_mb=4000,
        runtime=calibration_sweep_runtime_min,
    params:
        runs=calibration_sweep_runs,
    shell:
        "tersetalk run {params.runs} --sample {input.sample} --manifest {output} "
        "2>&1 | tee {log}"


rule calibrate:
    input:
        # the reference runs: evaluation.reference's and the systems' own
        unpack(calibration_reference_inputs),
        sweeps=calibration_sweep_targets,
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
        runs=calibration_run_targets,
    shell:
        "tersetalk calibrate {params.runs} --task {wildcards.task} --sample {input.sample} "
        "--reference-run {input.reference} {input.system_references} "
        "--spec-json {params.spec:q} --out {output} > {log} 2>&1"


rule calibration:
    input:
        calibration_targets(),
