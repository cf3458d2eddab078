"""Any OpenAI-compatible chat server: Ollama's /v1, vLLM, llama.cpp's servers.

Chat is streamed with ``stream_options={"include_usage": True}`` so TTFT and ITL are
measured and the server's own token counts arrive in the last chunk. Servers that
send no usage in a stream (llama-cpp-python's ``llama_cpp.server`` does not) get
``prompt_tokens = completion_tokens = -1`` ("unknown", never a guess), a warning, and
``describe()["usage_source"]`` says so; construct with ``stream=False`` to get the
server's exact usage from non-streamed calls instead (then TTFT/ITL are ``None``).

Transport retries (timeouts, dropped connections, HTTP 5xx and 429, and replies that
are not a well-formed completion) use exponential backoff ``backoff_s * 2**k``, or
the server's ``Retry-After`` when it asks for longer (up to ``max_wait_s``; a longer
wait fails the call at once). What is still failing after the retries raises
:class:`TransientModelError`, which the call cache never stores and the runner
retries on the next run. A refused connection before the server ever answered is
not retried: it raises :class:`ModelUnavailableError` at once with the hint to start
one.

A reply is well-formed when it has a choice and a ``finish_reason``: a body that is
not an event stream on a streamed request, a body that is not JSON on a non-streamed
one, a stream cut off before its last chunk, or a completion without choices is the
server's fault, never an empty answer. An empty ``content`` is retried too; if the
model keeps answering nothing, the call fails with :class:`ModelCallError` (an error
row; not cached). So does an answer made of tool calls without text (the workflow
offers no tools): it is this example's answer, not retried, never cached as empty.
A usage report whose token counts are not non-negative integers raises
:class:`ModelEnvironmentError` (the server's report is broken for every example).

Every request is guarded (see :class:`_GuardedHTTPClient`): ``timeout_s`` bounds it
from sending to the last byte of the reply, streamed or not, so a server that trickles
a chunk a second cannot hold a call open (a watchdog closes the socket at the
deadline); ``deadline_s``, when set, bounds the whole call, retries and waits
included. The reply may hold at most :func:`reply_byte_cap` bytes for the request's
``max_tokens``; reading stops as soon as it is exceeded. Both are transient faults
(retried, then :class:`TransientModelError`). HTTP 401/403 raise
:class:`ModelAuthError`, naming the environment variable the key came from: a wrong
key fails every call alike, so the run stops instead of recording error rows. Lone
surrogates in a reply are replaced by U+FFFD (``extra["surrogates_replaced"]``).
Every request has a connection of its own (``Connection: close``), so a watchdog
always has a socket to shut down.

Every other request (the model listing, the tokenize endpoint, llama.cpp's ``/props``,
Ollama's native API) is a side request (:meth:`OpenAICompatClient._side`), bounded
the same way by :func:`.http.side_request` and retried like a call; when it keeps
failing it raises :class:`ModelEnvironmentError`, which stops the run: it is the
server's fault, not an example's. Whatever a server says in an error body, at any
status, is quoted with the API key and anything key-like masked
(:func:`.credentials.mask_secrets`, applied where errors are classified).

Structured output goes through Instructor's JSON_SCHEMA mode. Servers disagree on
how to ask for schema-constrained decoding: the OpenAI form
``{"type": "json_schema", "json_schema": {...}}`` works on OpenAI, vLLM, Ollama >= 0.5
and llama.cpp's ``llama-server``; llama-cpp-python's ``llama_cpp.server`` rejects it
(HTTP 500, validation error on ``response_format.type``) and needs
``{"type": "json_object", "schema": <schema>}``. ``structured_format="auto"`` sends
the OpenAI form and, if the server rejects that ``response_format``, switches to the
llama.cpp form for the rest of the client's life.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from ._common import (
    InstructorClient,
    replace_escaped_lone_surrogates,
    replace_lone_surrogates,
    stream_timing,
    usage_of,
)
from .base import (
    CallResult,
    GenerationConfig,
    ModelAuthError,
    ModelCallError,
    ModelEnvironmentError,
    ModelError,
    ModelUnavailableError,
    TransientModelError,
    check_messages,
)
from .credentials import PLACEHOLDER_KEYS, check_base_url, mask_secrets, refused_key_message
from .http import (
    SIDE_REPLY_CAP,
    DeadlineExceeded,
    Guard,
    GuardedStream,
    ReplyTooLarge,
    SideReply,
    Watchdog,
    error_chain,
    refusal,
    retry_after_s,
    side_request,
)
from .tokenizers import TokensUnavailableError, load_tokenizer, parse_tokenizer

__all__ = ["REPLY_BYTES_PER_TOKEN", "REPLY_SLACK_BYTES", "OpenAICompatClient", "reply_byte_cap"]

#: bytes of reply allowed per requested token: a streamed token costs one event of
#: some 200-300 bytes (id, model, choices, delta), a non-streamed one a few bytes, so
#: 2 KiB is generous for any honest server
REPLY_BYTES_PER_TOKEN = 2048
#: bytes allowed on top, for the envelope, usage and the final events
REPLY_SLACK_BYTES = 256 * 1024


def reply_byte_cap(max_tokens: int) -> int:
    """The most bytes a reply to a request for ``max_tokens`` tokens may hold.

    Why a cap: a broken or hostile server could otherwise send megabytes (a 20 MB
    completion against ``max_tokens: 160`` took 1.5 GB of memory to parse). At 160
    tokens the cap is about 0.6 MB; at 4096 tokens about 8 MB.
    """
    return REPLY_SLACK_BYTES + REPLY_BYTES_PER_TOKEN * max(1, int(max_tokens))


log = logging.getLogger(__name__)

StructuredFormat = Literal["auto", "json_schema", "json_object_schema"]


def _transport_error_types() -> tuple[type[BaseException], ...]:
    """Errors a streamed body can raise mid-way (the openai client uses httpx2 or httpx)."""
    types: list[type[BaseException]] = []
    for name in ("httpx2", "httpx", "httpcore"):
        try:
            mod = __import__(name)
        except ImportError:
            continue
        for attr in ("TransportError", "HTTPError", "RemoteProtocolError"):
            t = getattr(mod, attr, None)
            if isinstance(t, type):
                types.append(t)
    return tuple(types)


class _RetryableError(Exception):
    def __init__(self, kind: str, cause: BaseException) -> None:
        super().__init__(f"{kind}: {cause}")
        self.kind = kind
        self.cause = cause


class _ResponseFormatRejected(Exception):
    pass


class _BadReply(Exception):
    """The server answered with something that is not a well-formed completion."""


class _EmptyAnswer(Exception):
    """A well-formed completion whose content is empty."""


class _ToolCallAnswer(Exception):
    """A well-formed completion with tool calls and no text: the workflow offers no tools."""


class _SideStatus(Exception):
    """A side request answered with a status worth retrying (HTTP 5xx but 501, 408, 429)."""

    def __init__(self, reply: SideReply, said: str) -> None:
        super().__init__(f"HTTP {reply.status}: {said}")
        self.status_code = reply.status
        self.headers = reply.headers  # for Retry-After (see .http.retry_after_s)


# the limits of a request, shared with the side requests (see :mod:`.http`)
_ReplyTooLarge = ReplyTooLarge
_DeadlineExceeded = DeadlineExceeded
_Guard = Guard


@functools.cache
def _guarded_client_class() -> type:
    """The openai client's HTTP client, made to enforce :class:`_Guard` limits.

    Built on first use so that importing this module does not import openai. It wraps
    ``send`` (not the transport) so the guard also holds behind a proxy from the
    environment, which httpx routes through a transport of its own.
    """
    import httpx2
    import openai

    # httpx only iterates a body that is one of its own stream types
    byte_stream = type("_GuardedByteStream", (GuardedStream, httpx2.SyncByteStream), {})

    class _GuardedHTTPClient(openai.DefaultHttpxClient):  # type: ignore[misc, valid-type]
        def __init__(self, guard_of: Callable[[], _Guard | None], **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._guard_of = guard_of

        def send(self, request: Any, *, stream: bool = False, **kwargs: Any) -> Any:
            guard = self._guard_of()
            # every request has a connection of its own: a kept-alive one, reused by a
            # guarded request, would give its watchdog no socket to shut down
            request.headers["Connection"] = "close"
            if guard is None:
                return super().send(request, stream=stream, **kwargs)
            remaining = guard.deadline - time.monotonic()
            if remaining <= 0:
                raise _DeadlineExceeded("no time was left for this request")
            # connecting and waiting for the headers may not outlast the deadline either
            timeouts = dict(request.extensions.get("timeout") or {})
            request.extensions["timeout"] = {
                k: remaining if timeouts.get(k) is None else min(timeouts[k], remaining)
                for k in ("connect", "read", "write", "pool")
            }
            watchdog = Watchdog(guard)
            outer_trace = request.extensions.get("trace")

            def trace(name: str, info: dict[str, Any]) -> None:
                watchdog.trace(name, info)
                if outer_trace is not None:
                    outer_trace(name, info)

            request.extensions["trace"] = trace
            try:
                response = super().send(request, stream=True, **kwargs)
            except BaseException as exc:
                watchdog.cancel()
                if guard.expired:
                    raise _DeadlineExceeded(
                        f"no reply headers within {guard.timeout_s:g}s"
                    ) from exc
                raise
            refused = refusal(response.headers, guard)  # before a byte of the body is read
            if refused is not None:
                watchdog.cancel()
                response.close()
                raise refused
            response.stream = byte_stream(response.stream, watchdog)
            if not stream:
                try:
                    response.read()
                except BaseException:
                    response.close()
                    raise
            return response

    return _GuardedHTTPClient


def _create(create: Callable[..., Any], **kwargs: Any) -> Any:
    """``create(**kwargs)``, with a non-streamed body that is not JSON as a bad reply.

    The openai client parses a JSON-typed body with ``json.loads`` and lets the error
    out raw; it is the server's fault, like a stream that is not an event stream.
    """
    try:
        return create(**kwargs)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _BadReply(f"a body that is not valid JSON ({exc})") from exc


def _tool_names(calls: Any) -> str:
    """The names of the tools in ``calls`` (a message's or a delta's ``tool_calls``)."""
    names = []
    for call in calls if isinstance(calls, list) else []:
        function = getattr(call, "function", None)
        names.append(str(getattr(function, "name", None) or "?"))
    return ", ".join(names[:5]) or "?"


def _sent_usage(body: bytes) -> Any:
    """The ``usage`` a reply's body sends, as sent (None when it sends none): the whole
    body's for a JSON completion, the last event's that has one for an event stream."""
    try:
        return json.loads(body).get("usage")
    except (ValueError, AttributeError):
        pass  # not one JSON object: an event stream
    for line in reversed(body.splitlines()):
        if line.startswith(b"data:") and b'"usage"' in line:
            try:
                usage = json.loads(line[5:]).get("usage")
            except (ValueError, AttributeError):
                continue
            if usage is not None:
                return usage
    return None


def _check_completion(resp: Any) -> None:
    """Raise unless ``resp`` (a non-streamed completion) has a choice, a finish_reason
    and text: tool calls without text are an answer the workflow cannot use (it offers
    no tools), never an empty answer to cache."""
    choices = getattr(resp, "choices", None)
    if not choices:
        raise _BadReply(f"a completion without choices ({str(resp)[:200]!r})")
    choice = choices[0]
    if getattr(choice, "finish_reason", None) is None:
        raise _BadReply("a completion without finish_reason (not a well-formed reply)")
    message = getattr(choice, "message", None)
    if message is not None and not isinstance(message.content, (str, type(None))):
        raise _BadReply(f"content that is not text ({type(message.content).__name__})")
    if message is not None and not message.content and getattr(message, "tool_calls", None):
        raise _ToolCallAnswer(_tool_names(message.tool_calls))
    if message is None or not message.content:
        raise _EmptyAnswer(f"empty content (finish_reason {choice.finish_reason!r})")


def _readable_model_file(props: dict[str, Any] | None) -> Path | None:
    """The ``model_path`` of llama.cpp's ``/props`` when it is a file readable here."""
    where = (props or {}).get("model_path")
    if isinstance(where, str) and where and Path(where).is_file():
        return Path(where)
    return None


