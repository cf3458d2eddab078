# The helpers of bench.smk's rules: target lists, input and param functions.


def bench_corpus_runs():
    """The run files the microbenchmark corpus reads if they exist when it is built: every
    run of the config (a param, not an input: the benchmarks never force a model run, and
    the DAG does not depend on which runs happen to exist when it is built)."""
    return run_targets()
