"""``tersetalk mcp-experiment``: the proxy measured on real MCP servers.

  tersetalk mcp-experiment env --server sqlite --requirements envs/mcp-server-sqlite.txt \\
      --dest results/cache/mcp-envs/sqlite --out results/mcp/envs/sqlite.json
  tersetalk mcp-experiment database --hotpotqa ... --toolresponses ... --out db.sqlite
  tersetalk mcp-experiment repository --out repo
  tersetalk mcp-experiment run --server sqlite --env-info results/mcp/envs/sqlite.json \\
      --target db.sqlite --budgets null,1000 --out results/mcp/sqlite.parquet
  tersetalk mcp-experiment report --runs results/mcp/*.parquet --csv summary.csv \\
      --out-stem figures/mcp

Tuned against default: training sessions with telemetry, the tuner, then
disjoint evaluation sessions with the default config and with the tuned file:

  tersetalk mcp-experiment tuned-train --server sqlite --env-info ... --target db.sqlite \\
      --telemetry-dir tel --out train.parquet
  tersetalk mcp tune analyze --telemetry-dir tel --out tuned.yaml --evidence ev.csv
  tersetalk mcp-experiment tuned-eval --server sqlite --env-info ... --target db.sqlite \\
      --tuned tuned.yaml --evidence ev.csv --out eval.parquet
  tersetalk mcp-experiment tuned-report --runs train.parquet eval.parquet \\
      --out results/mcp/tuned.parquet --csv results/mcp/tuned_summary.csv \\
      --out-stem figures/mcp_tuned

The workflow runs them all: ``snakemake --cores all mcp`` (the tuned part alone:
``snakemake --cores all mcp_tuned``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

#: the servers the experiment knows (servers.ALL_SERVERS; spelled out here so that
#: building the command line imports nothing heavy)
SERVER_CHOICES = ("sqlite", "git", "filesystem", "memory", "everything")

log = logging.getLogger("tersetalk.mcp.experiment")


def _budgets(text: str) -> list[int | None]:
    out: list[int | None] = []
    for part in text.split(","):
        part = part.strip()
        if part in ("null", "none", ""):
            out.append(None)
            continue
        try:
            value = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"budgets are token counts or null, comma-separated; got {part!r}"
            ) from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"a budget must be at least 1 token, got {value}")
        out.append(value)
    return out


def _budget(text: str) -> int | None:
    values = _budgets(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"one budget (a token count or null), got {text!r}")
    return values[0]


def _fail(command: str, exc: Exception) -> None:
    print(f"tersetalk mcp-experiment {command}: error: {exc}", file=sys.stderr)
    raise SystemExit(1) from None


def _cmd_env(args: argparse.Namespace) -> None:
    from tersetalk.core.io import write_text_atomic

    from .servers import NPM_SERVERS, build_env, build_npm_env

    if args.server in NPM_SERVERS:
        stamp = build_npm_env(args.server, args.dest)
    elif args.requirements is None:
        raise SystemExit(f"tersetalk mcp-experiment env: error: --requirements is needed "
                         f"for {args.server} (envs/mcp-server-{args.server}.txt)")  # fmt: skip
    else:
        stamp = build_env(args.server, args.requirements, args.dest)
    info = {**stamp, "env": str(Path(args.dest).absolute())}
    write_text_atomic(json.dumps(info, indent=2, sort_keys=True) + "\n", args.out)


def _cmd_database(args: argparse.Namespace) -> None:
    from .servers import build_database

    build_database(args.out, hotpotqa=args.hotpotqa, toolresponses=args.toolresponses,
                   rows=args.rows)  # fmt: skip


def _cmd_repository(args: argparse.Namespace) -> None:
    from .servers import create_project_repository, create_repository

    (create_project_repository if args.project else create_repository)(args.out)


def _cmd_graph(args: argparse.Namespace) -> None:
    from .servers import build_memory_graph

    build_memory_graph(args.out)


def _cmd_run(args: argparse.Namespace) -> None:
    from tersetalk.core.io import write_parquet_atomic

    from .experiment import ExperimentError, proxy_config, run_server

    info = json.loads(Path(args.env_info).read_text(encoding="utf-8"))
    try:
        df = run_server(args.server, info["env"], args.target, args.budgets)
    except ExperimentError as exc:
        print(f"tersetalk mcp-experiment run: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    meta = {"server": args.server, "package": info.get("package"),
            "version": info.get("version"), "mcp_version": info.get("mcp_version"),
            "budgets": args.budgets,
            "proxy_configs": {str(b): proxy_config(b) for b in args.budgets}}  # fmt: skip
    write_parquet_atomic(df, args.out, meta)
    log.info("wrote %s (%d rows)", args.out, len(df))


def _cmd_report(args: argparse.Namespace) -> None:
    import pandas as pd

    from tersetalk.core.io import read_parquet, write_csv_atomic

    from .experiment import summarize
    from .plot import figure

    df = pd.concat([read_parquet(p, "MCP experiment") for p in args.runs], ignore_index=True)
    summary = summarize(df)
    write_csv_atomic(summary, args.csv)
    figure(df, args.out_stem)
    sessions = summary[summary["tool"] == "(session)"]
    for r in sessions.itertuples():
        log.info("%s/%s: %d tokens (direct %d, saving %.1f%%), %d dedup hits, %d invalidated, "
                 "%d/%d retrievals exact, median proxy/downstream time %.2f", r.server, r.arm,
                 r.tokens, r.direct_tokens, 100 * r.saving, r.dedup_hits, r.invalidated,
                 r.retrievals_exact, r.retrievals, r.t_pipeline_ratio_median)  # fmt: skip


def _cmd_tuned_train(args: argparse.Namespace) -> None:
    from tersetalk.core.io import write_parquet_atomic

    from .experiment import ExperimentError
    from .tuned import default_config, split_seeds, train_server

    info = json.loads(Path(args.env_info).read_text(encoding="utf-8"))
    try:
        seeds, _ = split_seeds(args.sessions, 1)
        df = train_server(args.server, info["env"], args.target, args.sessions, args.steps,
                          args.budget, args.telemetry_dir)  # fmt: skip
    except ExperimentError as exc:
        _fail("tuned-train", exc)
    meta = {"server": args.server, "split": "train", "seeds": seeds, "steps": args.steps,
            "budget": args.budget, "proxy_config": default_config(args.budget),
            "version": info.get("version")}  # fmt: skip
    write_parquet_atomic(df, args.out, meta)
    log.info("wrote %s (%d rows, %d training sessions)", args.out, len(df), len(seeds))


def _cmd_tuned_eval(args: argparse.Namespace) -> None:
    from tersetalk.core.io import write_parquet_atomic

    from .experiment import ExperimentError
    from .tuned import default_config, evaluate_server, split_seeds, tuner_changes

    info = json.loads(Path(args.env_info).read_text(encoding="utf-8"))
    try:
        _, seeds = split_seeds(1, args.sessions)
        _, _, evidence = tuner_changes(args.tuned, args.evidence)
        df = evaluate_server(args.server, info["env"], args.target, args.sessions, args.steps,
                             args.budget, args.tuned, args.evidence)  # fmt: skip
    except (ExperimentError, OSError) as exc:
        _fail("tuned-eval", exc)
    meta = {"server": args.server, "split": "eval", "seeds": seeds, "steps": args.steps,
            "budget": args.budget, "proxy_config": default_config(args.budget),
            "tuned": Path(args.tuned).read_text(encoding="utf-8"), "evidence": evidence,
            "version": info.get("version")}  # fmt: skip
    write_parquet_atomic(df, args.out, meta)
    log.info("wrote %s (%d rows, %d evaluation sessions, tuner: %d change(s), %d applied)",
             args.out, len(df), len(seeds), df["n_changes"].iloc[0],
             df["n_applied"].iloc[0])  # fmt: skip


def _cmd_tuned_report(args: argparse.Namespace) -> None:
    import pandas as pd

    from tersetalk.core.io import read_parquet, write_csv_atomic, write_parquet_atomic

    from .tuned import TARGET_SAVING_PCT, TunedExperimentError, headline, summarize
    from .tuned_plot import figure

    df = pd.concat([read_parquet(p, "tuned MCP experiment") for p in args.runs],
                   ignore_index=True)  # fmt: skip
    try:
        summary = summarize(df)
    except TunedExperimentError as exc:
        _fail("tuned-report", exc)
    write_parquet_atomic(df, args.out, {"runs": [str(p) for p in args.runs]})
    write_csv_atomic(summary, args.csv)
    figure(df, args.out_stem)
    for r in summary.itertuples():
        log.info("%s/%s: %.0f tokens/session (%+.1f%% vs default), dedup hit rate %.3f, "
                 "%.0f hint tokens/session, %d retrievals (%d exact); tuner %d change(s), "
                 "%d applied", r.server, r.arm, r.tokens_per_session, 100 * r.tokens_change,
                 r.dedup_hit_rate, r.hint_tokens_per_session, r.retrievals,
                 r.retrievals_exact, r.n_changes, r.n_applied)  # fmt: skip
    heads = headline(summary)
    for r in heads.itertuples():
        verdict = "meets" if r.meets_target == True else "does not meet"  # noqa: E712
        log.info("%s: held-out sessions read %.0f tokens with the default config, %.0f tuned: "
                 "%.1f%% saved, %s the %.0f%% target (applied: %s)", r.server,
                 r.default_tokens, r.tuned_tokens, r.tuned_saving_pct, verdict,
                 TARGET_SAVING_PCT, r.tuned_applied or "nothing")  # fmt: skip
    met = int((heads["meets_target"] == True).sum())  # noqa: E712 (a nullable boolean)
    log.info("the tuned config saves at least %.0f%% over the default on %d of %d server(s)",
             TARGET_SAVING_PCT, met, len(heads))  # fmt: skip


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp-experiment", help="the proxy on real MCP servers",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    s = p.add_subparsers(dest="mcp_command", required=True)

    e = s.add_parser("env", help="build (or reuse) a server's own venv from exact pins "
                     "(a Node server: its npm package in a folder of its own)")  # fmt: skip
    e.add_argument("--server", required=True, choices=SERVER_CHOICES)
    e.add_argument("--requirements", type=Path,
                   help="envs/mcp-server-*.txt (the Python servers only)")  # fmt: skip
    e.add_argument("--dest", required=True, type=Path, help="the venv's folder")
    e.add_argument("--out", required=True, type=Path, help="JSON: the venv, versions, hash")
    e.set_defaults(func=_cmd_env)

    d = s.add_parser("database", help="the SQLite database from shipped data")
    d.add_argument("--hotpotqa", required=True, type=Path, help="HotpotQA dev .jsonl.gz")
    d.add_argument("--toolresponses", required=True, type=Path, help="toolresponses json.jsonl")
    d.add_argument("--rows", type=int, default=120, help="rows per table (120)")
    d.add_argument("--out", required=True, type=Path)
    d.set_defaults(func=_cmd_database)

    r = s.add_parser("repository", help="a throwaway git repository with a few commits")
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("--project", action="store_true",
                   help="the tuned experiment's project instead: a Python package of 28 "
                   "files and 36 commits of real diffs, one edit left uncommitted")  # fmt: skip
    r.set_defaults(func=_cmd_repository)

    g = s.add_parser("graph", help="the tuned experiment's knowledge graph for the memory "
                     "server (JSON lines: 28 entities, 49 relations)")  # fmt: skip
    g.add_argument("--out", required=True, type=Path)
    g.set_defaults(func=_cmd_graph)

    x = s.add_parser("run", help="the scripted session, direct and through the proxy")
    x.add_argument("--server", required=True, choices=SERVER_CHOICES)
    x.add_argument("--env-info", required=True, type=Path, help="JSON from `env`")
    x.add_argument("--target", type=Path, help="database file, repository or folder (not "
                   "for memory and everything)")  # fmt: skip
    x.add_argument("--budgets", type=_budgets, default=[None],
                   help="proxy arms: token budgets or null (lossless), by commas")  # fmt: skip
    x.add_argument("--out", required=True, type=Path, help="Parquet, one row per arm and step")
    x.set_defaults(func=_cmd_run)

    t = s.add_parser("report", help="the summary CSV and the figure")
    t.add_argument("--runs", nargs="+", required=True, type=Path)
    t.add_argument("--csv", required=True, type=Path)
    t.add_argument("--out-stem", required=True, help="figure path without extension")
    t.set_defaults(func=_cmd_report)

    def session_options(q: argparse.ArgumentParser, which: str) -> None:
        q.add_argument("--server", required=True, choices=["sqlite", "git", "memory"],
                       help="the real MCP server (its venv from `env`)")  # fmt: skip
        q.add_argument("--env-info", required=True, type=Path, help="JSON from `env`")
        q.add_argument("--target", required=True, type=Path,
                       help="the database file, repository or memory graph file (copied "
                       "per session)")  # fmt: skip
        q.add_argument("--sessions", type=int, default=3,
                       help=f"{which} sessions, one per seed (default %(default)s)")  # fmt: skip
        q.add_argument("--steps", type=int, default=30,
                       help="steps per session, the tool list included (default %(default)s);"
                       " the tuner's R1/R2 need >= 20 calls per endpoint over the training"
                       " sessions")  # fmt: skip
        q.add_argument("--budget", type=_budget, default=None,
                       help="the proxy's token budget per tool result, or null for lossless "
                       "(default null)")  # fmt: skip

    tt = s.add_parser("tuned-train", help="training sessions through the default proxy, "
                      "writing the local telemetry the tuner reads")  # fmt: skip
    session_options(tt, "training")
    tt.add_argument("--telemetry-dir", required=True, type=Path,
                    help="the proxy's telemetry folder (for `mcp tune analyze`)")  # fmt: skip
    tt.add_argument("--out", required=True, type=Path,
                    help="Parquet, one row per training session and step")  # fmt: skip
    tt.set_defaults(func=_cmd_tuned_train)

    te = s.add_parser("tuned-eval", help="evaluation sessions (seeds disjoint from training): "
                      "direct, default proxy config, and with --tuned")  # fmt: skip
    session_options(te, "evaluation")
    te.add_argument("--tuned", required=True, type=Path,
                    help="the tuned file (`mcp tune analyze --out`)")  # fmt: skip
    te.add_argument("--evidence", type=Path,
                    help="the tuner's evidence CSV (`analyze --evidence`)")  # fmt: skip
    te.add_argument("--out", required=True, type=Path,
                    help="Parquet, one row per evaluation session, arm and step")  # fmt: skip
    te.set_defaults(func=_cmd_tuned_eval)

    tr = s.add_parser("tuned-report", help="the tuned-vs-default table and figure")
    tr.add_argument("--runs", nargs="+", required=True, type=Path,
                    help="Parquet files of tuned-train and tuned-eval")  # fmt: skip
    tr.add_argument("--out", required=True, type=Path, help="all rows in one Parquet")
    tr.add_argument("--csv", required=True, type=Path,
                    help="summary per server and arm, with the differences to default")  # fmt: skip
    tr.add_argument("--out-stem", required=True, help="figure path without extension")
    tr.set_defaults(func=_cmd_tuned_report)
