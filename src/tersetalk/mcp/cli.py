"""``tersetalk mcp-proxy``: put the format-adaptive encoder in front of any MCP server.

  tersetalk mcp-proxy -- uvx mcp-server-sqlite --db-path my.db
  tersetalk mcp-proxy --proxy-config proxy.yaml --telemetry calls.jsonl -- npx -y @scope/server

Your MCP client launches the proxy instead of the server: in its config, put
``tersetalk`` as the command and ``["mcp-proxy", "--", <the server's command and
arguments>]`` as the arguments. stdout is the MCP channel; diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _cmd(args: argparse.Namespace) -> None:
    from tersetalk.mcp.config import ProxyConfigError, json_schema, load

    if args.print_schema:
        print(json.dumps(json_schema(), indent=2))
        return
    command = list(args.server)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("tersetalk mcp-proxy: error: give the downstream server's command after --, "
              "e.g. tersetalk mcp-proxy -- uvx mcp-server-git", file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    try:
        config = load(args.proxy_config)
    except ProxyConfigError as exc:
        print(f"tersetalk mcp-proxy: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.tuned is not None:
        config = _layer_tuned(args.tuned, config)
    if args.call_timeout <= 0:
        print("tersetalk mcp-proxy: error: --call-timeout must be positive", file=sys.stderr)
        raise SystemExit(2)
    import anyio

    from tersetalk.mcp.proxy import ProxyStartError, serve

    failed = None
    try:
        anyio.run(lambda: serve(command, config, telemetry=args.telemetry,
                                call_timeout_s=args.call_timeout))  # fmt: skip
    except* OSError as group:  # the command does not exist or cannot run
        failed = f"cannot start {command[0]!r}: {_first(group)}"
    except* ProxyStartError as group:
        failed = str(_first(group))
    if failed:
        print(f"tersetalk mcp-proxy: error: {failed}", file=sys.stderr)
        raise SystemExit(2)


def _layer_tuned(path: Path, config):
    """The tuned file's proxy-mappable knobs over ``config``; says on stderr what was
    applied and what the proxy has no mechanism for yet."""
    from tersetalk.mcp.tune import TuneError, layer_tuned

    try:
        config, applied, missing, eff = layer_tuned(path, config)
    except TuneError as exc:
        print(f"tersetalk mcp-proxy: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    shown = ", ".join(f"{k} ({eff.source(k)})" for k in applied) or "none"
    print(f"tersetalk mcp-proxy: tuned {path}: applied {shown}", file=sys.stderr)
    if missing:
        print(f"tersetalk mcp-proxy: tuned {path}: not implemented by the proxy, ignored: "
              f"{', '.join(missing)}", file=sys.stderr)  # fmt: skip
    return config


def _first(group: BaseException) -> BaseException:
    """The first exception of a (nested) exception group, as the task groups raise it."""
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    return group


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mcp-proxy",
        help="an MCP server that re-encodes another MCP server's tool results",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--proxy-config", type=Path, metavar="FILE",
                   help="the proxy's YAML or TOML settings (see --print-schema); "
                   "default: lossless, o200k_base, dedup of 5 results")  # fmt: skip
    from tersetalk.cliargs import add_renamed_option

    add_renamed_option(p, "--config", "--proxy-config")
    p.add_argument("--telemetry", type=Path,
                   help="append one JSON line per tool call here (tokens in and out, hints, "
                   "dedup hits, invalidations, downstream and proxy seconds)")  # fmt: skip
    p.add_argument("--tuned", type=Path, metavar="FILE",
                   help="a tuned configuration (tersetalk formats tune analyze --out): its "
                   "dedup knobs are layered over --proxy-config at start; knobs the proxy "
                   "does not implement are listed on stderr")  # fmt: skip
    p.add_argument("--call-timeout", type=float, default=600.0, metavar="S",
                   help="a downstream request unanswered after S seconds is an MCP error "
                   "(default %(default)g)")  # fmt: skip
    p.add_argument("--print-schema", action="store_true",
                   help="print the config file's JSON Schema and exit")  # fmt: skip
    p.add_argument("server", nargs=argparse.REMAINDER,
                   help="-- then the downstream server's command and its arguments")  # fmt: skip
    p.set_defaults(func=_cmd)
