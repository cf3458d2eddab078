# The configured model's results as one Markdown document, results/<key>/RESULTS.md
# (tersetalk results-doc): the tables the folder holds, with the date, the model key and
# the commit, so measurements live beside the files they come from, never in the README.
# The folders it reads are the output's (results/<key>/) and the figures' (figures/<key>/).


include: "helpers/docs.smk"


rule results_doc:
    input:
        tables=RESULTS_DOC_INPUTS,
        figures=results_doc_figures(),
    output:
        paths.results("RESULTS.md"),
    log:
        paths.results("logs/results_doc.log"),
    conda:
        ENV
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "tersetalk results-doc --results $(dirname {output:q}) "
        "--figures $(dirname {input.figures[0]:q}) --out {output:q} > {log} 2>&1"
