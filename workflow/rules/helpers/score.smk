# The helpers of score.smk's rules: target lists, input and param functions.


def reference_run(wildcards):
    """The free-form run of the same task (and model) that every run is paired with."""
    system, _, variant = config["evaluation"]["reference"].partition("/")
    return paths.for_model(paths.RUN, _model_key(wildcards)).format(
        task=wildcards.task, system=system, variant=variant
    )


#: the summary of the headline runs (score_groups' "headline"): what rule plot draws
HEADLINE_SUMMARY = paths.results("summary_headline.parquet")


def headline_files(template):
    """``template`` (SCORES or METRICS) for every headline run of every task."""
    return [
        path
        for task in TASKS
        for path in group_files(template, task, score_groups(config, task).get("headline", []))
    ]


#: the run every run is paired with (evaluation.reference, ``system/variant``)
REFERENCE = config["evaluation"]["reference"]


def score_layouts():
    """(rule-name prefix, model) of each layout whose runs are scored: the configured
    model's (literal paths), and the sensitivity models' ({model} wildcard) if any."""
    return [("", None)] + ([("model_", "{model}")] if SENSITIVITY else [])


def group_files(template, task, runs, model=None):
    """``template`` for each ``system/variant`` of ``runs`` on ``task``; ``model``
    "{model}" gives the sensitivity models' pattern. With no runs: the template itself
    (a log path) in that layout."""
    if model:
        template = paths.for_model(template, model)
    if not runs:
        return template
    return [
        template.format(task=task, system=system, variant=variant, model=model or "")
        for system, _, variant in (run.partition("/") for run in runs)
    ]


def score_triples(wildcards, input, output):
    """``--run R --out-records M --out S`` per run of a score job (tersetalk score)."""
    return " ".join(
        f"--run {shlex.quote(run)} --out-records {shlex.quote(records)} --out {shlex.quote(score)}"
        for run, records, score in zip(input.runs, output.records, output.scores, strict=True)
    )
