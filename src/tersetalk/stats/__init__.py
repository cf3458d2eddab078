"""Statistics on paired runs: bootstrap intervals, non-inferiority, token tests, Pareto, LaTeX.

Everything is deterministic given the data (in their order), the resample
count and the random seed; ``compare_runs`` sorts the paired examples by key first.
"""

from tersetalk.stats._common import StatsError
from tersetalk.stats.bootstrap import (
    BootstrapResult,
    bootstrap_ci,
    bootstrap_distribution,
    paired_bootstrap,
)
from tersetalk.stats.compare import compare_runs, run_intervals
from tersetalk.stats.latex import escape_latex, to_latex
from tersetalk.stats.noninferiority import NIResult, noninferiority
from tersetalk.stats.paired_proportions import paired_difference_interval
from tersetalk.stats.paired_tests import token_reduction_tests
from tersetalk.stats.pareto import pareto_frontier
from tersetalk.stats.table import noninferiority_table, noninferiority_tex

__all__ = [
    "BootstrapResult",
    "NIResult",
    "StatsError",
    "bootstrap_ci",
    "bootstrap_distribution",
    "compare_runs",
    "escape_latex",
    "noninferiority",
    "noninferiority_table",
    "noninferiority_tex",
    "paired_bootstrap",
    "paired_difference_interval",
    "pareto_frontier",
    "run_intervals",
    "to_latex",
    "token_reduction_tests",
]
