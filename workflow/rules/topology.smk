# The topology study: star or chain per example, six policies, the router's
# ablations. Target: `snakemake --cores all topology` (config: the `topology` section).
# The study samples its own examples (topology.n_eval per task of topology.tasks) and runs
# its routed systems (topology.systems) under results/<key>/topology/, so it never re-samples or
# reruns the main study (one job per task and system: topology_batch); one report job reads
# all its runs.


from tersetalk.core import figmeta  # report captions: what each file recorded


include: "helpers/topology.smk"


TOPOLOGY_TABLES = [
    paths.results(f"topology/{name}.csv")
    for name in (
        "policies",
        "six_policies",
        "policies_by_task",
        "theta_sweep",
        "leave_one_task_out",
        "ablations",
        "outcome_oracle",
    )
]
# the router on briefs it never trained on (tersetalk.topology.heldout)
TOPOLOGY_HELDOUT_TABLES = [
    paths.results(f"topology/{name}")
    for name in ("heldout.csv", "heldout_loto.csv", "heldout_lofo.csv", "heldout.json")
]
TOPOLOGY_FIGURES = [
    paths.figure(f"topology_{name}.{ext}")
    for name in ("selection", "tokens_accuracy", "theta", "ablations")
    for ext in ("png", "pdf")
]


# The study's tables and figures (results/<key>/topology/, figures/<key>/topology_*).
rule topology:
    input:
        TOPOLOGY_TABLES,
        paths.results("topology/summary.json"),
        TOPOLOGY_FIGURES,
        paths.ROUTER_FILE,
        paths.results("topology/leave_one_task_out_fitted.csv"),
        TOPOLOGY_HELDOUT_TABLES,


# The study's sample of one task: topology.n_eval examples with the main seed, and its
# calibration split (topology.calibration_n examples, disjoint) for the fitted router.
rule topology_sample:
    input:
        sample_input,
    output:
        sample=paths.TOPOLOGY_SAMPLE,
        calibration=paths.TOPOLOGY_CALIBRATION,
    log:
        paths_module.shared_log("topology/sample/{task}.log"),
    wildcard_constraints:
        task="|".join(topology_labels()),
    conda:
        ENV
    resources:
        mem_mb=3000,
        runtime=10,
    params:
        n=TOPOLOGY["n_eval"],
        calibration_n=TOPOLOGY["calibration_n"],
        seed=config["seed"],
        source=config["data"]["source"],
        data_dir=config["data"]["dir"],
        options=sample_task_options,
    shell:
        "tersetalk sample --task {wildcards.task} --n {params.n} "
        "--calibration-n {params.calibration_n} --seed {params.seed} "
        "--source {params.source} --data-dir {params.data_dir} "
        "--task-options {params.options:q} --out {output.sample} "
        "--calibration-out {output.calibration} > {log} 2>&1"


# The router's signals on one task's calibration split, read from the briefs of a routed
# system's topology.fit.variant as a run would write them (no Worker runs).
rule topology_signals:
    input:
        sample=paths.TOPOLOGY_CALIBRATION,
    output:
        paths.TOPOLOGY_SIGNALS,
    log:
        paths.results("logs/topology/signals/{task}/{system}.log"),
    wildcard_constraints:
        task="|".join(topology_labels()),
        system="|".join(TOPOLOGY_SYSTEMS) or "no-topology-system",
        variant="[A-Za-z0-9_-]+",  # run_system's leaves out the batched ablation variants
    conda:
        ENV
    resources:
        mem_mb=3000,
        runtime=10,
    params:
        spec=lambda wc: spec_json(
            run_spec(topology_study(), wc.task, wc.system, TOPOLOGY_FIT["variant"])
        ),
    shell:
        "tersetalk topology-signals --sample {input.sample} --spec-json {params.spec:q} "
        "--out {output} > {log} 2>&1"


# The fitted router: weights and θ per routed system on the calibration signals of all
# study tasks (logistic regression), and leave-one-task-out fits.
rule topology_fit:
    input:
        topology_signal_files,
    output:
        router=paths.ROUTER_FILE,
        loto=paths.results("topology/leave_one_task_out_fitted.csv"),
    log:
        paths.results("logs/topology/fit.log"),
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        l2=TOPOLOGY_FIT["l2"],
        seed=config["seed"],
    shell:
        "tersetalk topology-fit {input} --l2 {params.l2} --seed {params.seed} "
        "--out {output.router} --loto-out {output.loto} > {log} 2>&1"


# The router's signals on the held-out briefs of one task's format (data/topology/heldout),
# read as topology_signals reads the calibration briefs; each record keeps its own label.
use rule topology_signals as topology_heldout_signals with:
    input:
        sample=paths.TOPOLOGY_HELDOUT,
    output:
        paths.TOPOLOGY_HELDOUT_SIGNALS,
    log:
        paths.results("logs/topology/heldout/{task}/{system}.log"),


# The router on the held-out briefs, leave-one-task-out and leave-one-format-out.
rule topology_heldout:
    input:
        heldout=topology_heldout_files,
        calibration=topology_signal_files,
        router=paths.ROUTER_FILE,
    output:
        TOPOLOGY_HELDOUT_TABLES,
    log:
        paths.results("logs/topology/heldout.log"),
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        l2=TOPOLOGY_FIT["l2"],
        seed=config["seed"],
        out=lambda wildcards, output: os.path.dirname(output[0]),
    shell:
        "tersetalk topology-heldout {input.heldout} --calibration {input.calibration} "
        "--router-yaml {input.router} --l2 {params.l2} --seed {params.seed} "
        "--out-dir {params.out} > {log} 2>&1"


# Every variant of one routed system (its policies, the fitted router, the ablations) on
# the study's sample of one task, in one job, under results/<key>/topology/: `tersetalk
# run` with a spec per variant, as run_batch runs the main study's batches, so the
# imports and the model load once per (task, system), not once per variant (a task has
# 29). Each run keeps its own run file, checkpoint and cached calls, so a batch that
# reruns for one changed variant replays the others from the caches. The rule declares
# the batch's manifest (the run files with their digests); the report reads the runs
# through it and checks them. Rerun the study's runs: --forcerun topology_batch.
rule topology_batch:
    input:
        unpack(topology_batch_input),
    output:
        paths.TOPOLOGY_BATCH,
    log:
        paths.results("logs/topology/run/{task}/{system}.log"),
    wildcard_constraints:
        task="|".join(topology_labels()),
        system="|".join(TOPOLOGY_SYSTEMS) or "no-topology-system",
    conda:
        ENV
    threads: MODEL_THREADS
    resources:
        mem_mb=4000,
        runtime=topology_batch_runtime_min,
    params:
        runs=topology_batch_runs,
    shell:
        "tersetalk run {params.runs} --sample {input.sample} --manifest {output} "
        "2>&1 | tee {log}"


rule topology_report:
    input:
        runs=topology_batches,
        router=paths.ROUTER_FILE,
        loto=paths.results("topology/leave_one_task_out_fitted.csv"),
    output:
        TOPOLOGY_TABLES,
        paths.results("topology/summary.json"),
        figmeta.report_figures(TOPOLOGY_FIGURES, "Topology study"),
    log:
        paths.results("logs/topology/report.log"),
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        seed=config["evaluation"]["seed"],
        tables=lambda wildcards, output: os.path.dirname(output[0]),
        figures=lambda wildcards, output: os.path.dirname(output[-1]),
    shell:
        "tersetalk topology {input.runs} --router-yaml {input.router} "
        "--loto-fitted {input.loto} --tables {params.tables} --figures {params.figures} "
        "--seed {params.seed} > {log} 2>&1"
