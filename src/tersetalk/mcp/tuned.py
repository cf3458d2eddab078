"""Tuned against default: the proxy's tuner judged on sessions it was not tuned on.

Why a split: the tuner's rules (:mod:`tersetalk.mcp.tune`) read statistics of the
sessions they are given; judging the file they write on those same sessions would
reward fitting them. So the sessions here are drawn from one seeded generator per
server (:func:`generate_session`: a random walk over the server's read tools with
repeats of recent calls and occasional writes) and split by seed: the training
sessions use seeds ``0 .. n-1``, the evaluation sessions ``EVAL_SEED + 0 ..`` (disjoint,
:func:`split_seeds`). Same distribution of calls, different calls in a different order.

The steps, all through the real proxy in front of the real server:

1. training (:func:`train`): the training sessions through the proxy with its default
   config (:func:`default_config`), writing the proxy's local telemetry;
2. ``tersetalk mcp tune analyze --telemetry-dir`` on that telemetry: the tuned file
   and its evidence CSV (one row per changed value);
3. evaluation (:func:`evaluate`): each evaluation session directly (the reference for
   retrievals and saved tokens), through the proxy with the default config, and with
   the same config plus ``--tuned FILE``, each arm on a fresh copy of the data.

A row per (split, seed, arm, step), the columns of :mod:`tersetalk.mcp.experiment`'s
rows plus the session's seed and split, the hint lines' tokens, what the proxy said it
applied from the tuned file, and how many values the tuner changed (``n_changes``) and
how many of those the proxy has a mechanism for (``n_applied``): a tuner that changes
nothing on these sessions is reported as such, with identical arms, not hidden.
"""

from __future__ import annotations

import csv
import logging
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tersetalk.core.tokens import count_tokens

from .experiment import (
    DIRECT,
    LIST_STEP,
    TOKENIZER,
    ExperimentError,
    Step,
    _fresh_target,
    _rows,
    proxy_command,
    proxy_config,
    read_telemetry,
    run_session,
)
from .servers import (
    GIT_ENV,
    PROJECT_COMMITS,
    launch_command,
    memory_entity_names,
    project_files,
    project_pending_files,
)

log = logging.getLogger(__name__)

DEFAULT, TUNED = "default", "tuned"
ARMS = (DIRECT, DEFAULT, TUNED)
TRAIN, EVAL = "train", "eval"
#: the first evaluation seed; training seeds count up from 0 and must stay below it.
#: 2000: the sessions from 1000 on were read when the LRU rule was chosen (by the tokens
#: its repeats save, not by their count), so the held-out sessions are fresh ones
EVAL_SEED = 2000
#: the generator's odds per step: come back to an earlier read; write (per server: a
#: coding agent stages its edit now and then, a data agent updates rows more often)
REPEAT_P = 0.35
WRITE_P = {"sqlite": 0.08, "git": 0.04, "memory": 0.06}
#: how far back a repeat goes: its stack distance d (1 = the last distinct read, 2 = the
#: one before, ...) is drawn with P(d) proportional to 1/d**REPEAT_ZIPF_S for d up to FAR
#: (or the distinct reads so far): recent reads come back most, older ones with a heavy
#: tail, the reuse-distance shape of program and agent traces. With s = 1 and FAR = 16,
#: 32% of repeats go beyond the last 5 distinct reads (a user's own sessions through the
#: proxy had 4 of 12 there) and 38% beyond the last RECENT = 4
REPEAT_ZIPF_S, FAR, RECENT = 1.0, 16, 4
#: the saving of the tuned config over the default one the tuner is meant to reach, per
#: server, on the held-out sessions
TARGET_SAVING_PCT = 5.0
HINT_PREFIX = "> ["


class TunedExperimentError(ExperimentError):
    """The tuned-vs-default experiment cannot run as asked; the message says why."""


# ---- the sessions -------------------------------------------------------------------------


