# Helpers of docs.smk: what the results document reads.

#: what the document reads from the default DAG (each section of tersetalk.pipeline.results_doc)
RESULTS_DOC_INPUTS = [
    paths.results("summary.csv"),
    paths.results("stats/noninferiority.csv"),
    paths.results("tables/targets.csv"),
] + (
    [
        paths.results("formats/savings_by_shape.csv"),
        paths.results("formats/knapsack_summary.csv"),
        paths.results("formats/dedup_summary.csv"),
        paths.results("formats/comprehension_summary.csv"),
    ]
    if FORMATS_STUDIED
    else []
)

# It also renders the topology study's tables when they are there (and says "not built"
# otherwise), undeclared so that `snakemake topology` never makes the default target
# rerun the document (helpers/stats.smk says why; `--forcerun results_doc` adds them).


def results_doc_figures():
    """The PNGs the document links to, so it is written after them."""
    studied = formats_targets() if FORMATS_STUDIED else []
    return [f for f in (*figure_targets(), *studied) if f.endswith(".png")]
