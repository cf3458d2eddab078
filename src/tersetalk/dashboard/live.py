"""The live pipeline view's mediator: the user's messages through the real mediator.

Messages run one at a time on a single worker thread, so the server's event loop
stays free to answer pages and push events while the model works. The mediator
(and its model) is built on the first message, not at startup: the page opens at
once, and a missing model becomes an error event on the page, not a server that
will not start.

The pipeline's own events say which stage runs and with how many tokens; the
view also wants each stage's text (every compression pass, the keys) the moment
it exists. The mediator is built with the configured components wrapped in thin
observers that publish that text after each call and change nothing else.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from tersetalk.mediator import (
    EventBus,
    Mediator,
    MediatorConfig,
    MediatorResult,
    aggregate_stats,
    build_mediator,
    make_token_counter,
)
from tersetalk.mediator.cli import DEMO_MESSAGE
from tersetalk.mediator.compression import Compressor
from tersetalk.mediator.extractors import ExtractionResult, SemanticKeyExtractor

__all__ = ["LiveMediator", "default_live_config", "needs_model"]

log = logging.getLogger(__name__)

Publish = Callable[[dict[str, Any]], None]
#: the stages of the diagram, in the order a message passes them
STAGES = ("agent_a", "compression", "keys", "judge", "agent_b")


def default_live_config() -> MediatorConfig:
    """What ``tersetalk mediator demo`` runs: the model compressor, rule keys, the judge on."""
    from tersetalk.mediator import parse_mediator_config

    return parse_mediator_config({"judge": {"enabled": True}}, where="dashboard")


def needs_model(cfg: MediatorConfig) -> bool:
    """Does any enabled stage call the language model?"""
    return (
        (cfg.compression.enabled and cfg.compression.compressor == "model")
        or (cfg.semantic_keys.enabled and cfg.semantic_keys.extractor == "llm")
        or (cfg.judge.enabled and cfg.judge.kind == "llm")
        or cfg.compression.tokenizer == "model"
    )


def _event(kind: str, message_id: str, **data: Any) -> dict[str, Any]:
    return {
        "event": kind,
        "message_id": message_id,
        "timestamp": datetime.now(UTC).isoformat(),
        "data": data,
    }


def _never_raising(publish: Publish) -> Publish:
    """``publish`` that logs its first failure and swallows every one: a broken
    subscriber (a closed loop, a bad message) must not fail a message's stages."""
    warned = []

    def safe(msg: dict[str, Any]) -> None:
        try:
            publish(msg)
        except Exception as exc:  # noqa: BLE001 - observers never stop the mediator
            if not warned:
                warned.append(exc)
                log.warning("dashboard: publishing a live event failed (%s: %s); the mediator "
                            "goes on", type(exc).__name__, exc)  # fmt: skip

    return safe


class _ObservedCompressor(Compressor):
    """Delegates to the configured compressor; publishes each pass's output text."""

    def __init__(self, inner: Compressor, publish: Publish) -> None:
        self.inner, self._publish = inner, publish
        self.name = getattr(inner, "name", type(inner).__name__)
        self.message_id, self._n = "", 0

    def begin(self, message_id: str) -> None:
        self.message_id, self._n = message_id, 0

    def compress(self, text: str, target_tokens: int | None = None) -> str:
        out = self.inner.compress(text, target_tokens=target_tokens)
        self._n += 1
        self._publish(
            _event(
                "stage_text",
                self.message_id,
                stage="compression",
                index=self._n,
                text=out if isinstance(out, str) else repr(out),
            )
        )
        return out

    def describe(self) -> dict:
        return self.inner.describe()

    def pass_notes(self) -> dict:
        getter = getattr(self.inner, "pass_notes", None)
        return getter() if getter is not None else {}


class _ObservedExtractor(SemanticKeyExtractor):
    """Delegates to the configured extractor; publishes the keys as soon as they exist."""

    def __init__(self, inner: SemanticKeyExtractor, publish: Publish) -> None:
        self.inner, self._publish = inner, publish
        self.name = getattr(inner, "name", type(inner).__name__)
        self.message_id = ""

    def extract(self, text: str) -> ExtractionResult:
        result = self.inner.extract(text)
        self._publish(
            _event(
                "stage_text",
                self.message_id,
                stage="keys",
                keys=[k.model_dump(mode="json") for k in result.keys],
                schema_version=result.schema_version,
            )
        )
        return result


