"""Run one (task, system, variant) over a sample, resumably.

Each finished example is appended to a checkpoint (JSON Lines) and flushed to the
operating system as it comes back, so killing the job loses at most the examples in
flight. The checkpoint is fsynced behind (:class:`CheckpointWriter`: a thread of its
own, one fsync for every line written since the last), so the next example never
waits for the disk; the run waits for the last fsync before it writes the run file.
A restart reads the checkpoint, skips what is done and finishes the rest; the
Parquet file is written atomically at the end.

What a failure does:

- the example's own failure (invalid output after the retries, a bug a message
  triggers) is an error row: checkpointed, kept, scored 0;
- a passing fault of the model server (timeout, HTTP 5xx or 429, a malformed reply:
  :class:`~tersetalk.models.TransientModelError`) is not checkpointed; the run goes
  on with the other examples and then fails with :class:`RunIncompleteError`, so no
  run file is written and Snakemake does not take the job as done. Running the same
  command again redoes only those examples;
- an error that is not about the example (:func:`stopping_fault`: a server that is
  down, a missing model, a refused API key, a tokenize endpoint or a usage report
  that is broken, a tokenizer file that cannot be read, a sandbox that cannot run
  here, a config error found late) stops the run at once, keeping what is finished
  and writing no run file: it would fail every example alike, and error rows for all
  of them would make a run that looks finished but holds nothing (``tersetalk run``
  exits 2 with the message, which says what to fix);
- as a backstop, a run whose error rows are more than ``pipeline.max_error_share`` of
  its examples (default 0.2; and at least 3 of them, or all) writes no run file either
  (:class:`TooManyErrorsError`, exit 2): its error rows are set aside in
  ``<run>.errors.jsonl`` to be read, and a rerun after the fix redoes those examples
  and keeps the others;
- a record that cannot be written (:class:`RecordWriteError`) stops the run with the
  example's id instead of a traceback on every rerun.

Several examples in flight (``models.max_concurrency`` > 1, server backends only, see
:func:`tersetalk.models.max_in_flight`): each example runs from start to end on one
worker thread of :class:`tersetalk.core.inflight.InFlight`, which starts the next example
when one finishes. Everything else happens on the calling thread as each example
comes back: the checkpoint line (in the order examples finish: a slow example never
holds back the ones finished behind it), progress, events. The run file is in example
order, and its deterministic columns do not depend on ``max_concurrency``, which is
left out of ``spec_hash`` (it decides how fast, not what). What the examples share per
run is made for threads: the client and its call cache, the rate limiter, the call
recorders (one log per thread) and ``RunContext.resource`` (built once, under a
lock). A stopping error (server down, a bug) starts no further example; the ones
still in flight are awaited and checkpointed, then the error is raised. With several
in flight, an example's progress events (started, its messages, finished) are
published together when it finishes, since the live message hook follows one example
at a time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pandas as pd
from tqdm import tqdm

from tersetalk.agents.roles import build_brief
from tersetalk.core.events import open_publisher, publishing
from tersetalk.core.inflight import InFlight
from tersetalk.core.io import (
    InputFileError,
    run_metadata,
    writable_text,
    write_bytes_atomic,
    write_parquet_atomic,
)
from tersetalk.core.records import records_frame
from tersetalk.core.tokens import count_memo
from tersetalk.encoders.errors import CompressorUnavailableError
from tersetalk.mediator.errors import (
    CompressorUnavailableError as MediatorCompressorUnavailableError,
)
from tersetalk.mediator.errors import MediatorConfigError
from tersetalk.models import (
    GenerationConfig,
    ModelClient,
    ModelEnvironmentError,
    ModelError,
    caused_by,
    is_transient,
    make_client,
    max_in_flight,
)
from tersetalk.models.embedding import similarity_memo
from tersetalk.models.fingerprint import FINGERPRINT_DIR, model_fingerprint
from tersetalk.pipeline.config import ConfigError, spec_hash
from tersetalk.pipeline.records import build_record
from tersetalk.systems import RunContext, system
from tersetalk.tasks.base import TaskHostFault, TaskUnavailableError
from tersetalk.tasks.loading import read_sample
from tersetalk.tasks.registry import preflight
from tersetalk.topology.router import RouterFileError

log = logging.getLogger(__name__)

__all__ = [
    "RecordWriteError",
    "RunIncompleteError",
    "TooManyErrorsError",
    "run",
    "run_one",
    "stopping_fault",
]

#: the share of a run's examples that may be error rows before the run is refused
#: (``pipeline.max_error_share``)
DEFAULT_MAX_ERROR_SHARE = 0.2
#: a run is refused for its error rows only when they are this many, or all of it
MIN_REFUSED_ERRORS = 3


class RunIncompleteError(RuntimeError):
    """Some examples failed for passing reasons; the rest are checkpointed for a rerun."""


class TooManyErrorsError(RunIncompleteError):
    """More of a run's examples are error rows than ``pipeline.max_error_share`` allows."""