class OpenAICompatClient(InstructorClient):
    """Chat model behind an OpenAI-compatible HTTP API.

    ``max_retries`` bounds both the transport retries of one request and Instructor's
    re-asks after a schema-invalid answer. ``timeout_s`` bounds each request, from
    sending it to the last byte of its reply; ``deadline_s`` (None: unbounded) bounds
    a whole ``chat``/``structured`` call, retries, backoff and re-asks included.
    ``api_key_env`` is only the *name* of the variable the key came from, for the
    message of a refused key. ``tokenizer`` (a callable ``str -> int``), ``tokenizer_spec``
    (``models.tokenizer``: ``gguf:<path>``, ``tokenizer.json:<path>``,
    ``tiktoken:<encoding>`` or ``none``, see :mod:`.tokenizers`) or ``tokenizer_gguf``
    (the model's GGUF file, loaded vocab-only) count tokens locally; without them
    ``count_tokens`` asks the server's tokenize endpoint (llama-cpp-python's
    ``/extras/tokenize`` or llama.cpp's ``/tokenize``), and where there is none (the
    OpenAI API, most hosted providers) raises :class:`.tokenizers.TokensUnavailableError`:
    the model's tokens are then missing, never counted by another tokenizer unasked.
    """

    backend = "openai"
    _log = log

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "not-needed",
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        *,
        stream: bool = True,
        structured_format: StructuredFormat = "auto",
        tokenizer: Callable[[str], int] | None = None,
        tokenizer_gguf: str | Path | None = None,
        tokenizer_spec: str | None = None,
        max_wait_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
        deadline_s: float | None = None,
        api_key_env: str | None = None,
    ) -> None:
        import openai

        if not base_url:
            raise ModelError(
                "OpenAI-compatible backend needs a server URL: set models.base_url "
                "(e.g. http://127.0.0.1:8000/v1)"
            )
        if not model:
            raise ModelError("OpenAI-compatible backend needs a model name: set models.model")
        check_base_url(base_url)
        if not (timeout_s > 0 and math.isfinite(timeout_s)):
            raise ModelError(f"models.timeout_s must be a positive number, got {timeout_s!r}")
        if deadline_s is not None and not (deadline_s > 0 and math.isfinite(deadline_s)):
            raise ModelError(
                f"models.deadline_s must be a positive number or null, got {deadline_s!r}"
            )
        if structured_format not in ("auto", "json_schema", "json_object_schema"):
            raise ModelError(
                f"structured_format must be auto, json_schema or json_object_schema, "
                f"got {structured_format!r}"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.max_wait_s = float(max_wait_s)
        self.deadline_s = None if deadline_s is None else float(deadline_s)
        self.api_key_env = api_key_env or None
        self._sleep = sleep
        self.stream = stream
        self.structured_format: StructuredFormat = structured_format
        if tokenizer_spec is not None:
            parse_tokenizer(tokenizer_spec)  # a malformed models.tokenizer stops here
        self._tokenizer = tokenizer
        self._tokenizer_spec = tokenizer_spec
        self._tokenizer_gguf = Path(tokenizer_gguf) if tokenizer_gguf else None
        # where the model's token counts come from, once known (tokens_model_source)
        self._tokens_source: str | None = "given counter" if tokenizer is not None else None
        self._tokens_missing: str | None = None  # why they cannot be counted, once known
        self._tokenize_route: str | None = None
        self._contacted = False
        self._stream_usage_seen: bool | None = None
        # A run with models.max_concurrency > 1 calls one client from several threads:
        # the openai client (one httpx connection pool) is thread-safe; what one call
        # counts, and the limits of the request in flight, are kept per thread.
        self._per_thread = threading.local()
        # one HTTP client for every request of this backend, chat and side requests
        # alike: a client and its TLS context cost some 20 ms of CPU to build
        self._http = _guarded_client_class()(
            lambda: getattr(self._per_thread, "guard", None),
            timeout=self.timeout_s,
            # the byte cap counts what arrives: ask for it uncompressed
            headers={"Accept-Encoding": "identity"},
        )
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or "not-needed",
            timeout=self.timeout_s,
            max_retries=0,  # retries are ours: typed errors, backoff, first-contact rule
            http_client=self._http,
        )
        # token counts by text, most recent last (see count_tokens)
        self._token_memo: OrderedDict[str, int] = OrderedDict()
        self._token_memo_lock = threading.Lock()
        self._server_model_file: Path | None = None  # found through /props, see _local_counter
        self._props_asked = False
        self._transport_errors = _transport_error_types()
        self._tokenizer_lock = threading.Lock()  # the lazily loaded tokenizer is built once

    @property
    def _transport_tries(self) -> int:
        """Transport tries of the structured call running on this thread."""
        return getattr(self._per_thread, "transport_tries", 0)

    @_transport_tries.setter
    def _transport_tries(self, value: int) -> None:
        self._per_thread.transport_tries = value

    # -- messages -------------------------------------------------------------------

    def _where(self) -> str:
        return f"{self.backend} model {self.model!r} at {self.base_url}"

    def _down_message(self) -> str:
        return (
            f"no OpenAI-compatible server at {self.base_url}: start one (e.g. "
            "`python -m tersetalk.models.llamacpp_server --model ...` or `ollama serve`) or fix "
            "models.base_url in config"
        )

    # -- transport ------------------------------------------------------------------

    def _classify(self, exc: BaseException, structured: bool = False) -> BaseException:
        """Turn a library error into ours, or into a _RetryableError to back off and retry.

        Every error passes here first, so here the secrets in what a server said are
        masked (:meth:`_scrub`), before any of it is quoted in a message or a log line.
        """
        import openai

        for e in error_chain(exc):
            self._scrub(e)
        for e in error_chain(exc):  # our guard's verdicts, however the client wrapped them
            if isinstance(e, _DeadlineExceeded):
                return _RetryableError("timeout", e)
            if isinstance(e, _ReplyTooLarge):
                return _RetryableError("oversized reply", e)
        if isinstance(exc, openai.APITimeoutError):
            return _RetryableError("timeout", exc)
        if isinstance(exc, openai.APIConnectionError):
            if not self._contacted:
                return ModelUnavailableError(f"{self._down_message()} ({exc})")
            return _RetryableError("connection", exc)
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            body = str(exc.message) + " " + str(exc.body)
            self._contacted = True
            if structured and "response_format" in body and status in (400, 422, 500):
                return _ResponseFormatRejected(body)
            if status == 404:
                return ModelUnavailableError(
                    f"{self._where()}: not found (HTTP 404: {exc.message}); check that the "
                    "server serves this model (`ollama pull <model>`, or `--model_alias` for "
                    "tersetalk.models.llamacpp_server) and that models.base_url ends with /v1"
                )
            if status in (401, 403):  # a wrong key fails every call alike: stop the run
                return ModelAuthError(refused_key_message(
                    self._where(), self.api_key_env, status, str(exc.message), "OPENAI_API_KEY",
                    self._bearer_key(),
                ))  # fmt: skip
            if status >= 500 or status in (408, 429):
                return _RetryableError(f"HTTP {status}", exc)
            return ModelCallError(f"{self._where()}: HTTP {status}: {exc.message}")
        if isinstance(exc, _SideStatus):
            return _RetryableError(f"HTTP {exc.status_code}", exc)
        if self._transport_errors and isinstance(exc, self._transport_errors):
            return _RetryableError("connection", exc)
        if isinstance(exc, _ToolCallAnswer):  # the model's answer to this example: a row
            return ModelCallError(
                f"{self._where()}: the model answered with a tool call ({exc}) and no text, "
                "but the workflow offers no tools; use a model or chat template that "
                "answers in text"
            )
        if isinstance(exc, _BadReply):
            return _RetryableError("malformed reply", exc)
        if isinstance(exc, _EmptyAnswer):
            return _RetryableError("empty answer", exc)
        if isinstance(exc, ModelError):
            return exc
        return ModelCallError(f"{self._where()}: {type(exc).__name__}: {exc}")

    def _bearer_key(self) -> str | None:
        """The API key sent as a Bearer token, or None when none is configured."""
        key = self._client.api_key
        return key if key and key not in PLACEHOLDER_KEYS else None

    def _masked(self, text: str) -> str:
        """``text`` (what a server said) with the API key and anything key-like masked."""
        return mask_secrets(text, self._bearer_key())

    def _scrub(self, exc: BaseException) -> None:
        """Mask secrets, in place, in what ``exc`` quotes of a server's reply (its
        arguments, ``message`` and ``body``): some servers and proxies echo the request's
        Authorization header in an error body, at any status, and the exception is
        quoted in error rows, events and logs, and shown in tracebacks."""
        with contextlib.suppress(AttributeError, TypeError):
            exc.args = tuple(self._masked(a) if isinstance(a, str) else a for a in exc.args)
        for name in ("message", "body"):
            value = getattr(exc, name, None)
            if isinstance(value, dict | list):
                text = self._masked(json.dumps(value, default=str))
                try:
                    value = json.loads(text)
                except ValueError:
                    value = text
            elif isinstance(value, str):
                value = self._masked(value)
            else:
                continue
            with contextlib.suppress(AttributeError, TypeError):
                setattr(exc, name, value)

    @contextlib.contextmanager
    def _call_clock(self) -> Iterator[None]:
        """The clock of one ``chat``/``structured`` call (for ``deadline_s``), stopped when
        the call ends, so a later request on this thread (``ping``) never inherits it."""
        self._per_thread.call_deadline = (
            None if self.deadline_s is None else time.monotonic() + self.deadline_s
        )
        try:
            yield
        finally:
            self._per_thread.call_deadline = None

    def _call_deadline(self) -> float | None:
        return getattr(self._per_thread, "call_deadline", None)

    def _out_of_time(self, cause: BaseException, kind: str) -> TransientModelError:
        return TransientModelError(
            f"{self._where()}: {kind}, and the call has used up models.deadline_s="
            f"{self.deadline_s:g}s ({cause}); raise models.deadline_s, or check the server"
        )

    def _with_retries(
        self, fn: Callable[[], Any], structured: bool = False, max_tokens: int | None = None
    ) -> tuple[Any, int]:
        """Run ``fn`` (a whole request, stream consumed) with backoff; returns (value, tries).

        With ``max_tokens``, each try is guarded: it must end within ``timeout_s`` (and
        what ``deadline_s`` leaves of the call) and its reply stay under
        :func:`reply_byte_cap`. With ``structured``, a server's rejection of
        ``response_format`` is raised as ``_ResponseFormatRejected`` so the caller can
        switch formats.
        """
        attempt = 0
        while True:
            attempt += 1
            call_deadline = self._call_deadline()
            if max_tokens is not None:
                deadline = time.monotonic() + self.timeout_s
                if call_deadline is not None:
                    deadline = min(deadline, call_deadline)
                self._per_thread.guard = _Guard(deadline, reply_byte_cap(max_tokens),
                                                deadline - time.monotonic(),
                                                body=bytearray())  # fmt: skip
            try:
                value = fn()
                self._contacted = True
                return value, attempt
            except Exception as exc:  # classified: nothing raw escapes
                err = self._classify(exc, structured)
                if err is exc:
                    raise
                if not isinstance(err, _RetryableError):
                    raise err from exc
            finally:
                self._per_thread.guard = None
            if attempt > self.max_retries:
                if err.kind == "connection":
                    raise ModelUnavailableError(
                        f"{self._where()}: lost the connection and {attempt} attempts failed "
                        f"({err.cause}); is the server still running? {self._down_message()}"
                    ) from err.cause
                if err.kind == "empty answer":  # the model's doing, not the server's
                    raise ModelCallError(
                        f"{self._where()}: the model answered with empty content on all "
                        f"{attempt} attempts; use a stronger model or raise the generation "
                        "budget"
                    ) from err.cause
                fix = {
                    "timeout": f"raise models.timeout_s (now {self.timeout_s:g}s for each "
                    "request, to the last byte of the reply) or models.max_retries",
                    "malformed reply": "check that models.base_url points at an "
                    "OpenAI-compatible server (a proxy can break event streams), or set "
                    "models.stream: false",
                    "oversized reply": "the server sent far more than max_tokens allows; "
                    "check that it honours max_tokens and that models.base_url points at "
                    "an OpenAI-compatible server",
                }.get(
                    err.kind, "see the server's log; raise models.max_retries if it is overloaded"
                )
                raise TransientModelError(
                    f"{self._where()}: {err.kind} on all {attempt} attempts ({err.cause}); {fix}"
                ) from err.cause
            delay = self.backoff_s * (2 ** (attempt - 1))
            asked = retry_after_s(err.cause)
            if asked is not None:
                if asked > self.max_wait_s:
                    raise TransientModelError(
                        f"{self._where()}: {err.kind}; the server asks to retry after "
                        f"{asked:.0f}s (Retry-After), longer than models.max_wait_s="
                        f"{self.max_wait_s:g}; run again later or raise models.max_wait_s"
                    ) from err.cause
                delay = max(delay, asked)  # the server knows when it can take us again
            if call_deadline is not None and time.monotonic() + delay >= call_deadline:
                raise self._out_of_time(err.cause, err.kind) from err.cause
            log.warning(
                "%s: %s; retry %d/%d in %.1fs", self._where(), err, attempt, self.max_retries, delay
            )
            self._sleep(delay)

    def _sampling(self, gen: GenerationConfig) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "temperature": gen.temperature,
            "top_p": gen.top_p,
            "max_tokens": gen.max_tokens,
            "seed": gen.seed,
        }
        if gen.stop:
            kwargs["stop"] = list(gen.stop)
        if gen.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    # -- chat -----------------------------------------------------------------------

    def _send_chat(
        self, messages: list[dict[str, Any]], gen: GenerationConfig, **stream: Any
    ) -> Any:
        """One chat request, streamed or not (``stream``, ``stream_options``)."""
        return _create(
            self._client.chat.completions.create,
            model=self.model,
            messages=messages,
            **stream,
            **self._sampling(gen),
        )

    def _stream_once(self, messages: list[dict[str, Any]], gen: GenerationConfig) -> dict[str, Any]:
        parts: list[str] = []
        times: list[float] = []
        usage = None
        chunk_with_usage = None
        finish = None
        n_chunks = 0
        tool_calls: list[Any] = []
        t0 = time.perf_counter()
        stream = self._send_chat(messages, gen, stream=True, stream_options={"include_usage": True})
        try:
            for chunk in stream:
                n_chunks += 1
                if getattr(chunk, "usage", None) is not None:
                    usage = chunk.usage
                    chunk_with_usage = chunk
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                content = choice.delta.content if choice.delta is not None else None
                if not isinstance(content, (str, type(None))):
                    raise _BadReply(f"an event whose content is not text ({content!r:.80})")
                if content:
                    times.append(time.perf_counter() - t0)
                    parts.append(content)
                tool_calls += getattr(choice.delta, "tool_calls", None) or []
                finish = choice.finish_reason or finish
        except ValueError as exc:  # an event whose data is not JSON
            raise _BadReply(f"an unreadable event stream ({exc})") from exc
        finally:
            stream.close()
        if n_chunks == 0:
            raise _BadReply("no events: the reply to a streamed request was not an event stream")
        if finish is None:
            raise _BadReply(f"the stream ended after {n_chunks} chunks without a finish_reason")
        if not parts and tool_calls:
            raise _ToolCallAnswer(_tool_names(tool_calls))
        if not parts:
            raise _EmptyAnswer(f"empty content (finish_reason {finish!r})")
        self._check_usage()
        return {
            "text": "".join(parts),
            "times": times,
            "usage": usage,
            "response": chunk_with_usage,
            "finish": finish,
            "total": time.perf_counter() - t0,
        }

    def _complete_once(
        self, messages: list[dict[str, Any]], gen: GenerationConfig
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        resp = self._send_chat(messages, gen, stream=False)
        _check_completion(resp)
        self._check_usage()
        choice = resp.choices[0]
        return {
            "text": choice.message.content or "",
            "times": [],
            "usage": resp.usage,
            "response": resp,
            "finish": choice.finish_reason,
            "total": time.perf_counter() - t0,
        }

    def _check_usage(self) -> None:
        """Raise :class:`ModelEnvironmentError` unless the usage report in the reply just
        read (if it sent one) gives its token counts as non-negative integers.

        A count such as ``"12"``, ``1.5``, ``null``, ``-3`` or ``true`` is the server's
        usage report being broken, for every example alike: never a number to record.
        The reply's own bytes are read (kept by the request's guard), because the openai
        client turns ``"12"`` into 12 and ``true`` into 1 without a word.
        """
        guard = getattr(self._per_thread, "guard", None)
        usage = _sent_usage(bytes(guard.body)) if guard is not None and guard.body else None
        if usage is None:
            return
        if not isinstance(usage, dict):
            usage = {"prompt_tokens": usage, "completion_tokens": usage}
        for name in ("prompt_tokens", "completion_tokens"):
            value = usage.get(name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ModelEnvironmentError(
                    f"{self._where()}: the server's usage report is broken: usage.{name} is "
                    f"{self._masked(repr(value)[:40])}, not a non-negative integer; check the "
                    "server (or the proxy in front of it) and its version: token counts "
                    "cannot be recorded"
                )

    def chat(self, messages: list[dict[str, Any]], gen: GenerationConfig) -> CallResult:
        messages = check_messages(messages)
        once = self._stream_once if self.stream else self._complete_once
        t0 = time.perf_counter()
        with self._call_clock():
            out, tries = self._with_retries(lambda: once(messages, gen), max_tokens=gen.max_tokens)
        total = time.perf_counter() - t0
        text, n_surrogates = replace_lone_surrogates(out["text"])
        if n_surrogates:
            log.warning(
                "%s: %d lone surrogate(s) in the reply replaced by U+FFFD",
                self._where(),
                n_surrogates,
            )
        usage = out["usage"]
        prompt_tokens, completion_tokens = usage_of(out["response"])
        if self.stream:
            self._stream_usage_seen = usage is not None
            if usage is None:
                warnings.warn(
                    f"{self._where()} sent no token usage in its stream; token counts are "
                    "recorded as -1. Use a server that honours stream_options.include_usage, "
                    "or construct the client with stream=False for exact usage",
                    stacklevel=2,
                )
        ttft, itl = stream_timing(out["times"], completion_tokens)
        extra: dict[str, Any] = {
            "finish_reason": out["finish"],
            "usage_source": "server" if usage is not None else "unavailable",
        }
        if n_surrogates:
            extra["surrogates_replaced"] = n_surrogates
        return self._result(
            text, None, (prompt_tokens, completion_tokens), (ttft, itl, total), tries, extra
        )

    # -- structured -----------------------------------------------------------------

    def _raw_create(self, **kwargs: Any) -> Any:
        """OpenAI-style create for Instructor, with transport retries and format fallback."""
        rf = kwargs.get("response_format")
        is_schema = isinstance(rf, dict) and rf.get("type") == "json_schema"

        def send(request: dict[str, Any]) -> Any:
            resp = _create(self._client.chat.completions.create, model=self.model, **request)
            _check_completion(resp)  # a malformed reply is the server's, not the schema's
            self._check_usage()
            message = resp.choices[0].message
            if message.content:  # before Instructor parses it: its JSON parser refuses them
                message.content, n = replace_lone_surrogates(message.content)
                message.content, n_escaped = replace_escaped_lone_surrogates(message.content)
                self._per_thread.surrogates = (
                    getattr(self._per_thread, "surrogates", 0) + n + n_escaped
                )
            return resp

        max_tokens = int(kwargs.get("max_tokens") or 1)

        def rewrite(request: dict[str, Any]) -> dict[str, Any]:
            schema = (request["response_format"].get("json_schema") or {}).get("schema")
            return {**request, "response_format": {"type": "json_object", "schema": schema}}

        request = dict(kwargs)
        if is_schema and self.structured_format == "json_object_schema":
            request = rewrite(request)
        try:
            resp, tries = self._with_retries(
                lambda: send(request), structured=True, max_tokens=max_tokens
            )
        except _ResponseFormatRejected as exc:
            if not (is_schema and self.structured_format == "auto"):
                raise ModelCallError(
                    f"{self._where()}: the server rejected response_format "
                    f"{request.get('response_format', {}).get('type')!r} ({str(exc)[:300]}); "
                    "set structured_format to the form this server supports"
                ) from exc
            log.info(
                "%s rejects response_format json_schema; using json_object+schema", self._where()
            )
            self.structured_format = "json_object_schema"
            request = rewrite(request)
            try:
                resp, tries = self._with_retries(
                    lambda: send(request), structured=True, max_tokens=max_tokens
                )
            except _ResponseFormatRejected as exc2:
                raise ModelCallError(
                    f"{self._where()}: the server accepts neither json_schema nor "
                    f"json_object+schema response formats ({str(exc2)[:300]}); it cannot "
                    "constrain decoding to a schema"
                ) from exc2
        if is_schema and self.structured_format == "auto":
            self.structured_format = "json_schema"  # accepted: remember
        self._transport_tries += tries
        return resp

    @contextlib.contextmanager
    def _structured_scope(self) -> Iterator[None]:
        self._transport_tries = 0
        self._per_thread.surrogates = 0
        with self._call_clock():
            yield

    def _surrogates_sent(self) -> int:
        return self._per_thread.surrogates

    def _structured_extra(self, prompt_tokens: int) -> dict[str, Any]:
        return {
            "usage_source": "server (summed over attempts)"
            if prompt_tokens >= 0
            else "unavailable",
            "response_format": self.structured_format,
            "transport_tries": self._transport_tries,
        }

    # -- tokens ---------------------------------------------------------------------

    def _server_root(self) -> str:
        root = self.base_url
        return root[: -len("/v1")] if root.endswith("/v1") else root

    def _server_tokenize(self, text: str) -> int | None:
        """How many tokens the server's tokenize endpoint counts in ``text``
        (llama-cpp-python's ``/extras/tokenize``, or the ``/tokenize`` of llama.cpp's
        server or vLLM's, the first
        that answers with tokens, then that one only), or None when it has neither.

        Bounded and retried like a call (:meth:`_side`): a server that keeps failing, or
        a known endpoint that stops answering with tokens, raises
        :class:`ModelEnvironmentError`; a refused key :class:`ModelAuthError`.
        """
        known = self._tokenize_route
        for route in [known] if known else ["/extras/tokenize", "/tokenize"]:
            url = self._server_root() + route
            # /tokenize: llama.cpp's server reads content/add_special, vLLM's reads
            # model/prompt/add_special_tokens; each ignores the other's fields
            payload = (
                {"input": text} if route == "/extras/tokenize"
                else {"content": text, "add_special": False,
                      "model": self.model, "prompt": text, "add_special_tokens": False}
            )  # fmt: skip
            # a token id and its separator take a few bytes; a token covers a character or more
            cap = REPLY_SLACK_BYTES + 64 * len(text)
            reply = self._side("POST", url, "counting tokens", json=payload, max_bytes=cap)
            # a refusal of a route only guessed at says nothing of the key: some gateways
            # answer 403 for any path they do not have (the chat call finds a bad key)
            if reply.status in (401, 403) and known:
                raise ModelAuthError(refused_key_message(
                    f"{self._where()} (POST {url})", self.api_key_env, reply.status,
                    reply.text, "OPENAI_API_KEY", self._bearer_key(),
                ))  # fmt: skip
            tokens = None
            if reply.status == 200:
                with contextlib.suppress(ValueError):
                    body = reply.json()
                    tokens = body.get("tokens") if isinstance(body, dict) else None
            if isinstance(tokens, list):
                self._tokenize_route = route
                return len(tokens)
            if known:
                raise ModelEnvironmentError(
                    f"{self._where()}: the tokenize endpoint POST {url}, which counted tokens "
                    f"before, answered HTTP {reply.status} without a list of tokens "
                    f"({self._masked(reply.text[:200])!r}); check the server and its log, or "
                    "set models.tokenizer to count tokens here"
                )
        return None

    #: why the model's tokens cannot be counted when nothing local is named and the
    #: server has no tokenize endpoint (the Ollama backend says it its own way)
    _no_tokenizer_reason = "the server has no tokenize endpoint and models.tokenizer is not set"

    def _served_model_file(self) -> Path | None:
        """The served model's GGUF file when the server is llama.cpp's on this machine:
        the ``model_path`` its ``GET /props`` names, when that file is readable here.

        Asked once per client, before the first count, and only of a server whose model
        listing says it is llama.cpp's (``owned_by: llamacpp``). A server that cannot
        say (no listing, no ``/props``, a path on another machine) leaves the counting
        to its tokenize endpoint, as before.
        """
        if self._props_asked:
            return self._server_model_file
        self._props_asked = True
        try:
            entries = self._listing()
            entry = next((e for e in entries if e.get("id") == self.model), None)
            if entry is None or entry.get("owned_by") != "llamacpp":
                return None
            props = self._llamacpp_props() or {}
        except ModelError as exc:  # the tokenize endpoint is asked instead; it says more
            log.info("%s: no model file to count tokens with (%s)", self._where(), exc)
            return None
        self._server_model_file = _readable_model_file(props)
        return self._server_model_file

    #: the model's own counter, found through the server, is tried (see _local_counter)
    _find_served_model_file = True

    def _local_counter(self) -> Callable[[str], int] | None:
        """The local token counter (built once, not once per thread), or None.

        In order: ``models.tokenizer``; ``models.tokenizer_gguf``; the GGUF file a
        llama.cpp server on this machine serves (:meth:`_served_model_file`), loaded
        vocabulary only: the same tokenizer its tokenize endpoint runs, without a
        request per count. None leaves the counting to the server's tokenize endpoint.
        """
        if self._tokenizer is not None or self._tokens_missing is not None:
            return self._tokenizer
        if self._tokenizer_spec is None and self._tokenizer_gguf is None:
            if not self._find_served_model_file:
                return None
            with self._tokenizer_lock:
                found = self._served_model_file()
            if found is None:
                return None
            with self._tokenizer_lock:
                if self._tokenizer is None and self._tokens_missing is None:
                    counter, label = load_tokenizer(f"gguf:{found}")
                    self._tokenizer = counter
                    self._tokens_source = f"{label} (the server's model file, from /props)"
            return self._tokenizer
        with self._tokenizer_lock:
            if self._tokenizer is None and self._tokens_missing is None:
                if self._tokenizer_spec is not None:
                    counter, label = load_tokenizer(self._tokenizer_spec)
                else:
                    counter, label = load_tokenizer(f"gguf:{self._tokenizer_gguf}")
                if counter is None:
                    self._tokens_missing = label
                else:
                    self._tokenizer, self._tokens_source = counter, label
        return self._tokenizer

    #: how many texts' counts a client keeps (a message is counted by the sender, the
    #: receiver and the record; a run repeats its prompts' fixed parts)
    TOKEN_MEMO_SIZE = 8192

    def count_tokens(self, text: str) -> int:
        """The model's tokens in ``text``: counted once per text (a bounded memo, most
        recently used kept), locally when a tokenizer is at hand, else by the server."""
        with self._token_memo_lock:
            n = self._token_memo.get(text)
            if n is not None:
                self._token_memo.move_to_end(text)
                return n
        n = self._count_tokens_once(text)
        with self._token_memo_lock:
            self._token_memo[text] = n
            if len(self._token_memo) > self.TOKEN_MEMO_SIZE:
                self._token_memo.popitem(last=False)
        return n

    def _count_tokens_once(self, text: str) -> int:
        counter = self._local_counter()
        if counter is not None:
            return int(counter(text))
        if self._tokens_missing is None:
            n = self._server_tokenize(text)
            if n is not None:
                self._tokens_source = f"server tokenize endpoint ({self._tokenize_route})"
                return n
            self._tokens_missing = f"missing: {self._no_tokenizer_reason}"
        raise TokensUnavailableError(
            f"{self._where()}: the model's tokens cannot be counted ({self._tokens_missing}); "
            "name the model's tokenizer in models.tokenizer (gguf:<path>, "
            "tokenizer.json:<path> or tiktoken:<encoding>)"
        )

    def tokens_model_source(self) -> str:
        """Where ``tokens_model`` comes from, or ``missing: <why>`` (after a count)."""
        return self._tokens_missing or self._tokens_source or "not counted yet"

    def describe(self) -> dict[str, Any]:
        if self.stream:
            usage = {
                None: "server stream usage (not yet seen)",
                True: "server stream usage",
                False: "unavailable: server sends no usage when streaming (-1)",
            }[self._stream_usage_seen]
        else:
            usage = "server usage (non-streamed calls; no TTFT/ITL)"
        return {
            "backend": self.backend,
            "model": self.model,
            "base_url": self.base_url,
            "timeout_s": self.timeout_s,
            "deadline_s": self.deadline_s,
            "max_retries": self.max_retries,
            "stream": self.stream,
            "structured_format": self.structured_format,
            "usage_source": usage,
            "tokens_model_source": self.tokens_model_source(),
        }

    def model_report(self) -> dict[str, Any]:
        """What the server says about this model, for its fingerprint (see
        :mod:`.fingerprint`): ``entry``, the model's entry in ``GET /models`` as sent
        (None when it is not listed); ``listed``, the ids listed; ``props``, llama.cpp's
        ``GET /props`` (its ``model_path``) when the entry says the server is llama.cpp's
        (``owned_by: llamacpp``), else None.

        The listing is a side request (:meth:`_side`), bounded and retried like a call;
        when the server keeps failing it raises :class:`ModelEnvironmentError`. A server
        without a listing (HTTP 404, 405, 501, any other refusal) or none at all raises
        :class:`ModelError` at once, and so does a listing that is not one.
        """
        try:
            entries = self._listing()
        except ModelUnavailableError as exc:  # no server to ask (or no key): no listing
            raise ModelError(f"GET {self.base_url}/models: {exc}") from exc
        entry = next((e for e in entries if e.get("id") == self.model), None)
        props = None
        if entry is not None and entry.get("owned_by") == "llamacpp":
            props = self._llamacpp_props()
        if not self._props_asked:  # what _served_model_file would ask: asked now
            self._props_asked = True
            self._server_model_file = _readable_model_file(props)
        return {"entry": entry, "listed": [str(e.get("id")) for e in entries], "props": props}

    def _listing(self) -> list[dict[str, Any]]:
        """The entries of ``GET /models``; see :meth:`model_report` for what it raises."""
        url = f"{self.base_url}/models"
        reply = self._side("GET", url, "the server's model listing")
        if reply.status == 401:  # the key is refused: every call will be too, and say so
            raise ModelAuthError(f"GET {url}: HTTP 401: {self._masked(reply.text[:200])}")
        if reply.status != 200:
            raise ModelError(f"GET {url}: HTTP {reply.status}: {self._masked(reply.text[:200])}")
        try:
            data = reply.json()["data"]
            if not (isinstance(data, list) and all(isinstance(e, dict) for e in data)):
                raise TypeError(f"data is {type(data).__name__}, not a list of objects")
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"GET {url}: not a model listing ({exc})") from exc
        return data

    def _llamacpp_props(self) -> dict[str, Any] | None:
        """llama.cpp's ``GET /props`` (None when it does not answer with an object)."""
        reply = self._side("GET", self._server_root() + "/props", "llama.cpp's /props")
        try:
            props = reply.json() if reply.status == 200 else None
        except ValueError:
            return None
        return props if isinstance(props, dict) else None

    def ping(self) -> list[str]:
        """Check the server answers; returns the model ids it lists."""
        return [str(e.get("id")) for e in self._listing()]

    def _side(
        self,
        method: str,
        url: str,
        what: str,
        *,
        json: Any = None,
        max_bytes: int = SIDE_REPLY_CAP,
        timeout_s: float | None = None,
    ) -> SideReply:
        """A request other than a chat call (``what`` it is for), bounded like one
        (:func:`.http.side_request`: ``timeout_s``, by default models.timeout_s, is a
        total deadline; at most ``max_bytes`` bytes, uncompressed; a connection of its
        own) and retried like one (:meth:`_with_retries`: HTTP 5xx but 501, 408 and 429,
        timeouts, oversized replies, dropped connections).

        Returns the reply for any other status. Raises :class:`ModelUnavailableError`
        when no server answers, and :class:`ModelEnvironmentError` when it keeps failing:
        such a fault is the server's, never an example's.
        """
        import httpx2

        def once() -> SideReply:
            try:
                reply = side_request(
                    method, url, json=json, timeout_s=timeout_s or self.timeout_s,
                    max_bytes=max_bytes, headers=self._side_headers(), client=self._http,
                )  # fmt: skip
            except httpx2.TimeoutException as exc:
                raise DeadlineExceeded(f"no reply within {timeout_s or self.timeout_s:g}s") from exc
            except httpx2.ConnectError as exc:
                if not self._contacted:
                    raise ModelUnavailableError(f"{self._down_message()} ({exc})") from exc
                raise
            if (reply.status >= 500 and reply.status != 501) or reply.status in (408, 429):
                raise _SideStatus(reply, self._masked(reply.text[:300]))
            return reply

        try:
            return self._with_retries(once)[0]
        except TransientModelError as exc:
            raise ModelEnvironmentError(f"{what} ({method} {url}) failed: {exc}") from exc

    def _side_headers(self) -> dict[str, str]:
        key = self._bearer_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def close(self) -> None:
        self._client.close()
