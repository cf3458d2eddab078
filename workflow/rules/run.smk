# One job = (task, system, variant[, shard]): the examples of the sample (or of one shard
# of it, with run.shard_size) through one system; shards are merged into one run file.
# The runs in batches (below) are not asked of it by the workflow, but a run file named
# as a target is made by it alone, the same run as in its batch.


include: "helpers/run.smk"


rule run_system:
    input:
        unpack(run_input),
    output:
        run_output(),
    log:
        run_log(),
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
# share a batch (tersetalk.pipeline.schedule.BATCH_WITH). Each run still has its own run
# file, checkpoint and cached calls, so a batch that reruns for one changed variant
# replays the others from the caches. Not with run.shard_size (PHASES are empty then).
# Which runs a batch holds differs by task (some variants run on HotpotQA only), and a
# rule's outputs are one fixed set, so the rule declares the batch's manifest (the run
# files with their digests); the score jobs depend on it and check it.
rule run_batch:
    input:
        unpack(batch_input),
    output:
        paths.RUN_BATCH,
    log:
        paths.results("logs/run/{task}/{phase}_{batch}.log"),
    wildcard_constraints:
        phase="|".join(PHASES),
    priority: batch_priority
    conda:
        ENV
    threads: MODEL_THREADS
    resources:
        mem_mb=4000,
        runtime=batch_runtime_min,
    params:
        runs=batch_runs,
    shell:
        "tersetalk run {params.runs} --sample {input.sample} --manifest {output} "
        "2>&1 | tee {log}"


# With run.shard_size: shard i of n, rows [i * shard_size, (i + 1) * shard_size) of the
# sample, and the run file merged from a run's shards. Without it nothing asks for a shard,
# and a run file is run_system's (the rule order below; with it, run_system writes shards).
rule shard_sample:
    input:
        paths.SAMPLE,
    output:
        paths.SAMPLE_SHARD,
    log:
        paths_module.shared_log("sample/shards/{task}/{shard}.log"),
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
        "tersetalk merge-runs {input.shards} --sample {input.sample} " "--out {output} > {log} 2>&1"


ruleorder: run_system > merge_run
