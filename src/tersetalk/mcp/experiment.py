"""The proxy in front of real MCP servers: a scripted agent session, with and without it.

Each server (:mod:`tersetalk.mcp.servers`) is driven by the official SDK's client
(``stdio_client`` + ``ClientSession``) through one scripted session: list the tools,
query, read, repeat the same call, write, read again. The session runs once directly
against the server (arm ``direct``) and once through ``tersetalk mcp-proxy`` per proxy
budget (arm ``lossless`` for ``budget: null``, ``budget_<N>`` otherwise), each arm on a
fresh copy of the server's data (a write in one arm never shows in another). The client
pauses 1 s after listing the tools (:data:`PAUSE_S`), as a client whose model reads the
list before it calls; then three launches per arm, the arms in turn, time initialize and
the session's first tool called at once (:data:`STARTUP_LAUNCHES`, medians kept): what
the proxy's own start-up costs a client that does not pause.

A row per (arm, step): the text the client received and its o200k tokens beside the
direct arm's for the same step, the proxy's telemetry for the call (kind, dedup hit,
invalidations, hints, its own time and the downstream's), and for every overflow hint
a call of the retrieval tool ``tersetalk_get`` whose answer is checked against the
part of the direct result the hint says was elided. Timing columns start with ``t_``
(:func:`tersetalk.core.records.deterministic_columns`); every other column is the same on
every run of the same config.

With ``telemetry_dir`` (default None: nothing written) each proxied session also writes
the proxy's local telemetry there (:mod:`tersetalk.mcp.telemetry`), one events file and
one summary per arm, so the tuner can be run on the experiment's own sessions; the
rows returned are the same either way.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tersetalk.core.tokens import count_tokens

from .servers import GIT_ENV, PENDING, launch_command

log = logging.getLogger(__name__)

TOKENIZER = "o200k_base"
#: the second tokenizer every token count is also reported under
TOKENIZER_ALT = "cl100k_base"
RETRIEVAL_TOOL = "tersetalk_get"
LIST_STEP = "tools/list"
PASSED_ENV = ("PYTHONPATH", "TIKTOKEN_CACHE_DIR", "XDG_CACHE_HOME", "TERSETALK_TELEMETRY")
DIRECT = "direct"


class ExperimentError(RuntimeError):
    """The experiment could not run a session (a server or the proxy failed to start)."""


@dataclass(frozen=True)
class Step:
    role: str  # list | query | read | repeat | write | reread
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


UPDATE = ("UPDATE questions SET level = 'checked' "
          "WHERE id IN (SELECT id FROM questions ORDER BY id LIMIT 3)")  # fmt: skip
INSERT = ("INSERT INTO questions VALUES "
          "('zz-added', 'Is this row new?', 'yes', 'comparison', 'easy', 2, 10)")  # fmt: skip


def sqlite_script() -> list[Step]:
    """list, describe, a large SELECT, the same SELECT, a write, the SELECT again."""
    select = "SELECT * FROM questions ORDER BY id"
    return [
        Step("list", LIST_STEP),
        Step("query", "list_tables"),
        Step("query", "describe_table", {"table_name": "questions"}),
        Step("read", "read_query", {"query": select}),
        Step("read", "read_query", {"query": "SELECT * FROM payloads ORDER BY id"}),
        Step("repeat", "read_query", {"query": select}),
        Step("repeat", "describe_table", {"table_name": "questions"}),
        Step("write", "write_query", {"query": UPDATE}),
        Step("write", "write_query", {"query": INSERT}),
        Step("reread", "read_query", {"query": select}),
        Step("reread", "read_query", {"query": "SELECT COUNT(*) AS n FROM questions"}),
    ]


def git_script(repo: str) -> list[Step]:
    """status, log, show, diff, the same log and show again, add + commit, status and log."""
    r = {"repo_path": repo}
    return [
        Step("list", LIST_STEP),
        Step("query", "git_status", r),
        Step("read", "git_log", {**r, "max_count": 10}),
        Step("read", "git_show", {**r, "revision": "HEAD~1"}),
        Step("read", "git_diff_unstaged", r),
        Step("repeat", "git_log", {**r, "max_count": 10}),
        Step("repeat", "git_show", {**r, "revision": "HEAD~1"}),
        Step("write", "git_add", {**r, "files": sorted(PENDING)}),
        Step("write", "git_commit", {**r, "message": "Count characters"}),
        Step("reread", "git_status", r),
        Step("reread", "git_log", {**r, "max_count": 10}),
    ]


def filesystem_script(root: str) -> list[Step]:
    """The reference filesystem server on a copy of the repository: list, tree, reads
    (source, Markdown), the tree and a read again, a write, the listing and read again."""
    tree = {"path": root, "excludePatterns": [".git"]}
    source = f"{root}/wordcount.py"
    return [
        Step("list", LIST_STEP),
        Step("query", "list_allowed_directories"),
        Step("query", "list_directory", {"path": root}),
        Step("read", "directory_tree", tree),
        Step("read", "read_text_file", {"path": f"{root}/wordcount.py"}),
        Step("read", "read_multiple_files", {"paths": [source, f"{root}/README.md"]}),
        Step("repeat", "directory_tree", tree),
        Step("repeat", "read_text_file", {"path": f"{root}/wordcount.py"}),
        Step("write", "write_file", {"path": f"{root}/NOTES.md", "content": "# Notes\n"}),
        Step("reread", "list_directory", {"path": root}),
        Step("reread", "directory_tree", tree),
    ]


def memory_script() -> list[Step]:
    """The reference memory server (a knowledge graph in a file of the arm's own): two
    writes, the graph, a search, the graph again, a write, the graph again."""
    people = [{"name": f"person_{i}", "entityType": "person",
               "observations": [f"works on module_{i % 5}", f"joined in 20{10 + i}"]}
              for i in range(12)]  # fmt: skip
    knows = [{"from": f"person_{i}", "to": f"person_{(i + 1) % 12}", "relationType": "knows"}
             for i in range(12)]  # fmt: skip
    moved = {"entityName": "person_4", "contents": ["moved to module_9"]}
    return [
        Step("list", LIST_STEP),
        Step("write", "create_entities", {"entities": people}),
        Step("write", "create_relations", {"relations": knows}),
        Step("read", "read_graph"),
        Step("query", "search_nodes", {"query": "module_3"}),
        Step("read", "open_nodes", {"names": ["person_1", "person_2", "person_3"]}),
        Step("repeat", "read_graph"),
        Step("repeat", "search_nodes", {"query": "module_3"}),
        Step("write", "add_observations", {"observations": [moved]}),
        Step("reread", "read_graph"),
    ]


def everything_script() -> list[Step]:
    """The reference everything server: the tools a client without sampling, elicitation
    or roots is offered, each structured one twice."""
    return [
        Step("list", LIST_STEP),
        Step("query", "echo", {"message": "hello from the experiment"}),
        Step("query", "get-sum", {"a": 2, "b": 40}),
        Step("read", "get-structured-content", {"location": "Chicago"}),
        Step("read", "get-resource-links", {"count": 5}),
        Step("read", "get-annotated-message", {"messageType": "success"}),
        Step("read", "trigger-long-running-operation", {"duration": 0.2, "steps": 2}),
        Step("repeat", "get-structured-content", {"location": "Chicago"}),
        Step("repeat", "get-resource-links", {"count": 5}),
    ]


def script_for(server: str, data: str | None) -> list[Step]:
    """The scripted session of ``server`` on its data (a path; None where it has none)."""
    if server == "sqlite":
        return sqlite_script()
    if server == "git":
        return git_script(str(data))
    if server == "filesystem":
        return filesystem_script(str(data))
    if server == "memory":
        return memory_script()
    if server == "everything":
        return everything_script()
    raise ExperimentError(f"no scripted session for the server {server!r}")


#: tools that change what other tools read (the proxy invalidates its cache on them)
WRITE_TOOLS = ("write_query", "create_table", "append_insight", "git_add", "git_commit",
               "git_reset", "git_checkout", "git_create_branch", "write_file", "edit_file",
               "create_directory", "move_file", "create_entities", "create_relations",
               "add_observations", "delete_entities", "delete_observations",
               "delete_relations")  # fmt: skip


def proxy_config(budget: int | None) -> dict[str, Any]:
    """The proxy's config for one arm: the budget, dedup with the write tools named."""
    return {
        "budget": budget,
        "tokenizer": TOKENIZER,
        "hints": {"metadata": True, "near_ref": False},
        "dedup": {
            "enabled": True,
            "lru_size": 64,
            "min_body_chars": 200,
            "write_tools": list(WRITE_TOOLS),
        },  # fmt: skip
    }


def arm_name(budget: int | None) -> str:
    return "lossless" if budget is None else f"budget_{budget}"


# ---- the client side --------------------------------------------------------------------

_HINT_CALL = re.compile(r"call " + RETRIEVAL_TOOL + r"[ (](.*?)\)?\]$")


def overflow_calls(text: str) -> list[dict[str, Any]]:
    """The retrieval calls the overflow hints of ``text`` name (their JSON arguments)."""
    calls = []
    for line in text.split("\n"):
        if not line.startswith("> [+"):
            continue
        m = _HINT_CALL.search(line)
        if not m:
            continue
        raw = m.group(1).strip()
        try:
            args = json.loads(raw)
        except ValueError:  # ref="ab12", path="$.x[5:]"
            args = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', raw))
        calls.append(args)
    return calls


def _text(result: Any) -> str:
    """The text of a tool result: its text contents joined by newlines."""
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def _tools_text(tools: Any) -> str:
    """The tool list as the client's model would read it: compact JSON, sorted keys."""
    dumped = [t.model_dump(mode="json", exclude_none=True, by_alias=True) for t in tools.tools]
    return json.dumps(dumped, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _server_params(command: Sequence[str], cwd: str) -> Any:
    """The SDK's launch parameters for ``command`` in ``cwd``. The SDK passes a server
    only a few variables (PATH, HOME...): the proxy is this project's code and must see
    the same checkout and tokenizer cache, and git the fixed identity and dates."""
    from mcp import StdioServerParameters

    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    return StdioServerParameters(command=command[0], args=list(command[1:]), cwd=cwd,
                                 env={**GIT_ENV, **env})  # fmt: skip


async def _session(command: Sequence[str], steps: Sequence[Step], retrieve: bool,
                   cwd: str, pause_s: float = 0.0) -> list[dict]:  # fmt: skip
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    params = _server_params(command, cwd)
    out: list[dict] = []
    with open(os.path.join(cwd, "stderr.log"), "w", encoding="utf-8") as errlog:
        started = time.perf_counter()  # initialize as a client sees it: from the launch
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                initialized = time.perf_counter() - started
                for i, step in enumerate(steps):
                    t0 = time.perf_counter()
                    if step.tool == LIST_STEP:
                        text, is_error = _tools_text(await session.list_tools()), False
                    else:
                        res = await session.call_tool(step.tool, step.arguments)
                        text, is_error = _text(res), bool(res.is_error)
                    row = {"step": i, "text": text, "is_error": is_error,
                           "t_client_s": time.perf_counter() - t0, "retrievals": [],
                           "t_initialize_s": initialized}  # fmt: skip
                    if retrieve:
                        for args in overflow_calls(text):
                            t1 = time.perf_counter()
                            got = await session.call_tool(RETRIEVAL_TOOL, args)
                            row["retrievals"].append({"arguments": args, "text": _text(got),
                                                      "is_error": bool(got.is_error),
                                                      "t_s": time.perf_counter() - t1})  # fmt: skip
                    out.append(row)
                    if step.tool == LIST_STEP and pause_s:
                        await anyio.sleep(pause_s)
    return out


def run_session(command: Sequence[str], steps: Sequence[Step], *, retrieve: bool = False,
                cwd: str | Path | None = None, pause_s: float = 0.0) -> list[dict]:  # fmt: skip
    """Replay ``steps`` against the MCP server ``command`` starts; one dict per step
    (text, is_error, client time, retrieval calls made for its overflow hints).
    ``pause_s``: the client waits this long after it listed the tools, as a client
    whose model reads the list before it calls a tool."""
    import anyio

    cwd = str(cwd or tempfile.gettempdir())
    try:
        return anyio.run(_session, list(command), list(steps), retrieve, cwd, pause_s)
    except Exception as exc:
        err = Path(cwd, "stderr.log")
        tail = err.read_text(encoding="utf-8", errors="replace")[-2000:] if err.exists() else ""
        raise ExperimentError(
            f"session with {command[:3]}... failed: {type(exc).__name__}: {exc}\n"
            f"server stderr:\n{tail}"
        ) from exc


async def _startup(command: Sequence[str], step: Step, cwd: str) -> tuple[float, float]:
    """One launch: initialize (from the launch), then the tool list and ``step`` at once,
    as a client that calls a tool the moment it can; (initialize s, the call's s)."""
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    params = _server_params(command, cwd)
    with open(os.path.join(cwd, "stderr.log"), "w", encoding="utf-8") as errlog:
        started = time.perf_counter()
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                initialized = time.perf_counter() - started
                await session.list_tools()
                t0 = time.perf_counter()
                await session.call_tool(step.tool, step.arguments)
                return initialized, time.perf_counter() - t0


def startup_times(command: Sequence[str], step: Step, cwd: str | Path) -> tuple[float, float]:
    """:func:`_startup` run once (``cwd``: the launch's folder, its data a fresh copy)."""
    import anyio

    try:
        return anyio.run(_startup, list(command), step, str(cwd))
    except Exception as exc:
        raise ExperimentError(f"start-up launch of {command[:3]}... failed: "
                              f"{type(exc).__name__}: {exc}") from exc  # fmt: skip


def proxy_command(config: Path, telemetry: Path, downstream: Sequence[str],
                  telemetry_dir: Path | None = None) -> list[str]:  # fmt: skip
    local = [] if telemetry_dir is None else ["--telemetry-dir", str(telemetry_dir)]
    return [sys.executable, "-m", "tersetalk", "mcp-proxy", "--proxy-config", str(config),
            "--telemetry", str(telemetry), *local, "--", *downstream]  # fmt: skip


def read_telemetry(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


# ---- one server, every arm ---------------------------------------------------------------


def _structured(text: str) -> Any:
    """The value of a JSON or Python-literal result (None for anything else)."""
    from .literal import parse_literal

    try:
        return json.loads(text)
    except ValueError:
        return parse_literal(text)


def _expected_part(value: Any, args: dict[str, Any]) -> Any:
    from .session import resolve

    part = resolve(value, args.get("path") or "$")
    keys = args.get("keys")
    if keys and isinstance(part, dict):
        part = {k: v for k, v in part.items() if k in keys}
    return part


def _retrieval_columns(retrievals: list[dict], direct_text: str) -> dict[str, Any]:
    """How many overflow hints were followed and how many returned exactly the elided part
    of the direct result (same value, and the text equal to its compact JSON)."""
    from tersetalk.formats.container import compact_json
    from tersetalk.formats.tree import same_value

    exact = 0
    value = _structured(direct_text) if retrievals else None
    for r in retrievals:
        if r["is_error"] or value is None:
            continue
        try:
            want = _expected_part(value, r["arguments"])
            got = json.loads(r["text"])
        except (ValueError, LookupError):
            continue
        exact += bool(same_value(got, want) and r["text"] == compact_json(want))
    return {"retrievals": len(retrievals), "retrievals_exact": exact,
            "retrieved_tokens": sum(count_tokens(r["text"], TOKENIZER) for r in retrievals),
            "retrieval_args": json.dumps([r["arguments"] for r in retrievals], sort_keys=True),
            "t_retrieval_s": sum(r["t_s"] for r in retrievals)}  # fmt: skip


def _fresh_target(server: str, target: Path | None, workdir: Path) -> Path | None:
    """A private copy of the database, repository or folder for one arm; for the memory
    server a new file of the arm's own (its graph starts empty), for everything none."""
    if server == "memory":
        return workdir / "memory.jsonl"
    if target is None:
        return None
    dest = workdir / target.name
    if target.is_dir():
        # Snakemake marks a directory output with a file of its own inside: not the
        # repository's (git status would list it as untracked)
        shutil.copytree(target, dest, symlinks=True,
                        ignore=shutil.ignore_patterns(".snakemake_timestamp"))  # fmt: skip
    else:
        shutil.copy2(target, dest)
    return dest


#: the client's pause after listing the tools in the scripted sessions (s): a client's
#: model reads the list before it calls a tool; the start-up launches do not pause
PAUSE_S = 1.0
#: launches per arm that time initialize and a tool called at once (medians are kept)
STARTUP_LAUNCHES = 3


def _arm_command(server: str, env_dir: str | Path, work: Path, target: Path | None,
                 arm: str, budget: int | None, local: Path | None,
                 ) -> tuple[list[str], Path | None, list[Step]]:  # fmt: skip
    """An arm's launch in its folder ``work`` (a fresh copy of the data inside it): the
    command, the proxy's telemetry file (None: direct) and the script of steps."""
    import yaml

    copy = _fresh_target(server, target, work)
    # the script names the data by its path: the same for every arm (a stable name
    # inside each arm's own folder would differ per arm and per run)
    steps = script_for(server, None if copy is None else str(copy))
    # fixed git identity and dates for the server itself, whoever starts it
    env = [f"{k}={v}" for k, v in sorted(GIT_ENV.items())]
    downstream = ["env", *env, *launch_command(server, env_dir, copy)]
    if arm == DIRECT:
        return downstream, None, steps
    cfg = work / "proxy.yaml"
    cfg.write_text(yaml.safe_dump(proxy_config(budget), sort_keys=False))
    telemetry = work / "telemetry.jsonl"
    return proxy_command(cfg, telemetry, downstream, local), telemetry, steps


def run_server(server: str, env_dir: str | Path, target: str | Path | None,
               budgets: Sequence[int | None], telemetry_dir: str | Path | None = None,
               *, pause_s: float = PAUSE_S, launches: int = STARTUP_LAUNCHES,
               ) -> pd.DataFrame:  # fmt: skip
    """Every arm of one server's session: direct, then through the proxy per budget
    (each proxied arm writing local telemetry into ``telemetry_dir`` if given), then
    ``launches`` start-up launches per arm, the arms in turn (see :func:`startup_times`)."""
    target = None if target is None else Path(target).absolute()
    local = None if telemetry_dir is None else Path(telemetry_dir).absolute()
    arms = [(DIRECT, None), *((arm_name(b), b) for b in budgets)]
    runs: dict[str, tuple[list[Step], list[dict], list[dict], str]] = {}
    for arm, budget in arms:
        with tempfile.TemporaryDirectory(prefix=f"tersetalk-mcp-{server}-{arm}-") as tmp:
            work = Path(tmp)
            command, telemetry, steps = _arm_command(server, env_dir, work, target, arm,
                                                     budget, local)  # fmt: skip
            log.info("%s/%s: %d steps via %s", server, arm, len(steps), " ".join(command[:4]))
            t0 = time.perf_counter()
            got = run_session(command, steps, retrieve=arm != DIRECT, cwd=work,
                              pause_s=pause_s)  # fmt: skip
            tel = read_telemetry(telemetry) if telemetry else []
            log.info("%s/%s: done in %.1f s (%d telemetry lines)", server, arm,
                     time.perf_counter() - t0, len(tel))  # fmt: skip
            runs[arm] = (steps, got, tel, str(work))
    startup: dict[str, list[tuple[float, float]]] = {arm: [] for arm, _ in arms}
    for _ in range(launches):
        for arm, budget in arms:
            with tempfile.TemporaryDirectory(prefix=f"tersetalk-mcp-{server}-start-") as tmp:
                command, _, steps = _arm_command(server, env_dir, Path(tmp), target, arm,
                                                 budget, None)  # fmt: skip
                first = next(s for s in steps if s.tool != LIST_STEP)
                startup[arm].append(startup_times(command, first, tmp))
    medians = {arm: (float(statistics.median([t[0] for t in ts])) if ts else float("nan"),
                     float(statistics.median([t[1] for t in ts])) if ts else float("nan"))
               for arm, ts in startup.items()}  # fmt: skip
    direct = runs[DIRECT][1]
    frames = [_rows(server, arm, budget, *runs[arm][:3], direct, runs[arm][3],
                    medians[arm], medians[DIRECT])
              for arm, budget in arms]  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def _rows(server: str, arm: str, budget: int | None, steps: list[Step], got: list[dict],
          telemetry: list[dict], direct: list[dict], workdir: str,
          startup: tuple[float, float] = (float("nan"), float("nan")),
          direct_startup: tuple[float, float] = (float("nan"), float("nan")),
          ) -> pd.DataFrame:  # fmt: skip
    # the proxy logs one line per tools/call, retrieval calls included, in call order
    calls = iter(telemetry)
    rows = []
    for step, res, base in zip(steps, got, direct, strict=True):
        # arguments name each arm's private copy of the data: written with a stable name
        args = json.dumps(step.arguments, sort_keys=True).replace(workdir, "<data>")
        tokens = count_tokens(res["text"], TOKENIZER)
        direct_tokens = count_tokens(base["text"], TOKENIZER)
        row: dict[str, Any] = {
            "server": server, "arm": arm, "budget": budget, "step": res["step"],
            "role": step.role, "tool": step.tool, "arguments": args,
            "is_error": res["is_error"], "chars": len(res["text"]), "tokens": tokens,
            "direct_tokens": direct_tokens, "saved_tokens": direct_tokens - tokens,
            "tokens_cl100k": count_tokens(res["text"], TOKENIZER_ALT),
            "direct_tokens_cl100k": count_tokens(base["text"], TOKENIZER_ALT),
            "identical_to_direct": res["text"] == base["text"],
        }  # fmt: skip
        tel: dict[str, Any] = {}
        if arm != DIRECT and step.tool != LIST_STEP:
            tel = next(calls, {})
            if tel and tel.get("tool") != step.tool:
                raise ExperimentError(f"telemetry out of step: {tel.get('tool')} for {step.tool}")
            for _ in res["retrievals"]:
                next(calls, None)
        row.update({
            "kind": "list" if step.tool == LIST_STEP else tel.get("kind", "passthrough"),
            "dedup_hit": bool(tel.get("dedup_hit", False)),
            "invalidated": int(tel.get("invalidated", 0) or 0),
            "hints": ",".join(tel.get("hints", []) or []),
            "proxy_raw_tokens": tel.get("raw_tokens"),
            "proxy_sent_tokens": tel.get("sent_tokens"),
            "t_downstream_s": tel.get("downstream_s"),
            "t_pipeline_s": tel.get("pipeline_s"),
            "t_client_s": res["t_client_s"],
        })  # fmt: skip
        row["round_trip"] = (round_trip(res["text"], base["text"])
                             if budget is None and row["kind"] == "encoded" else "")  # fmt: skip
        row.update(_retrieval_columns(res["retrievals"], base["text"]))
        rows.append(row)
    df = pd.DataFrame(rows)
    for col in ("budget", "proxy_raw_tokens", "proxy_sent_tokens"):
        df[col] = df[col].astype("Int64")
    for col in ("t_downstream_s", "t_pipeline_s"):
        df[col] = df[col].astype("float64")
    # the proxy's added latency: its own processing over the downstream call, and the
    # client's view (round trip through the proxy over the direct round trip, same step)
    df["t_pipeline_ratio"] = df["t_pipeline_s"] / df["t_downstream_s"]
    df["t_client_direct_s"] = [d["t_client_s"] for d in direct]
    df["t_client_overhead_ratio"] = df["t_client_s"] / df["t_client_direct_s"] - 1.0
    df["t_added_ms"] = 1000.0 * (df["t_client_s"] - df["t_client_direct_s"])
    # the start-up launches' medians through the proxy less direct, ms: initialize
    # (launch to answer) and a tool called the moment the tools are listed
    df["t_initialize_added_ms"] = 1000.0 * (startup[0] - direct_startup[0])
    df["t_first_call_at_once_added_ms"] = 1000.0 * (startup[1] - direct_startup[1])
    return df


def round_trip(sent: str, direct: str) -> str:
    """Whether a lossless re-encoding the client received decodes, on the client's side,
    to exactly what the server sent directly: ``exact`` or ``inexact`` (also when it does
    not decode at all). Markdown must come back byte for byte; JSON and Python-literal
    results as the same value."""
    from tersetalk.formats.markdown import decode_markdown, encoded_markdown
    from tersetalk.formats.solver import decode
    from tersetalk.formats.tree import same_value

    try:
        if encoded_markdown(sent):
            return "exact" if decode_markdown(sent) == direct else "inexact"
        want = _structured(direct)
        got = decode(sent.rstrip("\n"))
    except (ValueError, LookupError, TypeError):
        return "inexact"
    return "exact" if want is not None and same_value(got, want) else "inexact"


def run_experiment(servers: dict[str, dict], budgets: Sequence[int | None],
                   telemetry_dir: str | Path | None = None) -> pd.DataFrame:  # fmt: skip
    """``servers``: name -> {"env": venv dir, "target": database or repository};
    ``telemetry_dir``: where the proxied sessions write local telemetry (None: nowhere)."""
    frames = [run_server(name, s["env"], s["target"], budgets, telemetry_dir)
              for name, s in servers.items()]  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def _p50(s: pd.Series) -> float:
    return float(s.quantile(0.5)) if s.notna().any() else float("nan")


def _p95(s: pd.Series) -> float:
    return float(s.quantile(0.95)) if s.notna().any() else float("nan")


def _count(value: str):
    return lambda s: int((s == value).sum())


#: the summary's columns: (source column, aggregation)
SUMMARY = {
    "calls": ("step", "size"),
    "direct_tokens": ("direct_tokens", "sum"),
    "tokens": ("tokens", "sum"),
    "direct_tokens_cl100k": ("direct_tokens_cl100k", "sum"),
    "tokens_cl100k": ("tokens_cl100k", "sum"),
    "round_trips_exact": ("round_trip", _count("exact")),
    "round_trips_inexact": ("round_trip", _count("inexact")),
    "dedup_hits": ("dedup_hit", "sum"),
    "invalidated": ("invalidated", "sum"),
    "retrievals": ("retrievals", "sum"),
    "retrievals_exact": ("retrievals_exact", "sum"),
    "retrieved_tokens": ("retrieved_tokens", "sum"),
    "errors": ("is_error", "sum"),
    "t_pipeline_ratio_median": ("t_pipeline_ratio", "median"),
    "t_client_overhead_ratio_median": ("t_client_overhead_ratio", "median"),
    "t_added_ms_p50": ("t_added_ms", _p50),
    "t_added_ms_p95": ("t_added_ms", _p95),
    "t_initialize_added_ms": ("t_initialize_added_ms", "median"),
    "t_first_call_at_once_added_ms": ("t_first_call_at_once_added_ms", "median"),
}

#: the summary's server name for every server's sessions taken together
ALL_SERVERS = "(all)"


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per server, arm and tool (and ``(session)``, the whole session; server ``(all)``:
    every server's sessions together, so its saving is weighted by their tokens): calls,
    o200k and cl100k tokens with and without the proxy, lossless re-encodings checked on
    the client's side (exact, inexact), dedup hits, invalidations, retrieval round trips
    (how many were exact, and the tokens they would add), median latency ratios and the
    latency the proxy adds per call as the client sees it (ms, p50 and p95; the client
    pauses after listing the tools, see :data:`PAUSE_S`), and from the start-up launches
    what it adds to initialize and to a tool called at once (medians)."""
    per_tool = df.groupby(["server", "arm", "tool"], sort=False).agg(**SUMMARY).reset_index()
    total = df.groupby(["server", "arm"], sort=False).agg(**SUMMARY).reset_index()
    total.insert(2, "tool", "(session)")
    every = df.groupby(["arm"], sort=False).agg(**SUMMARY).reset_index()
    every.insert(0, "server", ALL_SERVERS)
    every.insert(2, "tool", "(session)")
    out = pd.concat([per_tool, total, every], ignore_index=True)
    out["saving"] = 1.0 - out["tokens"] / out["direct_tokens"].where(out["direct_tokens"] > 0)
    out["saving_cl100k"] = 1.0 - out["tokens_cl100k"] / out["direct_tokens_cl100k"].where(
        out["direct_tokens_cl100k"] > 0
    )
    direct = out["arm"] == DIRECT  # the direct arm adds nothing: no latency to report
    out.loc[direct, ["t_added_ms_p50", "t_added_ms_p95", "t_initialize_added_ms",
                     "t_first_call_at_once_added_ms"]] = float("nan")  # fmt: skip
    return out
