# The helpers of formats.smk's rules: target lists, input and param functions.

FORMATS_FIGURES = ["formats_savings", "formats_knapsack", "formats_comprehension"]
FORMATS_TABLES = ["savings_by_shape", "knapsack_summary", "dedup_summary", "comprehension_summary"]


def formats_targets():
    """The format study's figures (PNG and PDF) and CSV tables."""
    figs = [paths.figure(f"{f}.{ext}") for f in FORMATS_FIGURES for ext in ("png", "pdf")]
    return figs + [paths.results(f"formats/{t}.csv") for t in FORMATS_TABLES]


def formats_comprehension_options():
    """The comprehension experiment's options; n_payloads null means n_eval."""
    opts = dict(config["formats"]["comprehension"])
    if opts.get("n_payloads") is None:
        opts["n_payloads"] = config["n_eval"]
    return opts
