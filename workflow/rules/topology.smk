# The topology study (issue 16): star or chain per example, six policies, the router's
# ablations. Target: `snakemake topology --cores all --configfile config/topology.yaml`.
# The runs are ordinary run_system jobs of the routed systems (config/topology.yaml);
# one report job reads them all.

from tersetalk.agents.router import Routed
from tersetalk.systems import system as registered_system
from tersetalk.tasks.labels import TOPOLOGY_LABELS

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


# the enabled systems whose topology is the router's (topology_freeform, ...), and every
# run of theirs on a task that has a topology label (results/runs/{task}/{system}/...)
TOPOLOGY_SYSTEMS = {s for s in SYSTEMS if isinstance(registered_system(s).topology, Routed)}
TOPOLOGY_RUNS = [
    path
    for path in run_targets()
    if Path(path).parts[2] in TOPOLOGY_LABELS and Path(path).parts[3] in TOPOLOGY_SYSTEMS
]


rule topology:
    input:
        topology_outputs,


rule topology_report:
    input:
        TOPOLOGY_RUNS,
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
