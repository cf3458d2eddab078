# The helpers of bench.smk's rules: target lists, input and param functions.


def bench_corpus_inputs():
    """Run files for the microbenchmark corpus: those that exist (bench never forces runs)."""
    return [p for p in run_targets() if os.path.exists(p)]
