# One job = (task, system, variant[, shard]): the examples of the sample (or of one shard
# of it, with run.shard_size) through one system; shards are merged into one run file.


include: "helpers/run.smk"


rule run_system:
    input:
        unpack(run_input),
    output:
        run_output(),
    log:
        run_log(),
    wildcard_constraints:
        system=RUN_SYSTEM,
        variant=RUN_VARIANT,
    priority: run_priority
    conda:
        ENV
    threads: MODEL_THREADS
    resources:
        mem_mb=4000,
        runtime=run_runtime_min,
    params:
        spec=run_spec_json,
    shell:
        "tersetalk run --spec-json {params.spec:q} --sample {input.sample} "
        "--out {output} 2>&1 | tee {log}"


# Batches: runs of one task in one job, one after the other (`tersetalk run` with a spec
# per run), so the imports, and the model a system loads in its process, load once per
# batch, not once per run. Two phases (PHASES): the headline variants of the systems
# that load a model of their own (LLMLingua and the hybrid: the compressor; the mediator
# and MSP: the MiniLM judge), with the headline jobs; and every system's ablation-only
# variants, after them, the costliest batch first. Systems that load the same model
# share a batch (tersetalk.tasks.schedule.BATCH_WITH). Each run still has its own run
# file, checkpoint and cached calls, so a batch that reruns for one changed variant
# replays the others from the caches. Not with run.shard_size (PHASES are empty then).
for _phase, (_, _batches) in PHASES.items():
    for _task in TASKS:
        for _batch in _batches:
            if not batch_runs_of(_task, _batch, _phase):
                continue
            for _batch_model in [None, *(["{model}"] if SENSITIVITY else [])]:

                rule:
                    name:
                        ("model_" if _batch_model else "") + f"run_{_phase}_{_task}_{_batch}"
                    input:
                        unpack(
                            functools.partial(batch_input, task=_task, batch=_batch, phase=_phase)
                        ),
                    output:
                        batch_outputs(_task, _batch, _phase, _batch_model),
                    log:
                        paths.for_model(
                            paths.results(f"logs/run/{_task}/{_phase}_{_batch}.log"),
                            _batch_model,
                        ),
                    priority: batch_priority(_task, _batch, _phase)
                    conda:
                        ENV
                    threads: MODEL_THREADS
                    resources:
                        mem_mb=4000,
                        runtime=len(batch_runs_of(_task, _batch, _phase))
                        * (10 + 2 * config["n_eval"]),
                    params:
                        runs=functools.partial(batch_runs, task=_task, batch=_batch, phase=_phase),
                    shell:
                        "tersetalk run {params.runs} --sample {input.sample} 2>&1 | tee {log}"


if SHARD_SIZE:

    # Shard i of n: rows [i * shard_size, (i + 1) * shard_size) of the sample.
    rule shard_sample:
        input:
            paths.SAMPLE,
        output:
            paths.SAMPLE_SHARD,
        log:
            "results/logs/sample/shards/{task}/{shard}.log",
        priority: HEADLINE_PRIORITY
        conda:
            ENV
        resources:
            mem_mb=1000,
            runtime=5,
        params:
            size=SHARD_SIZE,
        shell:
            "tersetalk shard-sample --sample {input} --shard {wildcards.shard} "
            "--shard-size {params.size} --out {output} > {log} 2>&1"

    # The shards in order, checked against the sample: the run file of an unsharded job.
    rule merge_run:
        input:
            shards=run_shards,
            sample=paths.SAMPLE,
        output:
            paths.RUN,
        log:
            paths.results("logs/run/{task}/{system}/{variant}.merge.log"),
        priority: run_priority
        conda:
            ENV
        resources:
            mem_mb=2000,
            runtime=5,
        shell:
            "tersetalk merge-runs {input.shards} --sample {input.sample} "
            "--out {output} > {log} 2>&1"
