# The topology study (issue 16): star or chain per example, six policies, the router's
# ablations. Target: `snakemake --cores all topology` (config: the `topology` section).
# The study samples its own examples (topology.n_eval per task of topology.tasks) and runs
# its routed systems (topology.systems) under results/topology/, so it never re-samples or
# reruns the main study; one report job reads all its runs.


include: "helpers/topology.smk"


TOPOLOGY_TABLES = [
    f"results/topology/{name}.csv"
    for name in (
        "policies",
        "six_policies",
        "policies_by_task",
        "theta_sweep",
        "leave_one_task_out",
    )
]
TOPOLOGY_FIGURES = [
    f"figures/topology_{name}.{ext}"
    for name in ("selection", "tokens_accuracy", "theta")
    for ext in ("png", "pdf")
]


# The study's tables and figures (results/topology/, figures/topology_*).
rule topology:
    input:
        TOPOLOGY_TABLES,
        "results/topology/summary.json",
        TOPOLOGY_FIGURES,


# The study's sample of one task: topology.n_eval examples with the main seed.
rule topology_sample:
    input:
        sample_input,
    output:
        paths.TOPOLOGY_SAMPLE,
    log:
        "results/logs/topology/sample/{task}.log",
    wildcard_constraints:
        task="|".join(topology_labels()),
    conda:
        ENV
    resources:
        mem_mb=3000,
        runtime=10,
    params:
        n=TOPOLOGY["n_eval"],
        seed=config["seed"],
        source=config["data"]["source"],
        data_dir=config["data"]["dir"],
        options=sample_task_options,
    shell:
        "tersetalk sample --task {wildcards.task} --n {params.n} --calibration-n 0 "
        "--seed {params.seed} --source {params.source} --data-dir {params.data_dir} "
        "--task-options {params.options:q} --out {output} > {log} 2>&1"


# One routed system's policy (a variant) on the study's sample of one task: run_system's
# command and threads, on the study's sample and config, under results/topology/.
use rule run_system as topology_run with:
    input:
        unpack(topology_run_input),
    output:
        paths.TOPOLOGY_RUN,
    log:
        "results/logs/topology/run/{task}/{system}/{variant}.log",
    wildcard_constraints:
        task="|".join(topology_labels()),
        system="|".join(TOPOLOGY_SYSTEMS) or "no-topology-system",
    resources:
        mem_mb=4000,
        runtime=10 + 2 * TOPOLOGY["n_eval"],
    params:
        spec=topology_spec_json,


rule topology_report:
    input:
        topology_runs,
    output:
        TOPOLOGY_TABLES,
        "results/topology/summary.json",
        TOPOLOGY_FIGURES,
    log:
        "results/logs/topology/report.log",
    conda:
        ENV
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "tersetalk topology {input} --tables results/topology --figures figures > {log} 2>&1"
