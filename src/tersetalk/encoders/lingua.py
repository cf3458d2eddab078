"""LLMLingua behind one small interface, tuned for the short messages agents send.

LLMLingua (0.2.2) drops the tokens a small causal LM finds least surprising. Three
things about it matter for messages of 50-300 tokens, and this wrapper handles them:

* **Short prompts barely compress** (microsoft/LLMLingua#195, #196). The token-level
  filter works on windows of ``iterative_size`` (200) tokens and places the first
  window at ``end - iterative_size``; for a prompt shorter than that the window
  starts at a negative index, Python wraps it, and the threshold decision is thrown
  away for most tokens. :class:`_ShortPromptCompressor` clamps the first window to
  the prompt's start (a no-op for long prompts), so the requested rate applies.
* **Tokenizers differ.** LLMLingua measures ``target_token`` with the compressor's
  tokenizer; we report cl100k tokens (what every record counts). The target is
  converted with the input's own token ratio, and when the achieved rate still
  misses the target by more than ``tolerance`` the compression is redone once with
  a corrected target (``max_adjust``). What was achieved is always reported, never
  the target.
* **Digits must survive for GSM8K.** LLMLingua-2 has ``force_tokens`` and
  ``force_reserve_digit``; the causal-LM path silently ignores both. There we mark
  numbers and math operators as uncompressed segments of LLMLingua's structured
  prompt (``<llmlingua, compress=False>``), which it keeps verbatim.

The compressor is question-aware: the context list is the facts, the question
conditions the token-level perplexities (and, with ``rank_method="longllmlingua"``,
the ranking of facts), and the question and goal themselves are never compressed.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tersetalk.core.tokens import count_tokens, ensure_offline_tiktoken
from tersetalk.encoders.errors import CompressionError, CompressorUnavailableError
from tersetalk.encoders.lingua_cache import CompressionCache
from tersetalk.encoders.prepare import DEFAULT_COMPRESSOR_DIR, is_prepared
from tersetalk.tasks.registry import get as get_task

log = logging.getLogger(__name__)

#: math operators kept verbatim next to digits when forcing (GSM8K)
DEFAULT_FORCE_TOKENS = ("+", "-", "*", "/", "=", "%", "$", "×", "÷")
_CONTEXT_BUDGET_RE = re.compile(r"^[+\-*]\s*\d+(\.\d+)?$")


class CompressorSettings(BaseModel):
    """Which compressor model, and where it runs."""

    model_config = ConfigDict(extra="forbid")

    #: an HF folder (default: the one `tersetalk prepare-compressor` writes from the
    #: embedded GGUF) or a hub id such as NousResearch/Llama-2-7b-hf or
    #: microsoft/llmlingua-2-xlm-roberta-large-meetingbank (must be in the local HF cache)
    model: str = DEFAULT_COMPRESSOR_DIR
    #: LLMLingua-2 (a token classifier); None: on when the model name says "llmlingua-2"
    llmlingua2: bool | None = None
    device: str = "cpu"
    #: torch threads; None: half the CPUs, like the llama.cpp backend
    threads: int | None = Field(None, ge=1)

    def use_llmlingua2(self) -> bool:
        if self.llmlingua2 is not None:
            return self.llmlingua2
        return "llmlingua-2" in self.model.lower()

    def resource_key(self) -> str:
        return f"llmlingua:{self.model}:{self.use_llmlingua2()}:{self.device}:{self.threads}"


class LinguaSettings(CompressorSettings):
    """How a message is compressed: target, ranking, forcing, and how hard to try."""

    #: target compression rate (compressed / original tokens) over ``rate_scope``
    rate: float = Field(0.5, gt=0.0, le=1.0)
    #: a token budget for the whole message instead of a rate (overrides ``rate``)
    target_tokens: int | None = Field(None, ge=1)
    #: context: the rate applies to the facts LLMLingua compresses (goal and question
    #: are kept verbatim); message: to the whole message, as LLMLingua's own ``rate``
    rate_scope: Literal["context", "message"] = "context"
    rank_method: Literal["llmlingua", "longllmlingua"] = "llmlingua"
    #: condition the token-level perplexities on the question (LongLLMLingua's idea)
    question_aware: bool = True
    #: contrastive perplexity (LongLLMLingua); needs question_aware
    condition_compare: bool = False
    reorder_context: Literal["original", "sort"] = "original"
    dynamic_context_compression_ratio: float = Field(0.0, ge=0.0, le=1.0)
    use_context_level_filter: bool = True
    #: LLMLingua's coarse (per fact) budget, e.g. "+100" or "*1.3"
    context_budget: str = "+100"
    #: keep digits and math operators verbatim: auto = for GSM8K only
    force_digits: Literal["auto", "always", "never"] = "auto"
    force_tokens: list[str] = Field(default_factory=lambda: list(DEFAULT_FORCE_TOKENS))
    #: also keep number words ("four", "twice", "half") when forcing
    force_number_words: bool = True
    #: keep capitalised words (names, titles) and numbers whole, for any task: a
    #: token-level compressor otherwise cuts inside the very names an answer is made
    #: of ("PPG Paints Arena" -> "PPG Paintsa")
    force_entities: bool = False
    #: with ``force_entities``, a capitalised word also keeps the content word that
    #: follows it ("Baudot code", "German libretto"): given the name, that word is the
    #: most predictable token of the sentence, so LLMLingua drops it first, and it is
    #: often the rest of an answer ("Baudot code" -> "Baudot")
    entity_phrases: bool = False
    #: a target counts as met when the achieved rate is within this relative miss;
    #: the compressor retries (up to max_adjust) while it misses by more than half of it
    tolerance: float = Field(0.2, ge=0.0, le=1.0)
    #: re-compressions with a corrected target when the miss is larger
    max_adjust: int = Field(2, ge=0, le=4)
    #: the context is never compressed below this many tokens
    min_context_tokens: int = Field(4, ge=1)
    iterative_size: int = Field(200, ge=8)
    #: clamp LLMLingua's first window for prompts shorter than iterative_size (#196)
    fix_short_prompts: bool = True

    @field_validator("context_budget")
    @classmethod
    def _budget_expr(cls, value: str) -> str:
        # LLMLingua eval()s "target_token" + context_budget: accept arithmetic only
        if not _CONTEXT_BUDGET_RE.match(value.strip()):
            raise ValueError("context_budget must look like '+100', '-20' or '*1.3'")
        return value.strip()

    def forces(self, task: str) -> bool:
        """Whether some spans are kept verbatim (digits for GSM8K, or entities)."""
        digits = self.force_digits == "always" or (
            self.force_digits == "auto" and get_task(task).answer.kind == "number"
        )
        return digits or self.force_entities


@dataclass
class Compressed:
    """One compression: the kept pieces and what it achieved, in cl100k tokens."""

    pieces: list[str]
    origin_tokens: int
    compressed_tokens: int
    target_tokens: int
    seconds: float = 0.0
    attempts: int = 0
    forced_tokens: int = 0
    #: the target was below what must be kept (forced spans, ``min_context_tokens``)
    reachable: bool = True
    #: nothing to do: the input already fit the target
    skipped: bool = False
    #: question conditioning failed inside LLMLingua and was retried without it
    fallbacks: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n".join(self.pieces)

    @property
    def rate(self) -> float:
        return self.compressed_tokens / self.origin_tokens if self.origin_tokens else 1.0

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rate"] = self.rate
        return out


class Compressor(Protocol):
    """What the systems need from a compressor (a fake one serves the unit tests)."""

    def compress(
        self,
        context: Sequence[str],
        *,
        target_tokens: int,
        question: str = "",
        force: bool = False,
        options: LinguaSettings | None = None,
    ) -> Compressed: ...

    def describe(self) -> dict[str, Any]:
        """Provenance; ``compressor_mismatch`` (when present) flows into the counters."""
        ...


#: number words GSM8K spells out ("four horses", "twice a day", "half of them")
NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
    "eighty ninety hundred thousand million billion dozen dozens half halves third thirds "
    "quarter quarters twice thrice double triple first second fifth"
).split()


#: a capitalised word with what belongs to it ("O'Donnell", "X&Y", "Khan-Din", "Co.")
ENTITY_WORD = r"\b[A-Z][\w'’&-]*\.?"


#: words that never complete a name ("Wagner to", "Paris and"): function words
PHRASE_STOPWORDS = (
    "a an and are as at be by for from had has have he her his in is it its of on or "
    "she that the their they this to was were which who with"
).split()
#: the content word after a name: lower-case, not a function word
_NEXT_WORD = r"(?:\s(?!(?:" + "|".join(PHRASE_STOPWORDS) + r")\b)[a-z][\w'’-]*)"


def force_pattern(
    force_tokens: Sequence[str],
    words: bool = True,
    entities: bool = False,
    phrases: bool = False,
) -> re.Pattern[str]:
    """Numbers (1,200 / 3.50 / 10:30), number words, the forced operators, with
    ``entities`` capitalised words, and with ``phrases`` too the content word after each
    ("Baudot code")."""
    ops = [re.escape(t) for t in sorted(set(force_tokens), key=len, reverse=True) if t]
    alts = [r"\d(?:[\d,.:/]*\d)?"]
    if entities:
        # case-sensitive: it is the capital that marks a name
        alts.insert(0, ENTITY_WORD + (_NEXT_WORD + "?" if phrases else ""))
    if words:
        alts.append(r"(?i:\b(?:" + "|".join(NUMBER_WORDS) + r")\b)")
    if ops:
        alts.append("(?i:" + "|".join(ops) + ")")
    # the space before a number is kept with it, so "10 pages 13" never becomes "1013"
    return re.compile(r"\s?(?:" + "|".join(alts) + ")")


def _default_threads() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, n // 2)


def _resolve_model(model: str) -> str:
    """A local folder as is; a missing default folder is an error naming the fix."""
    path = Path(model)
    if path.is_dir():
        return str(path)
    looks_local = (
        model.startswith((".", "/", "~"))
        or model == DEFAULT_COMPRESSOR_DIR
        or (model.count("/") != 1)
    )
    if looks_local:
        raise CompressorUnavailableError(
            f"compressor model folder {model!r} does not exist. Fix: run "
            f"`tersetalk prepare-compressor --out {model}` (or `snakemake {model}`), or set "
            "the variant's `model` to a prepared folder or a cached hub model"
        )
    return model  # a hub id: transformers resolves it (offline: from the local cache)


def _short_prompt_class():
    """LLMLingua's PromptCompressor with the first token-level window clamped (#196)."""
    from llmlingua import PromptCompressor

    class _ShortPromptCompressor(PromptCompressor):
        fix_short_prompts = True

        def get_compressed_input(
            self, loss, input_ids, attention_mask, end=200, iterative_size=200, *args, **kwargs
        ):
            # The window is [end - iterative_size, end) after the question prefix
            # (``start``). For prompts shorter than a window LLMLingua passes an ``end``
            # below that, which wraps around; every later window is placed correctly.
            start = kwargs.get("start", args[3] if len(args) > 3 else 0)
            if self.fix_short_prompts and end < start + iterative_size:
                end = start + iterative_size
            return super().get_compressed_input(
                loss, input_ids, attention_mask, end, iterative_size, *args, **kwargs
            )

    return _ShortPromptCompressor


