# Per-example metrics (paired with the free-form reference run), per-run summary rows,
# and the summary table.


from tersetalk.core import figmeta  # report captions: what each file recorded


include: "helpers/score.smk"


# One job scores a group of a task's runs (tersetalk.pipeline.schedule.score_groups): the
# headline runs, then the ablation runs. Why not one job per run: scoring loads BERTScore's
# sentence encoder (torch, transformers: seconds per process), which 82 jobs paid again
# for 10 examples each. Why two groups: the headline comparison is scored, aggregated and
# drawn (rule plot) without waiting for the ablations. A group's runs differ by task, so
# the rule declares the group's manifest (the metrics and score files with their
# digests); the jobs that read those files depend on it.
rule score:
    input:
        unpack(score_input),
    output:
        paths.SCORE_GROUP,
    log:
        paths.results("logs/score/{task}/{group}.log"),
    wildcard_constraints:
        group="|".join(SCORE_GROUPS),
    priority: score_priority
    conda:
        ENV
    resources:
        mem_mb=3000,
        runtime=score_runtime_min,
    params:
        triples=score_triples,
        reference=reference_run,
        checks=score_checks,
        cache_dir=config["cache_dir"],
    shell:
        "tersetalk score --reference {params.reference} "
        "--cache-dir {params.cache_dir:q} {params.triples} {params.checks} "
        "--manifest {output} > {log} 2>&1"


# One run's metrics and scores alone: what a metrics or score file named as a target needs
# (the workflow itself scores runs in groups, above, and asks for their manifests).
rule score_run:
    input:
        run=paths.RUN,
        reference=reference_run,
    output:
        records=paths.METRICS,
        scores=paths.SCORES,
    log:
        paths.results("logs/score/{task}/{system}/{variant}.log"),
    priority: run_priority
    conda:
        ENV
    resources:
        mem_mb=3000,
        runtime=11,
    params:
        cache_dir=config["cache_dir"],
    shell:
        "tersetalk score --reference {input.reference} "
        "--cache-dir {params.cache_dir:q} --run {input.run} --out-records {output.records} "
        "--out {output.scores} > {log} 2>&1"


rule aggregate:
    input:
        score_manifests(run_triples()),
    output:
        summary=paths.SUMMARY,
        csv=report(
            paths.results("summary.csv"),
            caption="../report/summary.rst",
            category="Tables",
        ),
    log:
        paths.results("logs/aggregate.log"),
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
        scores=run_targets(paths.SCORES),
    shell:
        "tersetalk aggregate {params.scores} --out {output.summary} --csv {output.csv} "
        "> {log} 2>&1"


# The headline runs' summary: what rule plot draws, ready before the ablation runs end.
rule aggregate_headline:
    input:
        score_manifests(headline_triples()),
    output:
        HEADLINE_SUMMARY,
    log:
        paths.results("logs/aggregate_headline.log"),
    priority: HEADLINE_PRIORITY
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        scores=headline_files(paths.SCORES),
    shell:
        "tersetalk aggregate {params.scores} --out {output} > {log} 2>&1"