class RecordWriteError(RunIncompleteError):
    """An example's record cannot be written to the checkpoint."""


#: errors that are never about one example: the model's environment, a task's machinery
#: that cannot run here (HumanEval's sandbox), a config error found late, a file the run
#: reads (a fitted router), a compressor whose model is not here
STOPPING_ERRORS: tuple[type[BaseException], ...] = (
    ModelEnvironmentError,
    TaskUnavailableError,
    ConfigError,
    MediatorConfigError,
    RouterFileError,
    InputFileError,
    CompressorUnavailableError,
    MediatorCompressorUnavailableError,
)


def stopping_fault(exc: BaseException) -> BaseException | None:
    """The error in ``exc``'s chain that is not about the example, or None.

    The one place a run decides whether an error is the example's (an error row) or
    its environment's (the run stops): the model server and its side requests, the
    tokenizer, the usage report (:class:`~tersetalk.models.ModelEnvironmentError`, which
    a server that is down or a refused key are kinds of), a code sandbox that cannot run
    on this machine, a config error that only shows once an example runs (the
    mediator's), a file the run reads that is wrong (a fitted router file).
    """
    return caused_by(exc, STOPPING_ERRORS)


def results_hash(spec: dict) -> str:
    """The run's ``spec_hash``: of everything that decides its results.

    ``models.max_concurrency`` is left out: it decides how many examples run at once,
    not what they produce, so a checkpoint written at one concurrency resumes at
    another and the records' ``spec_hash`` column stays the same.
    """
    models = {k: v for k, v in spec.get("models", {}).items() if k != "max_concurrency"}
    hashed = {**spec, "models": models}
    if "pipeline" in spec:  # how many error rows a run may hold decides no result
        hashed["pipeline"] = {k: v for k, v in spec["pipeline"].items() if k != "max_error_share"}
    return spec_hash(hashed)


def checkpoint_path(out: Path) -> Path:
    return out.with_name(out.name.removesuffix(".parquet") + ".checkpoint.jsonl")


def read_checkpoint(path: Path, expected_hash: str) -> dict[str, dict]:
    """Finished records by example id.

    A record counts as finished only once its closing newline is on disk: every
    record is written as one line ending in ``\n``, so a last line without one is
    what a kill mid-write leaves behind. It is skipped with a warning (and
    :func:`drop_partial_line` removes it before the run appends again), even when
    the bytes that made it happen to parse. Unreadable complete lines are skipped
    with a warning too.
    """
    done: dict[str, dict] = {}
    if not path.exists():
        return done
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    if tail:
        log.warning(
            "%s: partial last line of %d bytes ignored (a kill mid-write); "
            "that example will be run again",
            path,
            len(tail),
        )
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            log.warning("%s:%d: unreadable checkpoint line dropped (torn write)", path, lineno)
            continue
        if not isinstance(rec, dict) or rec.get("spec_hash") != expected_hash:
            continue  # written under another config: not ours to reuse
        done[rec["example_id"]] = rec
    return done


def drop_partial_line(path: Path) -> int:
    """Truncate ``path`` to just after its last newline; return the bytes dropped.

    Why: the checkpoint is opened in append mode. Without this, the next record
    would be glued onto a line torn by a kill, the merged line would be
    unreadable, and that finished record would be lost on the following resume.
    """
    if not path.exists():
        return 0
    data = path.read_bytes()  # a checkpoint holds one run's records: small
    keep = data.rfind(b"\n") + 1  # 0 when there is no complete line at all
    dropped = len(data) - keep
    if dropped:
        with open(path, "r+b") as fh:
            fh.truncate(keep)
            os.fsync(fh.fileno())
        log.warning("%s: dropped %d bytes of a partial last line before resuming", path, dropped)
    return dropped


