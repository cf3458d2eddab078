# tersetalk: sample -> run -> score -> aggregate -> figures.
# Run `snakemake --cores all`; see README.md for targets and configs.

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/compressor.smk"
include: "workflow/rules/calibrate.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/stats.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/scale.smk"
include: "workflow/rules/formats.smk"
include: "workflow/rules/topology.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/mcp.smk"
include: "workflow/rules/docs.smk"
include: "workflow/rules/overhead.smk"


rule all:
    default_target: True
    input:
        all_outputs(),
        # overhead.smk: the wall time of the invocation that built the default target
        # against the model floor, written last (when missing or forced)
        OVERHEAD_CSV,


# Each job sends its command's output to its log, so Snakemake's error block says only
# "message: None": say each failed job's reason (its command's one-line error) where the
# run stops (tersetalk.pipeline.joberrors).
onerror:
    from tersetalk.pipeline.joberrors import explain

    for line in explain(log):
        logger.error(line)
