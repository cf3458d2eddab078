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


def topology_systems():
    """The enabled systems whose topology is the router's (topology_freeform, ...)."""
    return [s for s in SYSTEMS if isinstance(registered_system(s).topology, Routed)]


def topology_runs():
    """Every run of a routed system on a task that has a topology label."""
    routed = set(topology_systems())
    return [
        path
        for path in run_targets()
        if path.split("/")[2] in TOPOLOGY_LABELS and path.split("/")[3] in routed
    ]


rule topology:
    input:
        TOPOLOGY_TABLES,
        "results/topology/summary.json",
        TOPOLOGY_FIGURES,


rule topology_report:
    input:
        topology_runs(),
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
