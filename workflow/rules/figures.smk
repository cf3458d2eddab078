# Figures for the paper.


rule plot_tradeoff:
    input:
        "results/summary.parquet",
    output:
        pdf="figures/accuracy_vs_tokens.pdf",
        png=report(
            "figures/accuracy_vs_tokens.png",
            caption="../report/accuracy_vs_tokens.rst",
            category="Trade-off",
        ),
    params:
        stem=lambda wildcards, output: output.pdf.removesuffix(".pdf"),
    log:
        "results/logs/plot/accuracy_vs_tokens.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        "tersetalk plot --summary {input} --out-stem {params.stem} > {log} 2>&1"