def client_from_spec(spec: dict) -> ModelClient:
    cfg = dict(spec["models"])
    cfg["seed"] = spec["seed"]
    return make_client(cfg, cache_dir=Path(spec["cache_dir"]) / "calls")


def generation_configs(spec: dict) -> tuple[GenerationConfig, GenerationConfig]:
    g = spec["generation"]
    base = dict(temperature=g["temperature"], top_p=g["top_p"], seed=spec["seed"])
    return (
        GenerationConfig(max_tokens=g["max_tokens"], **base),
        GenerationConfig(max_tokens=g["critic_max_tokens"], **base),
    )


def resolve_calibrated(spec: dict) -> dict:
    """Replace ``calibrated: true`` by the settings calibration chose for this system."""
    from tersetalk.pipeline.calibration import chosen_settings
    from tersetalk.systems import validate_variant

    chosen = chosen_settings(spec["calibration_file"], spec["system"])
    resolved = dict(spec)
    resolved["variant_settings"] = validate_variant(spec["system"], spec["variant"], chosen)
    log.info("calibrated settings from %s: %s", spec["calibration_file"], chosen)
    return resolved


def run_one(example: dict, spec: dict, ctx: RunContext, digest: str) -> dict:
    """One example -> one record. Any failure becomes an error row."""
    registered = system(spec["system"])
    start = time.perf_counter()
    describe = ctx.client.describe()
    fingerprint = model_fingerprint(ctx.client)  # worked out once per client, then kept
    common = dict(
        backend=describe.get("backend", ""),
        model=describe.get("model", ""),
        model_fingerprint=fingerprint.value,
        model_fingerprint_source=fingerprint.source,
        tokens_model_source=tokens_model_source(ctx.client),
        spec_hash=digest,
    )
    facts_checked = None  # an error row whose brief was never built records none
    try:
        # the Manager's brief, built once: the system sends it, the record keeps the
        # facts answer preservation checks (the score step reads them, not the task)
        brief = build_brief(ctx.task, example["record"], ctx.task_options)
        facts_checked = brief.facts_checked()
        res = registered.run(example, ctx, brief)
    except Exception as exc:  # noqa: BLE001 - an example must never stop the run
        fault = stopping_fault(exc)
        if isinstance(fault, ModelError | ConfigError | InputFileError):
            raise fault from exc  # not about this example: stop, keep the rest (exit 2)
        if fault is not None:  # the other kinds are setup errors too: said as one, exit 2
            raise ConfigError(str(fault)) from exc
        if is_transient(exc):
            raise  # a passing server fault: run() leaves the example for the next run
        # what a model wrote may be in the message: escaped, so that no log handler chokes
        log.error("example %s failed: %s", example["example_id"],
                  writable_text(f"{exc}\n{traceback.format_exc()}"))  # fmt: skip
        return build_record(
            example,
            spec,
            layout=registered.layout,
            prediction="",
            raw_answer="",
            messages=[],
            calls=[],
            outcome=None,
            counters={},
            error=writable_text(f"{type(exc).__name__}: {exc}"),
            elapsed_s=time.perf_counter() - start,
            facts_checked=facts_checked,
            **common,
        )
    return build_record(
        example,
        spec,
        layout=registered.layout,
        prediction=res.prediction,
        raw_answer=res.raw_answer,
        messages=res.conversation.messages,
        calls=res.conversation.calls,
        outcome=res.outcome,
        counters=res.counters,
        error=None,
        elapsed_s=time.perf_counter() - start,
        facts_checked=facts_checked,
        **common,
    )


def tokens_model_source(client: ModelClient) -> str:
    """Where the run's ``tokens_model`` comes from (the record's ``tokens_model_source``).

    A server backend says it (its local tokenizer, its tokenize endpoint, or
    ``missing: <why>``); the embedded model counts with its own tokenizer.
    """
    said = client.describe().get("tokens_model_source")
    return str(said) if said else f"the model's own tokenizer ({client.describe().get('backend')})"


