# The helpers of score.smk's rules: target lists, input and param functions.


def reference_run(wildcards):
    """The free-form run of the same task (and model) that every run is paired with."""
    system, _, variant = config["evaluation"]["reference"].partition("/")
    return paths.for_model(paths.RUN, _model_key(wildcards)).format(
        task=wildcards.task, system=system, variant=variant
    )