class LiveMediator:
    """Runs submitted messages through one lazily built mediator and publishes everything."""

    def __init__(
        self,
        config: MediatorConfig,
        publish: Publish,
        *,
        models: dict[str, Any] | None = None,
        seed: int = 0,
        history: int = 20,
    ) -> None:
        self.config = config
        self._publish = _never_raising(publish)
        self.models = dict(models or {"backend": "llamacpp"})
        self.seed = seed
        self.results: list[MediatorResult] = []
        self.history: deque[dict[str, Any]] = deque(maxlen=history)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dashboard-mediator")
        self._lock = threading.Lock()
        self._pending = 0
        self._mediator: Mediator | None = None
        self._client = None
        self._compressor: _ObservedCompressor | None = None
        self._extractor: _ObservedExtractor | None = None
        self.status = "idle"

    # -- what the page shows before anything runs ------------------------------------
    def model_label(self) -> str:
        if not needs_model(self.config):
            return "no model needed by the enabled stages"
        if self._client is not None:
            d = self._client.describe()
            return f"{d.get('backend', '?')}: {d.get('model', '?')}"
        m = self.models
        return f"{m.get('backend', 'llamacpp')}: {m.get('model') or 'embedded SmolLM2-135M'}"

    def describe(self) -> dict[str, Any]:
        c = self.config
        enabled = {
            "agent_a": True,
            "compression": c.compression.enabled,
            "keys": c.semantic_keys.enabled,
            "judge": c.judge.enabled,
            "agent_b": True,
        }
        return {
            "stages": [{"id": s, "enabled": enabled[s]} for s in STAGES],
            "config": {
                "compression": c.compression.model_dump(mode="json"),
                "keys": c.semantic_keys.model_dump(mode="json"),
                "judge": c.judge.model_dump(mode="json"),
                "delivery": {"deliver_metadata": c.deliver_metadata},
            },
            "budget": c.compression.token_budget,
            "recursion_limit": c.compression.recursion_limit,
            "model": self.model_label(),
            "status": self.status,
            "pending": self._pending,
            "demo_message": DEMO_MESSAGE,
        }

    def stats(self) -> dict[str, Any]:
        return aggregate_stats(self.results)

    def snapshot(self) -> dict[str, Any]:
        return {**self.describe(), "stats": self.stats(), "history": list(self.history)}

    # -- running -----------------------------------------------------------------------
    def submit(self, message: str) -> str:
        """Queue ``message``; its events and result are published as they happen."""
        mid = uuid.uuid4().hex[:12]
        with self._lock:
            self._pending += 1
        self._executor.submit(self._run, message, mid)
        return mid

    def _set_status(self, status: str) -> None:
        self.status = status
        self._publish(
            {
                "type": "live_status",
                "status": status,
                "pending": self._pending,
                "model": self.model_label(),
            }
        )

    def _build(self) -> Mediator:
        from tersetalk.mediator.compressors import make_compressor
        from tersetalk.mediator.extractors import make_extractor
        from tersetalk.models import GenerationConfig, make_client

        cfg = self.config
        if needs_model(cfg) and self._client is None:
            self._set_status("loading model")
            self._client = make_client({**self.models, "seed": self.seed})
        gen = GenerationConfig(temperature=0.0, seed=self.seed)
        bus = EventBus()
        bus.subscribe(lambda p: self._publish({"type": "pipeline", "event": p.as_dict()}))
        count = make_token_counter(cfg.compression.tokenizer, self._client)
        if cfg.compression.enabled:
            inner = make_compressor(cfg.compression, self._client, gen, count)
            self._compressor = _ObservedCompressor(inner, self._publish_pipeline)
        if cfg.semantic_keys.enabled:
            inner_x = make_extractor(cfg.semantic_keys, self._client, gen)
            self._extractor = _ObservedExtractor(inner_x, self._publish_pipeline)
        return build_mediator(
            cfg,
            client=self._client,
            gen=gen,
            emitter=bus,
            compressor=self._compressor,
            extractor=self._extractor,
        )

    def _publish_pipeline(self, event: dict[str, Any]) -> None:
        self._publish({"type": "pipeline", "event": event})

    def _run(self, message: str, mid: str) -> None:
        try:
            if self._mediator is None:
                self._mediator = self._build()
            self._set_status("running")
            if self._compressor is not None:
                self._compressor.begin(mid)
            if self._extractor is not None:
                self._extractor.message_id = mid
            result = self._mediator.process(message, message_id=mid)
            record = result.trace_record()
            self.results.append(result)
            self.history.append(record)
            self._publish({"type": "pipeline_result", "result": record, "stats": self.stats()})
        except Exception as exc:  # noqa: BLE001 - a bad model path must not kill the worker
            log.exception("dashboard: message %s failed before the pipeline ran", mid)
            self._publish_pipeline(
                _event(
                    "pipeline_error",
                    mid,
                    stage="setup",
                    error_type=type(exc).__name__,
                    message=str(exc)[:2000],
                )
            )
        finally:
            with self._lock:
                self._pending -= 1
            self._set_status("idle" if self._pending == 0 else "running")

    def wait(self) -> None:
        """Block until every message queued so far is processed (one worker: FIFO)."""
        self._executor.submit(lambda: None).result()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing at shutdown is best effort
                pass
