# The helpers of models.smk's rules: target lists, input and param functions.


def model_path(path):
    """A path of the configured model (results/<key>/...) as the {model} wildcard's."""
    return paths.for_model(path, "{model}")


def sensitivity_targets():
    """The model comparison (figure and table) when sensitivity.models lists models."""
    if not SENSITIVITY:
        return []
    return [paths_module.COMPARE_PNG, paths_module.COMPARE_PDF, paths_module.COMPARE_TABLE]


def model_score_targets(wildcards):
    """One sensitivity model's score files: the run targets under results/<its key>/."""
    return run_targets(paths.for_model(paths.SCORES, wildcards.model))


def model_score_manifests(wildcards):
    """The manifests of the score jobs that write one sensitivity model's score files."""
    return score_manifests(run_triples(), wildcards.model)


def compared_summaries(wildcards):
    """key -> summary of the models the config names: the configured model and the
    sensitivity models (built if missing). Other models' summaries on disk (an earlier
    `models:`) are read by the job itself (`--others-in`), not looked for while the DAG
    is built."""
    keys = [MODEL_KEY, *SENSITIVITY_BY_KEY]
    return {key: paths.for_model(paths.SUMMARY, key) for key in keys}
