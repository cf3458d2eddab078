# The helpers of score.smk's rules: target lists, input and param functions.

from tersetalk.pipeline.schedule import SCORE_GROUPS


def reference_run(wildcards):
    """The free-form run of the same task (and model) that every run is paired with."""
    system, _, variant = config["evaluation"]["reference"].partition("/")
    return paths.for_model(paths.RUN, _model_key(wildcards)).format(
        task=wildcards.task, system=system, variant=variant
    )


#: the summary of the headline runs (score_groups' "headline"): what rule plot draws
HEADLINE_SUMMARY = paths.results("summary_headline.parquet")

#: the run every run is paired with (evaluation.reference, ``system/variant``)
REFERENCE = config["evaluation"]["reference"]

#: (task, system, variant) -> the score group (score_groups) whose job scores the run
GROUP_OF = {
    (task, *label.split("/", 1)): group
    for task in TASKS
    for group, labels in score_groups(config, task).items()
    for label in labels
}


def group_runs(task, group):
    """(system, variant) of each run of ``task``'s score group ``group``, in its order."""
    labels = score_groups(config, task).get(group, [])
    return [tuple(label.split("/", 1)) for label in labels]


def headline_triples():
    """(task, system, variant) of every headline run of every task."""
    return [(task, s, v) for task in TASKS for s, v in group_runs(task, "headline")]


def headline_files(template):
    """``template`` (SCORES or METRICS) for every headline run of every task."""
    return [template.format(task=t, system=s, variant=v) for t, s, v in headline_triples()]


def score_manifests(triples, model=None):
    """The manifests of the score jobs that write the metrics and score files of the runs
    ``triples`` ((task, system, variant); ``model``: a sensitivity model's key), each once."""
    template = paths.for_model(paths.SCORE_GROUP, model)
    found = {template.format(task=t, group=GROUP_OF[(t, s, v)]): None for t, s, v in triples}
    return list(found)


def score_input(wildcards):
    """Each of the group's runs and the reference run: the manifest of the batch that
    writes it, or the run file itself."""
    model = _model_key(wildcards)
    task = wildcards.task
    system, _, variant = REFERENCE.partition("/")
    needs = [run_file_input(task, system, variant, model)]
    needs += [run_file_input(task, s, v, model) for s, v in group_runs(task, wildcards.group)]
    return {"runs": list(dict.fromkeys(needs))}


def score_priority(wildcards):
    return HEADLINE_PRIORITY if wildcards.group == "headline" else ABLATION_PRIORITY


def score_runtime_min(wildcards):
    return 10 + len(group_runs(wildcards.task, wildcards.group))


def score_triples(wildcards):
    """``--run R --out-records M --out S`` per run of a score job (tersetalk score)."""
    model = _model_key(wildcards)
    files = [paths.for_model(t, model) for t in (paths.RUN, paths.METRICS, paths.SCORES)]
    args = []
    for system, variant in group_runs(wildcards.task, wildcards.group):
        run, records, score = (
            f.format(task=wildcards.task, system=system, variant=variant) for f in files
        )
        args += ["--run", run, "--out-records", records, "--out", score]
    return " ".join(shlex.quote(a) for a in args)


def score_checks(wildcards, input):
    """``--check-manifest`` for each batch manifest among the job's inputs."""
    manifests = [f for f in input.runs if f.endswith(".json")]
    return " ".join(f"--check-manifest {shlex.quote(m)}" for m in manifests)