def _learn_tokens_source(client: ModelClient) -> None:
    """Count one short text, so that where ``tokens_model`` comes from is known before
    the first record (a hosted API without a tokenize endpoint: missing, and why)."""
    from tersetalk.models.tokenizers import TokensUnavailableError

    try:
        client.count_tokens("tokens")
    except TokensUnavailableError as exc:
        log.warning("%s; tokens_model is missing in every row (tokens_model_source)", exc)


def _checkpoint_line(example_id: str, record: dict) -> bytes:
    """The record as one checkpoint line, or :class:`RecordWriteError` saying which example
    and why (text that is not Unicode, e.g. a lone surrogate, or a value JSON cannot hold).
    Encoded before anything is written, so a failing record leaves no partial line."""
    try:
        return (json.dumps(record, ensure_ascii=False, allow_nan=True) + "\n").encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise RecordWriteError(
            f"example {example_id}: its record cannot be written ({type(exc).__name__}: "
            f"{str(exc)[:300]}); the run stops with the finished examples checkpointed. "
            "This is a defect of the step that made the record (its text must be valid "
            "Unicode): report it with the example's id"
        ) from None


class CheckpointWriter:
    """Appends checkpoint lines to ``fh`` (a binary file opened for appending) and
    fsyncs them behind, on a thread of its own.

    Why: a finished example must survive a kill, and must not hold back the next one.
    Each line is written and flushed at once (in the operating system's hands, a kill
    of this process loses none); the fsync that puts it on the disk (against a crash
    of the machine) takes milliseconds under load, so it runs on a writer thread that
    covers every line written since its last fsync with one. :meth:`close` waits for
    the last fsync, and raises :class:`RecordWriteError` when an fsync failed.
    """

    #: how a line is put on disk (a seam for the tests of the write-behind)
    fsync = staticmethod(os.fsync)

    def __init__(self, fh: Any, path: Path) -> None:
        self._fh = fh
        self._path = path
        self._cond = threading.Condition()
        self._written = self._synced = 0
        self._closing = False
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._sync_loop, name="tersetalk-checkpoint",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def append(self, line: bytes) -> None:
        """Write and flush one complete line; its fsync follows behind."""
        self._raise_failed()
        self._fh.write(line)
        self._fh.flush()
        with self._cond:
            self._written += 1
            self._cond.notify()

    def _sync_loop(self) -> None:
        fd = self._fh.fileno()
        while True:
            with self._cond:
                while self._synced == self._written and not self._closing:
                    self._cond.wait()
                if self._synced == self._written:
                    return
                target = self._written
            try:
                self.fsync(fd)
            except OSError as exc:
                with self._cond:
                    self._error = exc
                    self._cond.notify_all()
                return
            with self._cond:
                self._synced = target
                self._cond.notify_all()

    def _raise_failed(self) -> None:
        if self._error is not None:
            raise RecordWriteError(
                f"the checkpoint {self._path} cannot be synced to disk ({self._error}); the "
                "run stops. Check the disk (space, permissions) and run the same command again"
            ) from self._error

    def close(self) -> None:
        """Wait for the last fsync (every line written is then on disk)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        self._raise_failed()

    @property
    def synced(self) -> int:
        """How many lines are on disk (fsynced) so far."""
        with self._cond:
            return self._synced


def errors_path(ckpt: Path) -> Path:
    """Where a refused run's error rows are set aside: ``<run>.errors.jsonl``."""
    return ckpt.with_name(ckpt.name.removesuffix(".checkpoint.jsonl") + ".errors.jsonl")


def too_many_errors(n_errors: int, n: int, share: float) -> bool:
    """Whether ``n_errors`` error rows of ``n`` examples are more than a run may hold.

    More than ``share`` of the examples, and either at least
    :data:`MIN_REFUSED_ERRORS` of them or every one: in a run of two examples, one
    answer the model got wrong is an example's failure, not a sign of a broken setup.
    """
    return n > 0 and n_errors > share * n and (n_errors >= MIN_REFUSED_ERRORS or n_errors == n)


