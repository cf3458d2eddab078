# The workflow's own overhead: the wall time of the invocation that built the default
# target against the model floor (the seconds of the model calls it made over the model
# slots: cores / threads of a model job, or a server's max_concurrency) and job-seconds per
# rule, read from the invocation's Snakemake log, the run records its jobs wrote and the
# call-cache entries written during it (tersetalk.pipeline.overhead). It takes every other output
# of `all` as input, so it runs last and sees the other jobs finished. Those inputs are
# ancient: the table is written when it is missing or forced, never again because another
# target (or a shorter rerun) rewrote a file it reads, so a later invocation never
# replaces the measurement and finds nothing to do. A forced rerun (`--forceall`, or
# `--forcerun overhead` beside the jobs to measure) writes a new log, so the table then
# reports the rerun.

from tersetalk.core import figmeta  # report captions: what each file recorded


include: "helpers/overhead.smk"


rule overhead:
    input:
        overhead_inputs,
    output:
        csv=report(OVERHEAD_CSV, caption="../report/overhead.rst", category="Tables"),
    log:
        paths.results("logs/overhead.log"),
    # in the main process: on a cluster the log it reads is the submitting host's
    localrule: True
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        summary=lambda wildcards, output: overhead_caption_line(output.csv),
        snakemake_log=overhead_snakemake_log,
        cache=os.path.join(config["cache_dir"], "calls"),
        lingua=os.path.join(config["cache_dir"], "lingua"),
        backend=config["models"]["backend"],
        max_concurrency=config["models"].get("max_concurrency") or 1,
        threads=MODEL_THREADS,
    shell:
        "tersetalk overhead --in-progress "
        "--snakemake-log {params.snakemake_log:q} --cache-dir {params.cache:q} "
        "--lingua-cache-dir {params.lingua:q} "
        "--backend {params.backend} --max-concurrency {params.max_concurrency} "
        "--model-threads {params.threads} --out {output.csv:q} > {log} 2>&1"
