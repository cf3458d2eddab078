"""Text transforms between what a role means and what travels on the wire.

Importing this package is cheap: torch, transformers and LLMLingua load only when
a compressor is built. ``prepare`` makes LLMLingua's local model from the embedded
GGUF; ``lingua`` wraps LLMLingua; ``messages`` compresses the Manager's brief;
``touchpoints`` plugs LLMLingua into TerseTalk's caps, summaries and dereferences.
"""