def _refuse_if_too_many_errors(df: pd.DataFrame, spec: dict, ckpt: Path, done: dict) -> None:
    """Refuse a run with too many error rows (:func:`too_many_errors`): its error rows go
    to :func:`errors_path`, to be read, and out of the checkpoint, so that the next run
    redoes those examples (after the fix) and keeps the rest."""
    share = spec.get("pipeline", {}).get("max_error_share", DEFAULT_MAX_ERROR_SHARE)
    in_run = set(df["example_id"])  # the checkpoint may hold more (an earlier --limit)
    bad = [r for r in done.values() if r["example_id"] in in_run and r.get("error") is not None]
    if not too_many_errors(len(bad), len(df), share):
        return
    aside = errors_path(ckpt)
    lines = (_checkpoint_line(rec["example_id"], rec) for rec in bad)
    write_bytes_atomic(b"".join(lines), aside)
    set_aside = {rec["example_id"] for rec in bad}
    kept = [rec for rec in done.values() if rec["example_id"] not in set_aside]
    write_bytes_atomic(b"".join(_checkpoint_line(r["example_id"], r) for r in kept), ckpt)
    raise TooManyErrorsError(
        f"{len(bad)} of {len(df)} examples are error rows, more than pipeline.max_error_share "
        f"= {share:g} allows (first: example {bad[0]['example_id']}: "
        f"{str(bad[0]['error'])[:400]}). So many failures are more likely the setup's than "
        f"the examples': their rows are in {aside}; fix their cause and run again, which "
        f"redoes those {len(bad)} and keeps the {len(kept)} finished. If they are the "
        "model's own answers, raise pipeline.max_error_share. No run file was written"
    )


#: the folders under the spec's cache_dir where a run keeps its token counts and its
#: judge's sentence similarities (one file per run spec)
TOKEN_MEMO_DIR = "tokens"
SIMILARITY_MEMO_DIR = "similarity"


def run(
    spec: dict,
    sample_path: str | Path,
    out: str | Path,
    *,
    limit: int | None = None,
    client: ModelClient | None = None,
    progress: bool = True,
    events: bool | None = None,
) -> pd.DataFrame:
    """Run every example not yet checkpointed, then write the run file atomically.

    ``events`` publishes progress to ``<out>.events.jsonl`` for ``tersetalk dashboard
    --attach`` (None: the ``TERSETALK_EVENTS`` default, on); see
    :mod:`tersetalk.core.events`. Publishing never fails a run.

    With a ``cache_dir`` in the spec, the tiktoken counts of the run's texts are kept in
    ``<cache_dir>/tokens/<spec hash>.json`` (:func:`tersetalk.core.tokens.count_memo`) and its
    judge's sentence similarities in ``<cache_dir>/similarity/<spec hash>.json``
    (:func:`tersetalk.models.embedding.similarity_memo`), so a rerun of the same spec
    reads them instead of building the encodings and loading MiniLM.
    """
    tokens = similarities = fingerprints = None
    if spec.get("cache_dir"):
        root, name = Path(spec["cache_dir"]), f"{results_hash(spec)}.json"
        tokens, similarities = root / TOKEN_MEMO_DIR / name, root / SIMILARITY_MEMO_DIR / name
        fingerprints = root / FINGERPRINT_DIR
    with count_memo(tokens), similarity_memo(similarities, fingerprints):
        return _run(spec, sample_path, out, limit=limit, client=client, progress=progress,
                    events=events)  # fmt: skip