def prepared_mismatch(model: str | Path, gguf: str | Path | None = None) -> bool:
    """True when ``model`` is the default prepared folder but not made from ``gguf``.

    ``gguf`` defaults to the embedded model's file. Other folders and hub ids are
    whatever the user named, so they never count as a mismatch.
    """
    if Path(model).resolve() != Path(DEFAULT_COMPRESSOR_DIR).resolve():
        return False
    return not is_prepared(model, gguf)


#: the compressors this process has loaded, by (model, llmlingua2, device, threads). The
#: loaded model is read-only: a run already reuses it for every message of every
#: example, so the runs of one process may share it as well. Its wrapper
#: (:class:`LLMLinguaCompressor`, with a run's cache and counters) stays per run.
_LOADED: dict[tuple[str, bool, str, int], Any] = {}
_LOADED_LOCK = threading.Lock()


class LLMLinguaCompressor:
    """A loaded LLMLingua (or LLMLingua-2) model; build once per run, reuse per message.

    The model is loaded at the first compression that is not in the cache
    (:meth:`use_cache`), so a run whose compressions are all cached never imports
    torch; :meth:`load` loads it at once (a clear error now rather than at the first
    message).
    """

    def __init__(self, settings: CompressorSettings):
        self.settings = settings
        self.llmlingua2 = settings.use_llmlingua2()
        self.model = _resolve_model(settings.model)  # fail fast, before importing torch
        self.threads = settings.threads or _default_threads()
        #: the default folder was not prepared from the embedded GGUF: the compressor's
        #: numbers are then not the ones the paper describes, so every record says so
        self.compressor_mismatch = prepared_mismatch(self.model)
        if self.compressor_mismatch:
            log.warning(
                "%s does not match the embedded GGUF (no or another manifest); records carry "
                "lingua_compressor_mismatch=1. Fix: `tersetalk prepare-compressor --force "
                "--out %s`",
                self.model,
                self.model,
            )
        self.load_seconds: float | None = None
        self._loaded: Any = None
        self._load_lock = threading.Lock()
        #: the compression cache (None: every compression is computed)
        self.cache: CompressionCache | None = None
        self._identity: dict[str, Any] = {}

    def load(self) -> LLMLinguaCompressor:
        """Load torch and the compressor model (once per process: a process that runs
        several runs, ``tersetalk run`` with several specs, loads a compressor's weights
        once, see :data:`_LOADED`); raises CompressorUnavailableError."""
        with self._load_lock:
            if self._loaded is None:
                key = (self.model, self.llmlingua2, self.settings.device, self.threads)
                with _LOADED_LOCK:
                    if key not in _LOADED:
                        _LOADED[key] = self._build()
                    else:
                        log.info("LLMLingua compressor %s already loaded in this process",
                                 self.model)  # fmt: skip
                self._loaded = _LOADED[key]
        return self

    @property
    def _pc(self) -> Any:
        if self._loaded is None:
            self.load()
        return self._loaded

    def _build(self) -> Any:
        import torch

        torch.set_num_threads(self.threads)
        ensure_offline_tiktoken()  # LLMLingua builds a tiktoken encoder in its constructor
        t0 = time.perf_counter()
        try:
            cls = _short_prompt_class()
            pc = cls(
                model_name=self.model,
                device_map=self.settings.device,
                model_config={"trust_remote_code": False},
                use_llmlingua2=self.llmlingua2,
            )
        except CompressorUnavailableError:
            raise
        except Exception as exc:  # noqa: BLE001 - one clear message for every load failure
            raise CompressorUnavailableError(
                f"LLMLingua could not load {self.model!r}: {type(exc).__name__}: {exc}. Fix: "
                f"prepare the default with `tersetalk prepare-compressor --out "
                f"{DEFAULT_COMPRESSOR_DIR}`, or make sure the named model is in the local "
                "Hugging Face cache"
            ) from exc
        # LLMLingua matches decoded text against its input; keep " ?" as " ?".
        pc.tokenizer.clean_up_tokenization_spaces = False
        self.load_seconds = time.perf_counter() - t0
        log.info(
            "LLMLingua%s compressor %s loaded on %s (%d threads) in %.1f s",
            "-2" if self.llmlingua2 else "",
            self.model,
            self.settings.device,
            self.threads,
            self.load_seconds,
        )
        return pc

    def use_cache(self, folder: str | Path) -> bool:
        """Keep compressions in the content-addressed cache under ``folder``
        (:mod:`tersetalk.encoders.lingua_cache`); False when the model cannot be
        fingerprinted (then nothing is cached, and the log says why)."""
        from tersetalk.encoders import lingua_cache as LC

        fingerprint = LC.model_fingerprint(self.model, Path(folder) / LC.FINGERPRINTS)
        if fingerprint is None:
            log.warning("LLMLingua cache off: %s cannot be fingerprinted", self.model)
            return False
        self._identity = {
            "model": fingerprint,
            "llmlingua2": self.llmlingua2,
            "device": self.settings.device,
            "threads": self.threads,
            "code": LC.code_identity(),
        }
        self.cache = LC.CompressionCache(folder)
        log.info("LLMLingua cache: %s (compressor %s)", folder, fingerprint)
        return True

    def describe(self) -> dict[str, Any]:
        cache = self.cache
        return {
            "compressor": self.model,
            "llmlingua2": self.llmlingua2,
            "device": self.settings.device,
            "threads": self.threads,
            "compressor_mismatch": self.compressor_mismatch,
            "cache_dir": None if cache is None else str(cache.folder),
            "cache_hits": 0 if cache is None else cache.hits,
            "cache_misses": 0 if cache is None else cache.misses,
        }

    def model_tokens(self, text: str) -> int:
        return len(self._pc.tokenizer(text, add_special_tokens=False).input_ids)

    # -- one compression, with the target corrected until it is met -----------------
    def compress(
        self,
        context: Sequence[str],
        *,
        target_tokens: int,
        question: str = "",
        force: bool = False,
        options: LinguaSettings | None = None,
    ) -> Compressed:
        """Compress ``context`` (a list of pieces) to about ``target_tokens`` cl100k tokens.

        With a cache (:meth:`use_cache`) a compression made before is read back, as it
        was computed; ``extra["cache_hit"]`` says whether it was.
        """
        opts = options or LinguaSettings()
        pieces = [" ".join(c.split()) for c in context if c and c.strip()]
        origin = count_tokens("\n".join(pieces))
        result = Compressed(
            pieces=pieces,
            origin_tokens=origin,
            compressed_tokens=origin,
            target_tokens=int(target_tokens),
            extra={"cache_hit": False},
        )
        if not pieces or target_tokens >= origin:
            result.skipped = True
            return result
        cache = self.cache
        if cache is None:
            return self._compress(result, target_tokens, question, force, opts)
        from tersetalk.encoders.lingua_cache import key_material

        material = key_material(
            self._identity,
            list(context),
            target_tokens=target_tokens,
            question=question,
            force=force,
            options=opts.model_dump(mode="json"),
        )
        key = cache.key(material)
        stored = cache.get(key)
        if stored is not None:
            hit = Compressed(**stored)
            hit.extra["cache_hit"] = True
            return hit
        result = self._compress(result, target_tokens, question, force, opts)
        fields = asdict(result)
        fields["extra"] = {k: v for k, v in result.extra.items() if k != "cache_hit"}
        cache.put(key, material, fields)
        return result

    def _compress(
        self,
        result: Compressed,
        target_tokens: int,
        question: str,
        force: bool,
        opts: LinguaSettings,
    ) -> Compressed:
        """The compression itself (with the model), into ``result``."""
        pieces = result.pieces
        pattern = (
            force_pattern(
                opts.force_tokens, opts.force_number_words, opts.force_entities, opts.entity_phrases
            )
            if force
            else None
        )
        forced = sum(count_tokens(m) for m in pattern.findall(result.text)) if pattern else 0
        floor = max(opts.min_context_tokens, forced)
        goal = max(int(target_tokens), floor)
        result.forced_tokens = forced
        result.reachable = target_tokens >= floor
        # LLMLingua counts with its own tokenizer: convert the cl100k target
        scale = self.model_tokens("\n\n".join(pieces)) / max(1, count_tokens("\n\n".join(pieces)))
        t_model = goal * scale
        t0 = time.perf_counter()
        best: tuple[float, list[str], int] | None = None
        fallbacks = 0
        attempts = 0
        tried: list[tuple[float, int]] = []
        for _ in range(1 + opts.max_adjust):
            attempts += 1
            text, fb = self._run(pieces, question, t_model, pattern, opts)
            fallbacks += fb
            out = [ln.strip() for ln in text.replace("‹", "<").split("\n") if ln.strip()]
            got = count_tokens("\n".join(out))
            miss = abs(got / goal - 1.0)
            if best is None or miss < best[0]:
                best = (miss, out, got)
            if miss <= opts.tolerance / 2:
                break
            tried.append((t_model, got))
            t_model = _next_target(tried, goal, scale)
        assert best is not None
        result.pieces, result.compressed_tokens = best[1], best[2]
        result.seconds = time.perf_counter() - t0
        result.attempts = attempts
        result.fallbacks = fallbacks
        return result

    def _run(
        self,
        pieces: list[str],
        question: str,
        t_model: float,
        pattern: re.Pattern[str] | None,
        opts: LinguaSettings,
    ) -> tuple[str, int]:
        """One LLMLingua call; returns (compressed context, fallbacks used)."""
        self._pc.fix_short_prompts = opts.fix_short_prompts
        if self.llmlingua2:
            return self._run_llmlingua2(pieces, t_model, pattern is not None, opts), 0
        kwargs = self._kwargs(question, t_model, opts)
        if kwargs["use_context_level_filter"] and self._filter_keeps_all(pieces, t_model, opts):
            kwargs["use_context_level_filter"] = False  # same output, without the ranking pass
        try:
            return self._call(pieces, kwargs, pattern, t_model), 0
        except AssertionError:
            # LLMLingua asserts that the question prefix and the context tokenize apart;
            # when they merge, compress without conditioning on the question.
            if kwargs["condition_in_question"] == "none" and not kwargs["condition_compare"]:
                raise CompressionError("LLMLingua failed an internal check") from None
            kwargs.update(
                condition_in_question="none", condition_compare=False, rank_method="llmlingua"
            )
            try:
                return self._call(pieces, kwargs, pattern, t_model), 1
            except AssertionError:
                raise CompressionError(
                    "LLMLingua failed an internal check, with and without the question"
                ) from None

    def _filter_keeps_all(self, pieces: list[str], t_model: float, opts: LinguaSettings) -> bool:
        """True when LLMLingua's coarse filter would keep every piece in its order.

        Its budget is ``target + context_budget``; with the default "+100" a short
        message always fits, and then the ranking pass only costs time.
        """
        if opts.reorder_context != "original" or opts.dynamic_context_compression_ratio:
            return False
        op, num = opts.context_budget[0], float(opts.context_budget[1:])
        budget = {"+": t_model + num, "-": t_model - num, "*": t_model * num}[op]
        lengths = [len(self._pc.tokenizer(p).input_ids) for p in pieces]
        # LLMLingua adds pieces (best ranked first) until the budget goes negative,
        # keeping the one that crossed it: all survive, whatever the ranking, when
        # every piece but the shortest fits
        return budget - (sum(lengths) - min(lengths)) >= 0

    def _kwargs(self, question: str, t_model: float, opts: LinguaSettings) -> dict[str, Any]:
        rank = opts.rank_method if question else "llmlingua"
        if question and opts.question_aware:
            cond = "after_condition"
        elif question and rank == "longllmlingua":
            cond = "after"
        else:
            cond = "none"
        return dict(
            question=question,
            target_token=t_model,
            iterative_size=opts.iterative_size,
            rank_method=rank,
            condition_in_question=cond,
            condition_compare=bool(opts.condition_compare and question and opts.question_aware),
            reorder_context=opts.reorder_context,
            dynamic_context_compression_ratio=opts.dynamic_context_compression_ratio,
            use_context_level_filter=opts.use_context_level_filter,
            context_budget=opts.context_budget,
            concate_question=False,
            add_instruction=False,
        )

    def _call(
        self,
        pieces: list[str],
        kwargs: dict[str, Any],
        pattern: re.Pattern[str] | None,
        t_model: float,
    ) -> str:
        try:
            if pattern is None:
                res = self._pc.compress_prompt(pieces, **kwargs)
            else:
                # every segment carries its own rate, so LLMLingua's global one is unused
                tagged, _ = self._tag_forced(pieces, pattern, t_model)
                res = self._pc.structured_compress_prompt(tagged, **kwargs)
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001 - becomes the example's error row
            raise CompressionError(f"LLMLingua failed: {type(exc).__name__}: {exc}") from exc
        return res["compressed_prompt"]

    def _tag_forced(
        self, pieces: list[str], pattern: re.Pattern[str], t_model: float
    ) -> tuple[list[str], float]:
        """Each piece as LLMLingua structured segments: forced spans uncompressed.

        The compressible segments get the rate that brings the whole context to the
        target once the forced spans are kept in full.
        """
        forced_model = 0
        total_model = 0
        split: list[list[tuple[str, bool]]] = []
        for piece in pieces:
            piece = piece.replace("<", "‹")  # LLMLingua's segment syntax reserves "<"
            segs: list[tuple[str, bool]] = []
            pos = 0
            for m in pattern.finditer(piece):
                if m.start() > pos:
                    segs.append((piece[pos : m.start()], True))
                segs.append((m.group(0), False))
                pos = m.end()
            if pos < len(piece):
                segs.append((piece[pos:], True))
            split.append(segs)
            for text, compress in segs:
                n = self.model_tokens(text)
                total_model += n
                forced_model += 0 if compress else n
        free = max(1, total_model - forced_model)
        seg_rate = min(1.0, max(0.02, (t_model - forced_model) / free))
        tagged = []
        for segs in split:
            tagged.append(
                "".join(
                    f"<llmlingua, rate={seg_rate:.4f}>{t}</llmlingua>"
                    if c
                    else f"<llmlingua, compress=False>{t}</llmlingua>"
                    for t, c in segs
                )
            )
        return tagged, seg_rate

    def _run_llmlingua2(
        self, pieces: list[str], t_model: float, force: bool, opts: LinguaSettings
    ) -> str:
        total = max(1, self.model_tokens("\n\n".join(pieces)))
        try:
            res = self._pc.compress_prompt(
                pieces,
                rate=min(1.0, max(0.02, t_model / total)),
                force_tokens=list(opts.force_tokens) + ["\n"] if force else ["\n"],
                force_reserve_digit=force,
                use_context_level_filter=False,
                chunk_end_tokens=[".", "\n"],
            )
        except Exception as exc:  # noqa: BLE001
            raise CompressionError(f"LLMLingua-2 failed: {type(exc).__name__}: {exc}") from exc
        return "\n".join(res.get("compressed_prompt_list") or [res["compressed_prompt"]])


