# The helpers of models.smk's rules: target lists, input and param functions.


def model_path(path):
    """A default-model results path (results/...) as the {model} level's (results/models/...)."""
    return paths.for_model(path, "{model}")


def sensitivity_targets():
    """The model comparison (figure and table) when sensitivity.models lists models."""
    if not SENSITIVITY:
        return []
    figs = [f"figures/model_sensitivity.{ext}" for ext in ("png", "pdf")]
    return figs + ["results/tables/models.csv"]


def model_score_targets(wildcards):
    """One model's score files: the default run targets under results/models/<name>/."""
    return run_targets(paths.for_model(paths.SCORES, wildcards.model))
