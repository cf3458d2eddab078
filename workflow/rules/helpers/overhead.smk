# Helpers of overhead.smk: what the overhead report reads and where.

from tersetalk.pipeline.overhead import caption_line as overhead_caption_line

#: the table, under the configured model's folder
OVERHEAD_CSV = paths.results("tables/overhead.csv")


def overhead_inputs(wildcards):
    """Everything else `all` builds, so the report is the invocation's last job. Marked
    ancient: the table belongs to the invocation that built the default target, so a
    later, shorter invocation (a rebuilt figure, another target's run) never replaces it,
    and the default target after any other target finds nothing to do. It is written
    again when it is missing or forced (`--forcerun overhead` beside the run to measure,
    or `--forceall`)."""
    return [ancient(f) for f in all_outputs() if f != OVERHEAD_CSV]


def overhead_snakemake_log(wildcards, output):
    """This invocation's log file, as Snakemake names it to onstart handlers; empty when
    this Snakemake does not say (the command then finds it in .snakemake/log). Derived
    from output, so it is no rerun trigger though it changes with every invocation."""
    try:
        logs = workflow.logger_manager.get_logfile()
    except AttributeError:
        logs = []
    return logs[0] if logs else ""