def split_seeds(train: int, evaluation: int) -> tuple[list[int], list[int]]:
    """The training and evaluation seeds: ``0..train-1`` and ``EVAL_SEED..``, disjoint."""
    if train < 1 or evaluation < 1:
        raise TunedExperimentError(
            f"need at least one training and one evaluation session (got {train}, {evaluation})"
        )
    if train > EVAL_SEED:
        raise TunedExperimentError(f"at most {EVAL_SEED} training sessions (got {train})")
    return list(range(train)), list(range(EVAL_SEED, EVAL_SEED + evaluation))


def _sqlite_read(rng: random.Random) -> Step:
    r = rng.random()
    table = rng.choice(["questions", "payloads"])
    if r < 0.1:
        return Step("read", "list_tables")
    if r < 0.25:
        return Step("read", "describe_table", {"table_name": table})
    if r < 0.35:
        return Step("read", "read_query", {"query": f"SELECT COUNT(*) AS n FROM {table}"})
    limit, offset = rng.choice([5, 10, 20]), rng.choice([0, 10, 20])
    query = f"SELECT * FROM {table} ORDER BY id LIMIT {limit} OFFSET {offset}"
    return Step("read", "read_query", {"query": query})


def _sqlite_write(rng: random.Random, state: dict) -> Step:
    level, offset = rng.choice(["checked", "reviewed"]), rng.choice([0, 10, 20])
    query = (f"UPDATE questions SET level = '{level}' WHERE id IN "
             f"(SELECT id FROM questions ORDER BY id LIMIT 3 OFFSET {offset})")  # fmt: skip
    return Step("write", "write_query", {"query": query})


#: a coding agent's fresh reads of the project (the rest: status and the working diffs)
GIT_READ_ODDS = (("file", 0.45), ("commit", 0.15), ("diff", 0.10), ("log", 0.10),
                 ("status", 0.10))  # fmt: skip


def _zipf_pick(rng: random.Random, n: int, s: float = 1.0) -> int:
    """An index in 0..n-1 with P(i) proportional to 1/(i+1)**s."""
    weights = [1.0 / (i + 1) ** s for i in range(n)]
    return rng.choices(range(n), weights=weights)[0]


def _git_read(rng: random.Random, repo: str, focus: list[str]) -> Step:
    """A coding agent's read of the project: a file at HEAD (the files of its task first:
    ``focus`` is the session's own order of the tracked files, picked with Zipf weights),
    a commit (recent ones first), a diff against a recent revision, the log, the status,
    or the working tree's diffs."""
    base, r = {"repo_path": repo}, rng.random()
    kind = next((k for k, p in _cumulative(GIT_READ_ODDS) if r < p), "worktree")
    if kind == "file":
        return Step(
            "read", "git_show", {**base, "revision": f"HEAD:{focus[_zipf_pick(rng, len(focus))]}"}
        )
    if kind == "commit":
        k = min(int(rng.expovariate(1 / 4)), PROJECT_COMMITS - 1)
        return Step("read", "git_show", {**base, "revision": f"HEAD~{k}" if k else "HEAD"})
    if kind == "diff":
        return Step("read", "git_diff", {**base, "target": f"HEAD~{rng.randint(1, 6)}"})
    if kind == "log":
        return Step("read", "git_log", {**base, "max_count": rng.choice([5, 10, 20])})
    if kind == "status":
        return Step("read", "git_status", base)
    return Step("read", rng.choice(["git_diff_unstaged", "git_diff_staged"]), base)