def _read_examples(spec: dict, sample_path: str | Path, limit: int | None) -> list[dict]:
    """The sample's examples (the first ``limit`` of them), once the task is known to be
    scorable here: a task that cannot be stops before the first example."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive number of examples, got {limit!r}")
    examples = read_sample(sample_path, task=spec["task"])
    try:
        preflight(spec["task"], spec.get("task_options"))
    except TaskUnavailableError as exc:
        raise ConfigError(str(exc)) from None
    if limit is not None:
        examples = examples[:limit]
    return examples


def _examples_in_flight(spec: dict) -> int:
    """How many examples run at once; a setting the backend cannot take is a config error."""
    try:
        return max_in_flight(spec["models"])
    except ModelError as exc:
        raise ConfigError(str(exc)) from None


def _run_context(spec: dict, client: ModelClient, out: Path, resumed: bool) -> RunContext:
    """What every example of the run shares: the client, the generation settings, the
    variant's and the task's options."""
    gen, critic_gen = generation_configs(spec)
    return RunContext(
        task=spec["task"],
        client=client,
        gen=gen,
        critic_gen=critic_gen,
        variant_settings=spec["variant_settings"],
        task_options=spec["task_options"],
        max_revisions=spec["pipeline"]["max_revisions"],
        # side files of a system go next to the run file (the mediator's trace); on a
        # resumed run they are appended to, on a fresh one started over
        shared={"run_out": out, "run_resumed": resumed},
    )


def _log_run_start(
    spec: dict, client: ModelClient, n_examples: int, digest: str, n_flight: int
) -> None:
    """Say which run this is, on which model (its fingerprint: asked or hashed once, here)
    and spec; learn where the token counts come from before the first record."""
    fingerprint = model_fingerprint(client)
    _learn_tokens_source(client)
    log.info(
        "run %s/%s/%s: %d examples, model %s, fingerprint %s (%s), spec %s, %d in flight",
        spec["task"],
        spec["system"],
        spec["variant"],
        n_examples,
        json.dumps(client.describe()),
        fingerprint.value,
        fingerprint.source,
        digest,
        n_flight,
    )


@dataclass
class _Outcomes:
    """Where the examples' outcomes go as they come back, on the calling thread: a record
    to the checkpoint and ``done``; a passing fault to ``failed`` (not checkpointed, so
    the next run retries it); each to the progress bar and the publisher."""

    writer: CheckpointWriter
    done: dict[str, dict]
    failed: list[tuple[str, str]]  # (example id, cause) of passing server faults
    pub: Any
    bar: Any

    def keep(self, ex: dict, outcome: dict | Exception) -> None:
        """Keep one example's outcome; raise what stops the run."""
        if isinstance(outcome, Exception):
            if stopping_fault(outcome) is not None or not (
                is_transient(outcome) or isinstance(outcome, TaskHostFault)
            ):
                raise outcome
            log.error("example %s: %s; not checkpointed, retried on the next run",
                      ex["example_id"], outcome)  # fmt: skip
            self.failed.append((ex["example_id"], f"{type(outcome).__name__}: {outcome}"))
            self.pub.example_failed(ex["example_id"], self.failed[-1][1])
            self.bar.update(1)
            return
        self.writer.append(_checkpoint_line(ex["example_id"], outcome))
        self.done[ex["example_id"]] = outcome
        self.pub.example_finished(outcome)
        self.bar.update(1)


def _run_in_turn(todo: list[dict], run_example: Callable[[dict], dict], kept: _Outcomes) -> None:
    """One example at a time, on this thread: the live message hook sees every message."""
    for ex in todo:
        kept.pub.example_started(ex)
        try:
            outcome: dict | Exception = run_example(ex)
        except Exception as exc:  # noqa: BLE001 - keep() decides
            outcome = exc
        kept.keep(ex, outcome)


def _run_in_flight(
    todo: list[dict], run_example: Callable[[dict], dict], kept: _Outcomes, n_flight: int
) -> None:
    """``n_flight`` examples at once on worker threads, each kept here as it comes back.
    An error that stops the run starts no further example; the ones in flight are awaited
    and kept, then the first such error is raised."""
    stopping: Exception | None = None
    with InFlight(run_example, todo, n_flight) as fl:
        for ex, outcome in fl:
            kept.pub.example_started(ex)
            try:
                kept.keep(ex, outcome)
            except Exception as exc:  # noqa: BLE001 - keep what is in flight
                if stopping is None:
                    stopping = exc
                    fl.stop()  # start nothing new; the running ones come back
    if stopping is not None:
        raise stopping


def _run_examples(
    todo: list[dict], run_example: Callable[[dict], dict], kept: _Outcomes, n_flight: int
) -> None:
    """Run the examples not yet done and keep their outcomes; every finished one is on
    disk when this returns, and what was written is synced when it raises (the run's own
    error is raised then, not a failed fsync)."""
    try:
        if n_flight == 1:
            _run_in_turn(todo, run_example, kept)
        else:
            _run_in_flight(todo, run_example, kept, n_flight)
    except BaseException:
        with contextlib.suppress(RecordWriteError):
            kept.writer.close()
        raise
    kept.writer.close()  # every finished example on disk before the run file


