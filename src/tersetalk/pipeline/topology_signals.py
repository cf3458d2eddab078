"""The router's signals from the Manager's briefs, without running the Worker.

Selection accuracy depends only on the brief when the Manager is deterministic, so the
fitted router learns from briefs alone: for each example of a sample, the brief is built
and written exactly as a run of the routed system writes it (the task's brief hook, the
variant's brief layout, the system's own codec with the variant's settings, ``write(
"brief", "M", "W", ...)``), and its signals are counted by the system's own
:meth:`tersetalk.agents.topology.Routed.signals` (typed lines for TerseTalk, prose for
free-form). One row per example: task, example id, the brief as sent, the route its
task's label asks for, the six signals (each a column, and ``route_signals`` as a run
records them), what the variant's rule decides, and the brief's size on the wire.

No model is asked unless writing the brief asks one (a planning Manager, ``planner:
model``): the client is built from the spec as ``tersetalk run`` builds it, but only on
first use, and ``model_calls`` counts the calls each brief cost.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from tersetalk.agents.context import RunContext
from tersetalk.agents.conversation import Conversation
from tersetalk.agents.roles import build_brief, lay_out
from tersetalk.agents.topology import Routed
from tersetalk.core.tokens import count_tokens
from tersetalk.models import ModelClient, ModelEnvironmentError, caused_by, is_transient
from tersetalk.pipeline.config import ConfigError
from tersetalk.pipeline.runner import (
    client_from_spec,
    generation_configs,
    resolve_calibrated,
    results_hash,
)
from tersetalk.systems import system
from tersetalk.tasks.loading import read_sample
from tersetalk.topology.router import SIGNALS, RouteSettings, decide

log = logging.getLogger(__name__)

__all__ = ["COLUMNS", "LazyClient", "brief_signals", "read_records", "write_signals"]

#: the columns of a signals file, in order
COLUMNS: tuple[str, ...] = (
    "task", "example_id", "system", "variant", "features", "label", *SIGNALS,
    "route_signals", "route_weights", "route_theta", "route_score", "route_rule",
    "brief", "tokens_cl100k", "tokens_o200k", "bytes", "model_calls", "error", "batch",
)  # fmt: skip


class LazyClient(ModelClient):
    """A model client built on first use (``factory``), so that briefs written without a
    model never load one; ``built`` tells whether it was needed."""

    def __init__(self, factory: Callable[[], ModelClient], describe: dict[str, Any]) -> None:
        self._factory = factory
        self._client: ModelClient | None = None
        self._describe = dict(describe)
        self._lock = threading.Lock()
        self.backend = str(describe.get("backend", ""))
        self.model = str(describe.get("model", ""))

    @property
    def built(self) -> bool:
        return self._client is not None

    def _get(self) -> ModelClient:
        with self._lock:
            if self._client is None:
                log.info("writing a brief asks the model: building the client %s",
                         self._describe)  # fmt: skip
                self._client = self._factory()
            return self._client

    def chat(self, messages, gen):  # type: ignore[no-untyped-def]
        return self._get().chat(messages, gen)

    def structured(self, messages, schema, gen):  # type: ignore[no-untyped-def]
        return self._get().structured(messages, schema, gen)

    def count_tokens(self, text: str) -> int:
        return self._get().count_tokens(text)

    def describe(self) -> dict[str, Any]:
        return self._client.describe() if self._client is not None else dict(self._describe)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def _spec_client(spec: dict) -> LazyClient:
    models = spec["models"]
    described = {"backend": models.get("backend", "llamacpp"), "built": False}
    for key in ("model", "model_path", "base_url"):
        if models.get(key):
            described[key] = models[key]
    return LazyClient(lambda: client_from_spec(spec), described)


#: the routes a record's own ``label`` may name (a held-out brief's)
_ROUTES = ("star", "chain")
#: the most records a JSONL file of briefs may hold (each is routed in memory)
MAX_RECORDS = 100_000


def read_records(path: str | Path, task: str) -> list[dict]:
    """Examples (``example_id``, ``record``) from a sample Parquet file or a JSONL file of
    records in ``task``'s format (one JSON object per line: the record itself, or an
    object with the record under ``"record"``; ``"id"`` or ``"example_id"`` names it).
    A malformed line is an :class:`~tersetalk.core.io.InputFileError` naming the line."""
    from tersetalk.core.io import InputFileError, load_json_text

    p = Path(path)
    if p.suffix == ".parquet":
        return read_sample(p, task=task)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFileError(f"records file {p}: cannot be read: {exc}") from None
    examples: list[dict] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if len(examples) >= MAX_RECORDS:
            raise InputFileError(f"records file {p}: more than {MAX_RECORDS} records")
        try:
            value = load_json_text(line, f"records file {p}, line {number}")
        except ValueError as exc:  # a syntax error, or nested too deep
            raise InputFileError(f"records file {p}, line {number}: not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise InputFileError(f"records file {p}, line {number}: not a JSON object")
        record = value.get("record", value)
        if not isinstance(record, dict):
            raise InputFileError(f"records file {p}, line {number}: 'record' is not an object")
        example_id = value.get("example_id", value.get("id", record.get("id")))
        examples.append({
            "example_id": str(example_id) if example_id is not None else f"{task}-{number}",
            "task": task,
            "record": record,
        })  # fmt: skip
    if not examples:
        raise InputFileError(f"records file {p} holds no records")
    ids = [e["example_id"] for e in examples]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise InputFileError(f"records file {p}: ids repeat: {repeated[:5]}")
    return examples


def brief_signals(
    spec: dict, sample_path: str | Path, *, client: ModelClient | None = None
) -> pd.DataFrame:
    """The router's signals of every example of a sample (or a JSONL file of records in
    the spec task's format, :func:`read_records`), from briefs written as a run of
    ``spec`` (a run spec, :func:`tersetalk.pipeline.config.run_spec`) writes them.

    ``label``: the record's own ``label`` when it names a route (a held-out brief's),
    else the route its task's label asks for; ``batch``: the record's own ``batch`` (a
    held-out brief's; "" for none). ``client``: the model client a brief may
    ask (a planning Manager); default: the spec's, built only if a brief asks. A brief
    that cannot be written is an error row (signals missing, ``error`` set); a model
    server that is down stops.
    """
    from tersetalk.topology.metrics import label_of

    registered = system(spec["system"])
    topology = registered.topology
    if not isinstance(topology, Routed):
        raise ConfigError(
            f"system {spec['system']!r} is not routed (its topology is {topology.name}); the "
            "router's signals are read for topology_tersetalk and topology_freeform"
        )
    if spec.get("calibration_file"):
        spec = resolve_calibrated(spec)
    examples = read_records(sample_path, spec["task"])
    try:
        settings = registered.parse(spec["variant_settings"])
    except ValueError as exc:
        raise ConfigError(
            f"config key 'systems.{spec['system']}.variants.{spec['variant']}': {exc}"
        ) from None
    if not isinstance(settings, RouteSettings):
        raise ConfigError(f"system {spec['system']!r} has no route settings")
    if settings.scramble_tags and topology.features != "typed":
        raise ConfigError("scramble_tags needs typed lines; this system reads prose")
    gen, critic_gen = generation_configs(spec)
    ctx = RunContext(
        task=spec["task"],
        client=client or _spec_client(spec),
        gen=gen,
        critic_gen=critic_gen,
        variant_settings=spec["variant_settings"],
        task_options=spec["task_options"],
        max_revisions=spec["pipeline"]["max_revisions"],
        shared={"run_out": None, "run_resumed": False},
    )
    weights, theta = settings.rule(topology.system or spec["system"])
    label = label_of(spec["task"])
    rows = []
    for example in examples:
        example_id = str(example["example_id"])
        row: dict[str, Any] = dict.fromkeys(COLUMNS)
        row.update(task=spec["task"], example_id=example_id, system=spec["system"],
                   variant=spec["variant"], features=topology.features,
                   label=own if (own := example["record"].get("label")) in _ROUTES else label,
                   route_weights=json.dumps(weights, sort_keys=True), route_theta=theta,
                   model_calls=0, batch=str(example["record"].get("batch", "")))  # fmt: skip
        # the pieces converse() and Routed.run() use, in their order, up to the route
        conv = Conversation(ctx.client)
        try:
            brief = lay_out(build_brief(ctx.task, example["record"], ctx.task_options), settings)
            codec = registered.codec(ctx, settings, example, brief, conv)
            sent = codec.write("brief", "M", "W", brief)
            signals = topology.signals(sent.text, settings, ctx.gen.seed, example_id)
        except Exception as exc:  # noqa: BLE001 - one example's failure is its error row
            down = caused_by(exc, ModelEnvironmentError)
            if down is not None:
                raise down from exc
            if is_transient(exc):
                raise
            log.error("example %s: the brief could not be written: %s", example_id, exc)
            row.update(error=f"{type(exc).__name__}: {exc}", model_calls=len(conv.calls))
            rows.append(row)
            continue
        rule, s = decide(signals, weights, theta)
        row.update(
            signals,
            route_signals=json.dumps(signals, sort_keys=True),
            route_score=s,
            route_rule=rule,
            brief=sent.text,
            tokens_cl100k=count_tokens(sent.text, "cl100k_base"),
            tokens_o200k=count_tokens(sent.text, "o200k_base"),
            bytes=len(sent.text.encode("utf-8")),
            model_calls=len(conv.calls),
        )
        rows.append(row)
    return _frame(rows)


def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    types = {k: "Int64" for k in (*SIGNALS, "tokens_cl100k", "tokens_o200k", "bytes")}
    types |= {"model_calls": "int64", "route_theta": "float64", "route_score": "float64"}
    types |= {k: "string" for k in COLUMNS if k not in types}
    return df.astype(types)


def write_signals(
    spec: dict, sample_path: str | Path, out: str | Path, **kwargs: Any
) -> pd.DataFrame:
    """:func:`brief_signals`, written to ``out`` (Parquet, with the spec in its metadata)."""
    from tersetalk.core.io import write_parquet_atomic

    df = brief_signals(spec, sample_path, **kwargs)
    meta = {"spec": spec, "spec_hash": results_hash(spec), "sample": str(sample_path),
            "n_errors": int(df["error"].notna().sum())}  # fmt: skip
    write_parquet_atomic(df, Path(out), meta)
    return df