def _cumulative(odds: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    out, total = [], 0.0
    for kind, p in odds:
        total += p
        out.append((kind, total))
    return out


def _git_write(repo: str, state: dict) -> Step:
    # stage the pending edit, or unstage it: a write that can be repeated forever
    state["staged"] = not state.get("staged", False)
    if state["staged"]:
        return Step("write", "git_add", {"repo_path": repo, "files": project_pending_files()})
    return Step("write", "git_reset", {"repo_path": repo})


#: what an assistant searches its memory for (search_nodes matches names, types and
#: observations, case-insensitively)
MEMORY_QUERIES = ("limit", "empty", "unicode", "release", "maintainer", "review", "CLI",
                  "tests", "decision", "task", "Ada", "Ben", "Chen", "counter", "tokenize",
                  "blocked", "newsroom", "docs")  # fmt: skip


def _memory_read(rng: random.Random, names: list[str], queries: list[str]) -> Step:
    """An assistant's read of its memory: a search (its session's topics first), the
    nodes it names (its session's entities first, 1 to 3 at once), or the whole graph."""
    r = rng.random()
    if r < 0.5:
        return Step("read", "search_nodes", {"query": queries[_zipf_pick(rng, len(queries))]})
    if r < 0.9:
        picked = {names[_zipf_pick(rng, len(names))] for _ in range(rng.randint(1, 3))}
        return Step("read", "open_nodes", {"names": sorted(picked)})
    return Step("read", "read_graph")


def _memory_write(rng: random.Random, names: list[str], state: dict) -> Step:
    state["notes"] = state.get("notes", 0) + 1
    entity = names[_zipf_pick(rng, len(names))]
    note = f"session note {state['notes']}: checked against the code"
    return Step("write", "add_observations",
                {"observations": [{"entityName": entity, "contents": [note]}]})  # fmt: skip


def repeat_distance(rng: random.Random, available: int) -> int:
    """A repeat's stack distance: 1..min(FAR, available), P(d) ~ 1/d**REPEAT_ZIPF_S."""
    return 1 + _zipf_pick(rng, min(FAR, available), REPEAT_ZIPF_S)


def generate_session(server: str, seed: int, steps: int, repo: str | None = None) -> list[Step]:
    """One session of ``steps`` steps (the first lists the tools) for ``server``, a pure
    function of (server, seed, steps, repo): per step, with probability REPEAT_P the
    same call as an earlier distinct read at a stack distance drawn by
    :func:`repeat_distance`, with WRITE_P[server] a write, otherwise a read drawn from the
    server's read tools and arguments (which may equal an earlier one: the pool is
    finite, as an agent's questions are). A git session starts as a coding agent's
    does, with the status and the log, and then reads files, commits and diffs of the
    project repository (:func:`tersetalk.mcp.servers.create_project_repository`)."""
    if server not in WRITE_P:
        raise TunedExperimentError(f"no session generator for server {server!r}")
    if server == "git" and not repo:
        raise TunedExperimentError("a git session needs the repository's path")
    if steps < 2:
        raise TunedExperimentError(f"a session needs at least 2 steps (got {steps})")
    rng = random.Random(f"{server}:{seed}")  # str seeds hash with SHA-512: stable everywhere
    out = [Step("list", LIST_STEP)]
    recent: list[Step] = []
    state: dict[str, Any] = {}
    opening: list[Step] = []
    focus: list[str] = []
    queries: list[str] = []
    if server == "memory":  # it recalls first, as the server's own usage note asks
        opening = [Step("read", "read_graph")]
        focus, queries = memory_entity_names(), list(MEMORY_QUERIES)
        rng.shuffle(focus)
        rng.shuffle(queries)
    if server == "git":
        base = {"repo_path": repo}
        opening = [
            Step("read", "git_status", base),
            Step("read", "git_log", {**base, "max_count": 10}),
        ]
        focus = project_files()
        rng.shuffle(focus)
    while len(out) < steps:
        r = rng.random()
        if opening:
            step = opening.pop(0)
            recent = [s for s in recent if s != step] + [step]
            out.append(step)
        elif recent and r < REPEAT_P:
            prev = recent[-repeat_distance(rng, len(recent))]
            recent = [s for s in recent if s != prev] + [prev]
            out.append(Step("repeat", prev.tool, prev.arguments))
        elif r < REPEAT_P + WRITE_P[server]:
            if server == "sqlite":
                out.append(_sqlite_write(rng, state))
            elif server == "git":
                out.append(_git_write(repo, state))
            else:
                out.append(_memory_write(rng, focus, state))
        else:
            if server == "sqlite":
                step = _sqlite_read(rng)
            elif server == "git":
                step = _git_read(rng, repo or "", focus)
            else:
                step = _memory_read(rng, focus, queries)
            recent = [s for s in recent if s != step] + [step]
            out.append(step)
    return out


def session_steps_for(server: str, seed: int, steps: int) -> Callable[[Path], list[Step]]:
    """The session's steps, given the arm's private copy of the data (git names it)."""
    return lambda copy: generate_session(server, seed, steps, str(copy))


# ---- the arms -----------------------------------------------------------------------------


def default_config(budget: int | None) -> dict[str, Any]:
    """The default arm's proxy config: the MCP experiment's (write tools named, so a write
    invalidates) with the proxy's built-in cache size instead of its 64, since the
    tuner's own LRU rules start from the built-in value and an untuned user runs it."""
    from .config import Dedup

    cfg = proxy_config(budget)
    cfg["dedup"] = {**cfg["dedup"], "lru_size": Dedup().lru_size}
    return cfg


@dataclass
class ArmRun:
    steps: list[Step]
    got: list[dict]
    telemetry: list[dict]
    workdir: str
    applied: str  # what the proxy said it applied from the tuned file ("" without one)


def _applied(stderr: str) -> str:
    for line in stderr.splitlines():
        if "tersetalk mcp-proxy: tuned " in line and ": applied " in line:
            return line.split(": applied ", 1)[1].strip()
    return ""


def run_arm(downstream_for: Callable[[Path | None], list[str]], target: Path | None,
            steps_for: Callable[[Path | None], list[Step]], arm: str, config: dict[str, Any],
            tuned: Path | None = None, telemetry_dir: Path | None = None) -> ArmRun:  # fmt: skip
    """One session of one arm on a fresh copy of ``target`` (None: the server has no data):
    directly, or through the proxy with ``config`` (and ``--tuned`` for the tuned arm)."""
    import yaml

    if arm == TUNED and tuned is None:
        raise TunedExperimentError("the tuned arm needs the tuned file")
    with tempfile.TemporaryDirectory(prefix=f"tersetalk-mcp-tuned-{arm}-") as tmp:
        work = Path(tmp)
        copy = None if target is None else _fresh_target("", Path(target).absolute(), work)
        steps = steps_for(copy)
        downstream = downstream_for(copy)
        telemetry = None
        if arm == DIRECT:
            command = downstream
        else:
            cfg = work / "proxy.yaml"
            cfg.write_text(yaml.safe_dump(config, sort_keys=False))
            telemetry = work / "telemetry.jsonl"
            command = proxy_command(cfg, telemetry, downstream, telemetry_dir)
            if arm == TUNED:
                at = command.index("--")
                command[at:at] = ["--tuned", str(Path(tuned).absolute())]
        got = run_session(command, steps, retrieve=arm != DIRECT, cwd=work)
        err = work / "stderr.log"
        stderr = err.read_text(encoding="utf-8", errors="replace") if err.exists() else ""
        return ArmRun(steps, got, read_telemetry(telemetry) if telemetry else [], str(work),
                      _applied(stderr))  # fmt: skip


def hint_columns(text: str) -> dict[str, int]:
    """The hint lines of a result the client read (``> [...]``: references, metadata,
    overflow, encodings) and their o200k tokens, counted line by line."""
    lines = [line for line in text.split("\n") if line.startswith(HINT_PREFIX)]
    return {"hint_lines": len(lines),
            "hint_tokens": sum(count_tokens(line, TOKENIZER) for line in lines)}  # fmt: skip


def _frame(server: str, split: str, seed: int, arm: str, budget: int | None, run: ArmRun,
           direct: ArmRun | None) -> pd.DataFrame:  # fmt: skip
    base = direct.got if direct is not None else run.got
    df = _rows(server, arm, budget, run.steps, run.got, run.telemetry, base, run.workdir)
    df.insert(1, "split", split)
    df.insert(2, "seed", seed)
    hints = pd.DataFrame([hint_columns(g["text"]) for g in run.got])
    df["hint_lines"] = hints["hint_lines"].to_numpy()
    df["hint_tokens"] = hints["hint_tokens"].to_numpy()
    df["tuned_applied"] = run.applied
    for col in ("direct_tokens", "saved_tokens"):
        df[col] = df[col].astype("Int64")
    df["identical_to_direct"] = df["identical_to_direct"].astype("boolean")
    if direct is None:  # no direct session in training: no reference to compare with
        for col, dtype in (("direct_tokens", "Int64"), ("saved_tokens", "Int64"),
                           ("identical_to_direct", "boolean")):  # fmt: skip
            df[col] = pd.array([pd.NA] * len(df), dtype=dtype)
        df[["t_client_direct_s", "t_client_overhead_ratio"]] = float("nan")
    # the tuner's counts: set on the evaluation rows (training runs before the tuner)
    df["n_changes"] = pd.array([pd.NA] * len(df), dtype="Int64")
    df["n_applied"] = pd.array([pd.NA] * len(df), dtype="Int64")
    return df


def _downstream(server: str, env_dir: str | Path) -> Callable[[Path | None], list[str]]:
    env = [f"{k}={v}" for k, v in sorted(GIT_ENV.items())]
    return lambda copy: ["env", *env, *launch_command(server, env_dir, copy)]


def train(server: str, downstream_for: Callable[[Path | None], list[str]],
          target: Path | None, seeds: Sequence[int], steps_for: Callable[[int], Any],
          budget: int | None, telemetry_dir: Path) -> pd.DataFrame:  # fmt: skip
    """The training sessions through the default proxy, telemetry into ``telemetry_dir``.
    Training seeds are below EVAL_SEED, so no evaluation session is trained on."""
    held_out = [s for s in seeds if s >= EVAL_SEED]
    if held_out:
        raise TunedExperimentError(f"seeds {held_out} are evaluation seeds (>= {EVAL_SEED}); "
                                   "train on seeds below it")  # fmt: skip
    telemetry_dir = Path(telemetry_dir).absolute()
    telemetry_dir.mkdir(parents=True, exist_ok=True)
    frames = []
    for seed in seeds:
        t0 = time.perf_counter()
        run = run_arm(downstream_for, target, steps_for(seed), DEFAULT, default_config(budget),
                      telemetry_dir=telemetry_dir)  # fmt: skip
        log.info("%s/train seed %d: %d steps in %.1f s", server, seed, len(run.steps),
                 time.perf_counter() - t0)  # fmt: skip
        frames.append(_frame(server, TRAIN, seed, DEFAULT, budget, run, None))
    return pd.concat(frames, ignore_index=True)


def tuner_changes(tuned: Path, evidence: Path | None) -> tuple[int, int, list[dict]]:
    """How many values the tuner changed (the evidence rows) and how many of them the
    proxy applies (the rest, e.g. templates or recursion depth, it has no mechanism for)."""
    from .tune import TuneError, applied_knobs, load_adaptive, resolve

    try:
        effective = resolve(load_adaptive(tuned))
    except TuneError as exc:
        raise TunedExperimentError(f"{tuned}: {exc}") from None
    rows: list[dict] = []
    if evidence is not None:
        with open(evidence, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    applied = set(applied_knobs(effective))

    def key(r: dict) -> str:
        if not r.get("endpoint") or r["knob"] == "dedup.lru_size":
            return r["knob"]
        return f"{r['knob']}.{r['endpoint']}"

    return len(rows), sum(key(r) in applied for r in rows), rows


def evaluate(server: str, downstream_for: Callable[[Path | None], list[str]],
             target: Path | None, seeds: Sequence[int], steps_for: Callable[[int], Any],
             budget: int | None, tuned: Path,
             evidence: Path | None = None) -> pd.DataFrame:  # fmt: skip
    """Each evaluation session directly, with the default config and with ``--tuned``.
    Evaluation seeds are EVAL_SEED or above: sessions the tuner never saw."""
    seen = [s for s in seeds if s < EVAL_SEED]
    if seen:
        raise TunedExperimentError(f"seeds {seen} are training seeds (< {EVAL_SEED}); "
                                   "evaluate on held-out seeds")  # fmt: skip
    n_changes, n_applied, _ = tuner_changes(tuned, evidence)
    frames = []
    for seed in seeds:
        direct = None
        for arm in ARMS:
            t0 = time.perf_counter()
            run = run_arm(downstream_for, target, steps_for(seed), arm, default_config(budget),
                          tuned=tuned if arm == TUNED else None)  # fmt: skip
            if arm == DIRECT:
                direct = run
            log.info("%s/eval seed %d/%s: %d steps in %.1f s%s", server, seed, arm,
                     len(run.steps), time.perf_counter() - t0,
                     f" (tuned: applied {run.applied})" if arm == TUNED else "")  # fmt: skip
            frames.append(_frame(server, EVAL, seed, arm, budget, run, direct))
    df = pd.concat(frames, ignore_index=True)
    df["n_changes"] = pd.array([n_changes] * len(df), dtype="Int64")
    df["n_applied"] = pd.array([n_applied] * len(df), dtype="Int64")
    return df


def train_server(server: str, env_dir: str | Path, target: str | Path, sessions: int,
                 steps: int, budget: int | None, telemetry_dir: Path) -> pd.DataFrame:  # fmt: skip
    """:func:`train` on a real server (its venv, its data), the training seeds."""
    seeds, _ = split_seeds(sessions, 1)
    return train(server, _downstream(server, env_dir), Path(target), seeds,
                 lambda seed: session_steps_for(server, seed, steps), budget,
                 telemetry_dir)  # fmt: skip


def evaluate_server(server: str, env_dir: str | Path, target: str | Path, sessions: int,
                    steps: int, budget: int | None, tuned: Path,
                    evidence: Path | None = None) -> pd.DataFrame:  # fmt: skip
    """:func:`evaluate` on a real server, the evaluation seeds."""
    _, seeds = split_seeds(1, sessions)
    return evaluate(server, _downstream(server, env_dir), Path(target), seeds,
                    lambda seed: session_steps_for(server, seed, steps), budget, tuned,
                    evidence)  # fmt: skip


# ---- the summary --------------------------------------------------------------------------

#: compared with the default arm in the summary (``<column>_vs_default``: arm - default)
COMPARED = ("tokens_per_session", "dedup_hit_rate", "hint_tokens_per_session", "retrievals")


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per server and arm over the evaluation sessions: sessions, tool calls, o200k tokens
    the client read per session (results; retrievals apart), dedup hits and their rate
    per tool call, hint tokens per session, retrievals (and how many were exact), the
    tuner's n_changes / n_applied, and each compared value minus the default arm's.

    And per server (the same on each of its rows), the headline: the tokens the model
    reads per held-out session (results and retrievals) with the default config
    (``default_tokens``) and with the tuned file (``tuned_tokens``), the saving of tuned
    over default in percent (``tuned_saving_pct``: 100 * (1 - tuned / default)),
    whether it reaches TARGET_SAVING_PCT (``meets_target``), and what the proxy said it
    applied from the tuned file (``tuned_applied``)."""
    ev = df[df["split"] == EVAL]
    if ev.empty:
        raise TunedExperimentError("no evaluation rows: run `mcp-experiment tuned-eval` first")
    ev = ev.assign(call=ev["tool"] != LIST_STEP)
    per = ev.groupby(["server", "arm", "seed"], sort=False).agg(
        tokens=("tokens", "sum"), hint_tokens=("hint_tokens", "sum"),
        retrieved_tokens=("retrieved_tokens", "sum"),
    ).reset_index()  # fmt: skip
    calls = ev[ev["call"]].groupby(["server", "arm"], sort=False).agg(
        calls=("step", "size"), dedup_hits=("dedup_hit", "sum"),
        retrievals=("retrievals", "sum"), retrievals_exact=("retrievals_exact", "sum"),
        errors=("is_error", "sum"),
    )  # fmt: skip
    sessions = per.groupby(["server", "arm"], sort=False).agg(
        sessions=("seed", "size"), tokens_per_session=("tokens", "mean"),
        hint_tokens_per_session=("hint_tokens", "mean"),
        retrieved_tokens_per_session=("retrieved_tokens", "mean"),
    )  # fmt: skip
    tuner = ev.groupby(["server", "arm"], sort=False)[["n_changes", "n_applied"]].first()
    out = sessions.join(calls).join(tuner).reset_index()
    out["dedup_hit_rate"] = out["dedup_hits"] / out["calls"]
    order = {a: i for i, a in enumerate(ARMS)}
    out = out.sort_values(["server", "arm"], key=lambda s: s.map(order) if s.name == "arm"
                          else s, kind="stable").reset_index(drop=True)  # fmt: skip
    for col in COMPARED:
        default = out[out["arm"] == DEFAULT].set_index("server")[col]
        out[f"{col}_vs_default"] = out[col] - out["server"].map(default)
    out["tokens_change"] = out["tokens_per_session"] / out["server"].map(
        out[out["arm"] == DEFAULT].set_index("server")["tokens_per_session"]) - 1.0  # fmt: skip
    read = out["tokens_per_session"] + out["retrieved_tokens_per_session"]
    by_arm = {arm: read[out["arm"] == arm].set_axis(out.loc[out["arm"] == arm, "server"])
              for arm in (DEFAULT, TUNED)}  # fmt: skip
    out["default_tokens"] = out["server"].map(by_arm[DEFAULT]).astype(float)
    out["tuned_tokens"] = out["server"].map(by_arm[TUNED]).astype(float)
    out["tuned_saving_pct"] = 100.0 * (1.0 - out["tuned_tokens"] / out["default_tokens"])
    out["target_saving_pct"] = TARGET_SAVING_PCT
    out["meets_target"] = (out["tuned_saving_pct"] >= TARGET_SAVING_PCT - 1e-9).astype("boolean")
    out.loc[out["tuned_saving_pct"].isna(), "meets_target"] = pd.NA
    applied = ev[ev["arm"] == TUNED].groupby("server", sort=False)["tuned_applied"].first()
    out["tuned_applied"] = out["server"].map(applied).fillna("").astype(str)
    cols = ["server", "arm", "sessions", "calls", "tokens_per_session", "dedup_hits",
            "dedup_hit_rate", "hint_tokens_per_session", "retrievals", "retrievals_exact",
            "retrieved_tokens_per_session", "errors", "n_changes", "n_applied",
            *(f"{c}_vs_default" for c in COMPARED), "tokens_change", "default_tokens",
            "tuned_tokens", "tuned_saving_pct", "target_saving_pct", "meets_target",
            "tuned_applied"]  # fmt: skip
    return out[cols]


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per server: default and tuned tokens per held-out session, the saving in
    percent and whether it meets the target (the summary's per-server columns)."""
    cols = ["server", "default_tokens", "tuned_tokens", "tuned_saving_pct", "meets_target",
            "tuned_applied"]  # fmt: skip
    return summary[cols].drop_duplicates("server").reset_index(drop=True)
