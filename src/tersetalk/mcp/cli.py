"""``tersetalk mcp-proxy``: put the format-adaptive encoder in front of any MCP server.

  tersetalk mcp-proxy -- uvx mcp-server-sqlite --db-path my.db
  tersetalk mcp-proxy --proxy-config proxy.yaml --telemetry calls.jsonl -- npx -y @scope/server
  tersetalk mcp-proxy --telemetry-dir ~/.local/state/tersetalk/telemetry -- uvx mcp-server-git
  tersetalk mcp-proxy --explain -- npx -y @modelcontextprotocol/server-filesystem ~/src

Edit-safe by default: the results of a tool a client may quote back in an edit (a file
read, a diff) pass byte-exact; structured data (JSON, Python literals, database tables)
is re-encoded. --explain prints each tool's decision and why; the config's edit_safe
and tools.<name>.encode change it.

Your MCP client launches the proxy instead of the server: in its config, put
``tersetalk`` as the command and ``["mcp-proxy", "--", <the server's command and
arguments>]`` as the arguments. stdout is the MCP channel; diagnostics go to stderr.

Local telemetry (for ``tersetalk mcp tune analyze``) is off unless ``--telemetry-dir``
or the ``telemetry`` section of a ``--tuned`` file turns it on; it records shapes, sizes,
token counts and hashes, never the payloads' text, and never leaves the machine.
``TERSETALK_TELEMETRY=off`` in the proxy's environment turns it off whatever else says.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _cmd(args: argparse.Namespace) -> None:
    if args.print_schema:
        from tersetalk.mcp.config import json_schema

        print(json.dumps(json_schema(), indent=2))
        return
    command = list(args.server)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("tersetalk mcp-proxy: error: give the downstream server's command after --, "
              "e.g. tersetalk mcp-proxy -- uvx mcp-server-git", file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    if args.call_timeout <= 0:
        print("tersetalk mcp-proxy: error: --call-timeout must be positive", file=sys.stderr)
        raise SystemExit(2)
    relay = None
    if not args.explain:
        # the downstream starts first and answers the client's initialize through the
        # relay; the settings are read and the pipeline loaded after (bad settings stop
        # the downstream again)
        from tersetalk.mcp.relay import Relay

        relay = Relay(command, call_timeout_s=args.call_timeout)
        relay.spawn()
        relay.wait_answered()  # the client's initialize first, then the proxy's own work
    try:
        config, local = _settings(args)
    except BaseException:
        if relay is not None:
            relay.abort()
        raise
    if relay is None:
        _explain(command, config, args.call_timeout)
        return
    if relay.start_error is not None:  # the command does not exist or cannot run
        print(f"tersetalk mcp-proxy: error: cannot start {command[0]!r}: {relay.start_error}",
              file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    status = relay.serve(config, telemetry=args.telemetry, local_telemetry=local)
    if status:
        raise SystemExit(status)


def _settings(args: argparse.Namespace):
    """The proxy's settings (its config with the tuned file's knobs over it) and the
    local telemetry's (None: off); a bad one is one line on stderr and exit status 2."""
    from tersetalk.mcp.config import ProxyConfigError, load

    try:
        config = load(args.proxy_config)
    except ProxyConfigError as exc:
        print(f"tersetalk mcp-proxy: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    knobs, knobs_set = None, False
    if args.tuned is not None:
        config = _layer_tuned(args.tuned, config)
        knobs, knobs_set = _tuned_telemetry(args.tuned)
    return config, _local_telemetry(args.telemetry_dir, knobs, knobs_set)


def _explain(command: list[str], config, call_timeout: float) -> None:
    """``--explain``: each tool's decision, printed (on the official SDK's client)."""
    import anyio

    from tersetalk.mcp.proxy import ProxyStartError, explain

    failed = None
    try:
        lines = anyio.run(lambda: explain(command, config, call_timeout_s=call_timeout))
    except* OSError as group:
        failed = f"cannot start {command[0]!r}: {_first(group)}"
    except* ProxyStartError as group:
        failed = str(_first(group))
    if failed:
        print(f"tersetalk mcp-proxy: error: {failed}", file=sys.stderr)
        raise SystemExit(2)
    print("\n".join(lines))


def _layer_tuned(path: Path, config):
    """The tuned file's proxy-mappable knobs over ``config``; says on stderr what was
    applied and what the proxy has no mechanism for yet (the telemetry knobs are the
    local telemetry's: :func:`_tuned_telemetry`)."""
    from tersetalk.mcp.tune import TuneError, layer_tuned

    try:
        config, applied, missing, eff = layer_tuned(path, config)
    except TuneError as exc:
        print(f"tersetalk mcp-proxy: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    # the telemetry knobs are the local telemetry's (tersetalk.mcp.telemetry)
    telemetry = tuple(k for k in missing if k.startswith("telemetry."))
    missing = tuple(k for k in missing if k not in telemetry)
    applied = (*applied, *telemetry)
    shown = ", ".join(f"{k} ({eff.source(k)})" for k in applied) or "none"
    print(f"tersetalk mcp-proxy: tuned {path}: applied {shown}", file=sys.stderr)
    if missing:
        print(f"tersetalk mcp-proxy: tuned {path}: not implemented by the proxy, ignored: "
              f"{', '.join(missing)}", file=sys.stderr)  # fmt: skip
    return config


def _tuned_telemetry(path: Path):
    """The tuned file's telemetry knobs, and whether the file sets any of them (which
    turns the local telemetry on). The file was read and checked by _layer_tuned."""
    from tersetalk.mcp.tune import load_adaptive, resolve

    effective = resolve(load_adaptive(path))
    knobs_set = any(
        k.startswith("telemetry.") and v != "default" for k, v in effective.sources.items()
    )
    return effective.telemetry, knobs_set


def _local_telemetry(folder: Path | None, knobs, knobs_set: bool):
    """The local telemetry's settings (None: off), said on stderr when asked for."""
    if folder is None and not knobs_set:
        return None  # off, as resolve_settings says, without loading it (the first call waits)
    from tersetalk.mcp.telemetry import TelemetryError, resolve_settings

    try:
        settings, why = resolve_settings(folder, knobs, knobs_set)
    except TelemetryError as exc:
        print(f"tersetalk mcp-proxy: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if folder is not None or knobs_set:
        print(f"tersetalk mcp-proxy: {why}", file=sys.stderr)
    return settings


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
    from tersetalk.core.cliargs import add_renamed_option

    add_renamed_option(p, "--config", "--proxy-config")
    p.add_argument("--telemetry", type=Path,
                   help="append one JSON line per tool call here (tokens in and out, hints, "
                   "dedup hits, invalidations, downstream and proxy seconds)")  # fmt: skip
    p.add_argument("--telemetry-dir", type=Path, metavar="DIR",
                   help="write local telemetry for the tuner into DIR: per-response shapes, "
                   "sizes, tokens and hashes (never payload text) and a summary per "
                   "session; off by default; TERSETALK_TELEMETRY=off forces it off")  # fmt: skip
    p.add_argument("--tuned", type=Path, metavar="FILE",
                   help="a tuned configuration (tersetalk mcp tune analyze --out): its "
                   "dedup knobs are layered over --proxy-config at start; knobs the proxy "
                   "does not implement are listed on stderr")  # fmt: skip
    p.add_argument("--call-timeout", type=float, default=600.0, metavar="S",
                   help="a downstream request unanswered after S seconds is an MCP error "
                   "(default %(default)g)")  # fmt: skip
    p.add_argument("--explain", action="store_true",
                   help="start the server, list its tools, print for each one whether its "
                   "results are re-encoded or pass byte-exact (edit_safe) and why, "
                   "and exit")  # fmt: skip
    p.add_argument("--print-schema", action="store_true",
                   help="print the config file's JSON Schema and exit")  # fmt: skip
    p.add_argument("server", nargs=argparse.REMAINDER,
                   help="-- then the downstream server's command and its arguments")  # fmt: skip
    p.set_defaults(func=_cmd)
