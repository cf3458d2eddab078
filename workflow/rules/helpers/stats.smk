# The helpers of stats.smk's rules: target lists, input and param functions.

from tersetalk.stats.targets import targets_config
from tersetalk.tasks.schedule import planned_runs


def stats_targets():
    return [paths.results(f"stats/noninferiority.{ext}") for ext in ("parquet", "csv", "tex")]


#: what the targets table reads of the bench and topology studies (tersetalk.stats.targets:
#: bench_rows, topology_rows), when present
TARGETS_OPTIONAL = (
    "results/bench/mb*.csv",
    paths.results("topology/six_policies.csv"),
    paths.results("topology/summary.json"),
)


def targets_optional_inputs(wildcards):
    """The bench and topology results that exist: the table reads them when present (it
    says "not run" otherwise), without making the default DAG run the benchmarks or the
    topology study. Declared, so Snakemake sees every file read and reruns the table when
    one changes."""
    return sorted(str(p) for pattern in TARGETS_OPTIONAL for p in Path().glob(pattern))
