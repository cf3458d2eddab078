# The helpers of stats.smk's rules: target lists, input and param functions.

from tersetalk.stats.targets import targets_config
from tersetalk.pipeline.schedule import planned_runs


def stats_targets():
    return [paths.results(f"stats/noninferiority.{ext}") for ext in ("parquet", "csv", "tex")]

# The targets table also reads the bench and topology studies' results when they are
# there (results/bench/mb*.csv, results/<key>/topology/; tersetalk.stats.targets:
# bench_rows, topology_rows; it says "not run" otherwise). They are not declared inputs:
# a declared file that appears changes the table's input set, so the default target
# would rerun the table, RESULTS.md and the overhead report after `snakemake bench` or
# `snakemake topology`, and one target would undo another. After one of those studies,
# `snakemake --cores all --forcerun targets` puts its rows in the table and RESULTS.md.
