# Per-example metrics (paired with the free-form reference run), per-run summary rows,
# and the summary table.


from tersetalk import figmeta  # report captions: what each file recorded


include: "helpers/score.smk"


rule score:
    input:
        run=paths.RUN,
        sample=paths.SAMPLE,
        reference=reference_run,
    output:
        records=paths.METRICS,
        score=paths.SCORES,
    log:
        paths.results("logs/score/{task}/{system}/{variant}.log"),
    conda:
        ENV
    resources:
        mem_mb=3000,
        runtime=10,
    shell:
        "tersetalk score --run {input.run} --sample {input.sample} "
        "--reference {input.reference} --out-records {output.records} "
        "--out {output.score} > {log} 2>&1"


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
