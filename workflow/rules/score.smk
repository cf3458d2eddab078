# Per-example metrics (paired with the free-form reference run), per-run summary rows,
# and the summary table.


from tersetalk.core import figmeta  # report captions: what each file recorded


include: "helpers/score.smk"


# One job scores a group of a task's runs (tersetalk.tasks.schedule.score_groups): the
# headline runs, then the ablation runs. Why not one job per run: scoring loads BERTScore's
# sentence encoder (torch, transformers: seconds per process), which 82 jobs paid again
# for 10 examples each. Why two groups: the headline comparison is scored, aggregated and
# drawn (rule plot) without waiting for the ablations. One rule per (task, group), and
# per sensitivity model the same with a {model} wildcard (model_score_<group>_<task>).
for _task in TASKS:
    for _group, _runs in score_groups(config, _task).items():
        for _prefix, _layout in score_layouts():

            rule:
                name:
                    f"{_prefix}score_{_group}_{_task}"
                input:
                    runs=group_files(paths.RUN, _task, _runs, _layout),
                    sample=paths.SAMPLE.format(task=_task),
                    reference=group_files(paths.RUN, _task, [REFERENCE], _layout),
                output:
                    records=group_files(paths.METRICS, _task, _runs, _layout),
                    scores=group_files(paths.SCORES, _task, _runs, _layout),
                log:
                    group_files(
                        paths.results(f"logs/score/{_task}/{_group}.log"), _task, [], _layout
                    ),
                priority: HEADLINE_PRIORITY if _group == "headline" else ABLATION_PRIORITY
                conda:
                    ENV
                resources:
                    mem_mb=3000,
                    runtime=10 + len(_runs),
                params:
                    triples=score_triples,
                    cache_dir=config["cache_dir"],
                shell:
                    "tersetalk score --sample {input.sample} --reference {input.reference} "
                    "--cache-dir {params.cache_dir:q} {params.triples} > {log} 2>&1"


rule aggregate:
    input:
        run_targets(paths.SCORES),
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
    shell:
        "tersetalk aggregate {input} --out {output.summary} --csv {output.csv} > {log} 2>&1"


# The headline runs' summary: what rule plot draws, ready before the ablation runs end.
rule aggregate_headline:
    input:
        headline_files(paths.SCORES),
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
    shell:
        "tersetalk aggregate {input} --out {output} > {log} 2>&1"