def _raise_incomplete(
    failed: list[tuple[str, str]], n_examples: int, n_done: int, ckpt: Path
) -> NoReturn:
    """Refuse a run some of whose examples failed for a passing reason: a rerun retries
    only them."""
    first_id, first_cause = failed[0]
    raise RunIncompleteError(
        f"{len(failed)} of {n_examples} examples failed for a passing reason: the "
        "model server did not answer properly, or the code sandbox could not run "
        f"(first: example {first_id}: {first_cause[:600]}). The other "
        f"{n_done} are checkpointed in {ckpt}; run the same command again (or "
        "`snakemake` again) to retry only the failed ones. No run file was written"
    )


def _write_run_file(
    df: pd.DataFrame,
    n_err: int,
    out: Path,
    spec: dict,
    digest: str,
    client: ModelClient,
    ckpt: Path,
) -> None:
    """Write the run file atomically, then drop the checkpoint and the error rows an
    earlier refused try set aside (they are redone now)."""
    desc = client.describe()
    log.info(
        "finished: %d records, %d errors; cache hits %s, misses %s (%s)",
        len(df),
        n_err,
        desc.get("cache_hits", "-"),
        desc.get("cache_misses", "-"),
        desc.get("cache_dir", "no cache"),
    )
    write_parquet_atomic(df, out, run_metadata(spec, digest, client))
    ckpt.unlink(missing_ok=True)
    errors_path(ckpt).unlink(missing_ok=True)


def _run(
    spec: dict,
    sample_path: str | Path,
    out: str | Path,
    *,
    limit: int | None,
    client: ModelClient | None,
    progress: bool,
    events: bool | None,
) -> pd.DataFrame:
    """:func:`run` inside its memos: resume from the checkpoint, run the rest, write the
    run file; the publisher hears how the run ends, however it ends."""
    out = Path(out)
    examples = _read_examples(spec, sample_path, limit)
    if spec.get("calibration_file"):
        spec = resolve_calibrated(spec)
    digest = results_hash(spec)
    n_flight = _examples_in_flight(spec)
    ckpt = checkpoint_path(out)
    done = read_checkpoint(ckpt, digest)
    if done:
        log.info(
            "resuming: %d of %d examples already finished in %s", len(done), len(examples), ckpt
        )
    client = client or client_from_spec(spec)
    ctx = _run_context(spec, client, out, resumed=bool(done))
    _log_run_start(spec, client, len(examples), digest, n_flight)
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    drop_partial_line(ckpt)  # never append onto a line torn by a kill
    todo = [ex for ex in examples if ex["example_id"] not in done]
    bar = tqdm(
        total=len(examples),
        initial=len(examples) - len(todo),
        disable=not progress,
        desc=f"{spec['task']}/{spec['system']}/{spec['variant']}",
        unit="ex",
    )
    failed: list[tuple[str, str]] = []
    pub = open_publisher(out, spec, events)
    if pub.enabled:
        pub.run_started(n_examples=len(examples), n_done=len(done),
                        model=str(client.describe().get("model", "")))  # fmt: skip
    try:
        with publishing(pub), open(ckpt, "ab") as fh:
            kept = _Outcomes(CheckpointWriter(fh, ckpt), done, failed, pub, bar)
            _run_examples(todo, lambda ex: run_one(ex, spec, ctx, digest), kept, n_flight)
    except BaseException as exc:  # a stopped run says so before it goes (Ctrl-C included)
        pub.run_finished("failed", error=f"{type(exc).__name__}: {exc}"[:2000], n_done=len(done))
        pub.close()
        raise
    bar.close()
    if failed:
        pub.run_finished("incomplete", n_done=len(done), n_failed=len(failed))
        pub.close()
        _raise_incomplete(failed, len(examples), len(done), ckpt)
    layout = system(spec["system"]).layout
    df = records_frame([done[ex["example_id"]] for ex in examples], layout)
    n_err = int(df["error"].notna().sum())
    try:
        _refuse_if_too_many_errors(df, spec, ckpt, done)
    except TooManyErrorsError as exc:
        pub.run_finished("failed", error=str(exc)[:2000], n_done=len(done))
        pub.close()
        raise
    _write_run_file(df, n_err, out, spec, digest, client, ckpt)
    pub.run_finished("finished", n_done=len(df), n_errors=n_err, out=str(out))
    pub.close()
    return df
