"""Compressor implementations: swap one for another in config, never in code.

* :class:`ModelSummarizer` - the configured model backend as an abstractive
  summarizer. The default: it runs wherever the project's model runs.
* :class:`DistilBARTCompressor` - ``sshleifer/distilbart-cnn-12-6`` through the
  transformers summarization pipeline, used when its weights are on disk. Inputs
  longer than its window (1,024 tokens) are cut, and the pass log says so
  (``input_truncated``).
* :class:`LLMLinguaCompressor` - a thin adapter over the LLMLingua wrapper in
  :mod:`tersetalk.encoders`.
* :class:`TruncationCompressor` - the longest word prefix under the target;
  deterministic and model-free (a floor to compare against, and fast tests).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import re
import threading
from pathlib import Path
from typing import Any

from tersetalk.mediator.compression import Compressor, TokenCounter
from tersetalk.mediator.config import CompressionConfig
from tersetalk.mediator.errors import (
    CompressorUnavailableError,
    MediatorConfigError,
)

__all__ = [
    "DistilBARTCompressor",
    "LLMLinguaCompressor",
    "ModelSummarizer",
    "TruncationCompressor",
    "make_compressor",
    "resolve_distilbart",
]

log = logging.getLogger(__name__)

SUMMARIZER_SYSTEM = (
    "You compress messages between agents into short notes of at most {words} words. "
    "Keep every name, number and date, and the question. Do not answer the question."
)
#: one worked example: small models follow a demonstration better than a rule
SUMMARIZER_SHOT = (
    "Goal: Plan the trip.\nFacts:\n- The train leaves at 9:15 from Central Station.\n"
    "- Tickets cost 12 dollars each and we are 3 people.\n"
    "Question: How much do the tickets cost in total?",
    "Train leaves 9:15, Central Station. Tickets 12 dollars each, 3 people. "
    "Question: How much do the tickets cost in total?",
)


class ModelSummarizer(Compressor):
    """Abstractive summary by the model backend (greedy, so reruns agree and cache)."""

    name = "model"

    def __init__(self, client, gen=None, max_tokens: int = 96) -> None:
        from tersetalk.models import GenerationConfig

        self.client = client
        self.gen = gen or GenerationConfig(max_tokens=max_tokens)
        self.max_tokens = max_tokens

    def compress(self, text: str, target_tokens: int | None = None) -> str:
        # ~0.75 words per token of English; ask for a little less than the budget
        words = max(5, int((target_tokens or 64) * 0.6))
        gen = dataclasses.replace(
            self.gen, max_tokens=max(8, min(self.max_tokens, 2 * (target_tokens or 64)))
        )
        messages = [
            {"role": "system", "content": SUMMARIZER_SYSTEM.format(words=words)},
            {"role": "user", "content": SUMMARIZER_SHOT[0]},
            {"role": "assistant", "content": SUMMARIZER_SHOT[1]},
            {"role": "user", "content": text},
        ]
        return self.client.chat(messages, gen).text.strip()

    def describe(self) -> dict:
        return {"name": self.name, "model": getattr(self.client, "model", "?"),
                "max_tokens": self.max_tokens}  # fmt: skip


class TruncationCompressor(Compressor):
    """The longest prefix of whole words within the target (or half the words)."""

    name = "truncate"

    def __init__(self, count_tokens: TokenCounter) -> None:
        self.count_tokens = count_tokens

    def compress(self, text: str, target_tokens: int | None = None) -> str:
        ends = [m.end() for m in _WORDS.finditer(text)]  # cut points keep the layout
        if len(ends) <= 1:
            return text
        if target_tokens is None:
            return text[: ends[len(ends) // 2 - 1]]
        lo, hi = 1, len(ends) - 1  # at least one word, at least one word dropped
        best = 1
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.count_tokens(text[: ends[mid - 1]]) <= target_tokens:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        return text[: ends[best - 1]]


def resolve_distilbart(path: str | None, model_name: str) -> Path:
    """A local folder with the DistilBART weights, or a clear error saying how to get one."""
    if path:
        folder = Path(path).expanduser()
        if (folder / "config.json").is_file():
            return folder
        raise CompressorUnavailableError(
            f"compression.distilbart_path={path!r} is not a model folder (no config.json); "
            f"point it at a local copy of {model_name}, or set compression.compressor: model"
        )
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model_name, local_files_only=True))
    except Exception as exc:  # noqa: BLE001 - any miss means: not available locally
        raise CompressorUnavailableError(
            f"DistilBART weights ({model_name}) are not available locally ({type(exc).__name__}). "
            f"Fix: on a machine with internet run `huggingface-cli download {model_name} "
            "--local-dir <folder>` and set compression.distilbart_path to that folder, "
            "or set compression.compressor: model (the model backend summarizes)"
        ) from None


class DistilBARTCompressor(Compressor):
    """Summarization with a BART-family checkpoint through ``transformers.pipeline``."""

    name = "distilbart"

    def __init__(self, model_path: str | Path, num_beams: int = 2, threads: int | None = None):
        try:
            import torch
            from transformers import pipeline
        except ImportError as exc:  # pragma: no cover - both are project dependencies
            raise CompressorUnavailableError(
                f"DistilBART needs transformers and torch: {exc}; pip install -e '.[workflow]'"
            ) from exc
        if threads:
            torch.set_num_threads(threads)
        self.model_path = Path(model_path)
        self.num_beams = num_beams
        self._notes = threading.local()  # per thread: one compressor serves a run's threads
        try:
            self._pipe = pipeline("summarization", model=str(self.model_path),
                                  tokenizer=str(self.model_path), device=-1)  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - name the folder and the fix
            raise CompressorUnavailableError(
                f"cannot load a summarization model from {self.model_path}: "
                f"{type(exc).__name__}: {exc}; check the folder holds a BART-style "
                "seq2seq checkpoint with its tokenizer"
            ) from exc

    @property
    def max_input_tokens(self) -> int:
        """Longest input the model reads: its position limit, or the tokenizer's if shorter."""
        limit = int(getattr(self._pipe.model.config, "max_position_embeddings", 1024))
        tok_limit = getattr(self._pipe.tokenizer, "model_max_length", None)
        if isinstance(tok_limit, int) and 0 < tok_limit < limit:
            limit = tok_limit
        return limit

    def compress(self, text: str, target_tokens: int | None = None) -> str:
        """Summarise ``text``; an input longer than the model's window is cut to its
        first :attr:`max_input_tokens` tokens, and :meth:`pass_notes` says so (the
        summary then covers only that prefix, which the trace must show)."""
        self._notes.last = {}
        tok = self._pipe.tokenizer
        limit = self.max_input_tokens
        ids = tok(text, truncation=False, verbose=False)["input_ids"]
        n_full = len(ids)
        source = text
        if n_full > limit:
            kept = tok(text, truncation=True, max_length=limit)["input_ids"]
            # what the model reads; no clean-up, so re-tokenising gives the same tokens
            source = tok.decode(kept, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            n_in = len(kept)
        else:
            n_in = n_full
        self._notes.last = {"input_truncated": n_full > limit,
                            "compressor_input_tokens": n_full, "compressor_kept_tokens": n_in,
                            "compressor_max_input_tokens": limit}  # fmt: skip
        want = target_tokens if target_tokens else max(8, n_in // 2)
        max_len = max(4, min(want, max(4, n_in - 1)))
        min_len = max(1, min(max_len - 1, max_len // 4))
        # new-token bounds override the checkpoint's own min/max_length (142/56 for
        # distilbart-cnn), which would otherwise ignore the budget; the input is
        # already cut to the window, truncation=True only guards re-tokenisation
        out = self._pipe(source, max_new_tokens=max_len, min_new_tokens=min_len,
                         truncation=True, do_sample=False, num_beams=self.num_beams)  # fmt: skip
        return str(out[0]["summary_text"]).strip()

    def pass_notes(self) -> dict:
        return dict(getattr(self._notes, "last", {}))

    def describe(self) -> dict:
        return {"name": self.name, "model_path": str(self.model_path)}


class LLMLinguaCompressor(Compressor):
    """Adapter over :mod:`tersetalk.encoders.lingua` (LLMLingua), imported lazily.

    The wrapper owns model loading, the offline tiktoken set-up and the short-prompt
    fixes; this class only maps ``compress(text, target_tokens)`` onto it: the
    message's lines are the context pieces, the budget is the target (cl100k tokens).
    ``options`` are :class:`~tersetalk.encoders.lingua.LinguaSettings` fields
    (``model``, ``rate``, ``force_digits``, ``threads``, ...).
    """

    name = "llmlingua"

    def __init__(self, impl: Any = None, **options: Any) -> None:
        lingua = _import_lingua()
        try:
            self.settings = lingua.LinguaSettings.model_validate(options)
        except Exception as exc:  # noqa: BLE001 - pydantic's message names the field
            raise MediatorConfigError(f"compression.llmlingua: {exc}") from None
        if impl is None:
            try:
                # loaded now (the wrapper loads lazily), so a missing model stops here
                impl = lingua.load_compressor(self.settings).load()
            except Exception as exc:  # noqa: BLE001 - the wrapper's message says how to fix
                raise CompressorUnavailableError(
                    f"LLMLingua compressor unavailable: {exc}; or set compression.compressor: model"
                ) from exc
        self._impl = impl

    def compress(self, text: str, target_tokens: int | None = None) -> str:
        pieces = [ln for ln in text.splitlines() if ln.strip()]
        if not pieces:
            return text
        if target_tokens is None:
            from tersetalk.core.tokens import count_tokens

            target_tokens = max(1, count_tokens(text) // 2)
        force = self.settings.force_digits == "always"
        out = self._impl.compress(pieces, target_tokens=int(target_tokens), force=force,
                                  options=self.settings)  # fmt: skip
        return out.text

    def describe(self) -> dict:
        inner = getattr(self._impl, "describe", dict)()
        return {"name": self.name, **inner}


def _import_lingua():
    """The LLMLingua wrapper module, or a clear error naming the fix."""
    try:
        return importlib.import_module("tersetalk.encoders.lingua")
    except ModuleNotFoundError as exc:
        raise CompressorUnavailableError(
            f"the LLMLingua wrapper (tersetalk.encoders.lingua) cannot be imported: {exc}. "
            "Fix: install the workflow (`pip install -e '.[workflow]'`), or set "
            "compression.compressor: model"
        ) from exc


_WORDS = re.compile(r"\S+")


def make_compressor(cfg: CompressionConfig, client=None, gen=None,
                    count_tokens: TokenCounter | None = None) -> Compressor:  # fmt: skip
    """Build the compressor the config names (``compression.compressor``)."""
    kind = cfg.compressor
    if kind == "model":
        if client is None:
            raise MediatorConfigError(
                "compression.compressor=model needs a model client; pass one, or use "
                "compression.compressor: truncate"
            )
        return ModelSummarizer(client, gen, max_tokens=cfg.summary_max_tokens)
    if kind == "truncate":
        if count_tokens is None:
            raise MediatorConfigError("compression.compressor=truncate needs a token counter")
        return TruncationCompressor(count_tokens)
    if kind == "distilbart":
        return DistilBARTCompressor(resolve_distilbart(cfg.distilbart_path, cfg.distilbart_model))
    if kind == "llmlingua":
        return LLMLinguaCompressor(**cfg.llmlingua)
    raise MediatorConfigError(f"compression.compressor: unknown compressor {kind!r}")