def _next_target(tried: list[tuple[float, int]], goal: int, scale: float) -> float:
    """The next LLMLingua target: a secant step on (target, achieved), else a shift.

    The achieved length is roughly the target minus an offset (separators and the
    first token are never scored), so the first correction shifts the target by the
    miss; later ones interpolate between the two latest tries.
    """
    t, got = tried[-1]
    if len(tried) >= 2:
        t0, got0 = tried[-2]
        if got != got0:
            step = (goal - got) * (t - t0) / (got - got0)
            if step > 0 if goal > got else step < 0:
                return max(1.0, t + step)
    return max(1.0, t + (goal - got) * scale)


def load_compressor(settings: CompressorSettings) -> LLMLinguaCompressor:
    return LLMLinguaCompressor(
        CompressorSettings.model_validate(
            settings.model_dump(include=set(CompressorSettings.model_fields))
        )
    )


def compression_cache_dir(ctx) -> Path | None:
    """Where a run keeps its compressions: ``<cache_dir>/lingua``, beside the call cache.

    The workflow's ``cache_dir`` from ``ctx.shared["cache_dir"]`` when the runner puts
    it there, else from the call cache the run's client uses (``<cache_dir>/calls``);
    None (no caching) for a client without a cache.
    """
    from tersetalk.encoders.lingua_cache import LINGUA_CACHE_DIR

    root = ctx.shared.get("cache_dir")
    if root:
        return Path(root) / LINGUA_CACHE_DIR
    calls = ctx.client.describe().get("cache_dir")
    if not calls:
        return None
    calls = Path(calls)
    return (calls.parent if calls.name == "calls" else calls) / LINGUA_CACHE_DIR


def get_compressor(ctx, settings: CompressorSettings) -> Compressor:
    """The run's compressor for ``settings``, built on first use (``RunContext.resource``),
    with the run's compression cache (:func:`compression_cache_dir`)."""

    def build() -> Compressor:
        comp = load_compressor(settings)
        if isinstance(comp, LLMLinguaCompressor):  # test doubles stand in for the model
            folder = compression_cache_dir(ctx)
            if folder is not None:
                comp.use_cache(folder)
        return comp

    return ctx.resource(settings.resource_key(), build)


def ceil_int(x: float) -> int:
    return int(math.ceil(x - 1e-9))
