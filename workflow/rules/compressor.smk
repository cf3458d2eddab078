# LLMLingua's compressor: an HF-format causal LM made once from the embedded GGUF.
# Used by the llmlingua and hybrid systems and by TerseTalk's LLMLingua touchpoints.


rule prepare_compressor:
    output:
        directory("results/models/smollm2-hf"),
    log:
        "results/logs/prepare_compressor.log",
    priority: HEADLINE_PRIORITY
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=15,
    shell:
        "tersetalk prepare-compressor --out {output} --threads {threads} > {log} 2>&1"
