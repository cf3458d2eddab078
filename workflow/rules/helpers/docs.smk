# Helpers of docs.smk: what the results document reads.

from pathlib import Path as _DocsPath

#: what the document reads from the default DAG (each section of tersetalk.results_doc)
RESULTS_DOC_INPUTS = [
    paths.results("summary.csv"),
    paths.results("stats/noninferiority.csv"),
    paths.results("tables/targets.csv"),
    paths.results("formats/savings_by_shape.csv"),
    paths.results("formats/knapsack_summary.csv"),
    paths.results("formats/dedup_summary.csv"),
    paths.results("formats/comprehension_summary.csv"),
]

#: what it reads when present: the topology study is not in the default DAG
RESULTS_DOC_OPTIONAL = [
    paths.results("topology/six_policies.csv"),
    paths.results("topology/heldout.csv"),
    paths.results("topology/policies.csv"),
]


def results_doc_optional_inputs(wildcards):
    """The topology tables that exist: the document renders them when present (and says
    "not built" otherwise) without making the default DAG run the study; declared, so
    the document is rewritten when one changes."""
    return [p for p in RESULTS_DOC_OPTIONAL if _DocsPath(p).is_file()]


def results_doc_figures():
    """The PNGs the document links to, so it is written after them."""
    return [f for f in (*figure_targets(), *formats_targets()) if f.endswith(".png")]
