# LLMLingua's compressor: an HF-format causal LM made once from the embedded GGUF.
# Used by the llmlingua and hybrid systems and by TerseTalk's LLMLingua touchpoints.
# Snakemake deletes the folder before it reruns the job (--forceall), and converting
# the GGUF again costs ~30 s of torch and transformers. So the job keeps each verified
# preparation under <cache_dir>/compressor/<key>/ (key: the GGUF's sha256, the
# preparation's version and dtype, and the versions of transformers, torch, gguf,
# numpy, safetensors and tokenizers) and restores the folder from there, byte for byte,
# by hardlinks (copies across file systems) and without importing torch; a damaged
# entry is converted again and replaced (tersetalk.encoders.prepare).


rule prepare_compressor:
    output:
        directory(paths_module.COMPRESSOR_DIR),
    log:
        paths_module.shared_log("prepare_compressor.log"),
    priority: HEADLINE_PRIORITY
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=15,
    params:
        cache_dir=config["cache_dir"],
    shell:
        "tersetalk prepare-compressor --out {output} --threads {threads} "
        "--cache-dir {params.cache_dir:q} > {log} 2>&1"
