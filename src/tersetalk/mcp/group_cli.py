"""``tersetalk mcp``: the proxy's own tools beside ``tersetalk mcp-proxy``.

``tersetalk mcp tune`` tunes the proxy (the LRU size from repeat distances, encode or
pass through per tool from decode failures and edit patterns) and ``tersetalk mcp
telemetry`` reads its local telemetry. Their old spellings under ``tersetalk formats``
still work and say that they moved.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from tersetalk.core.cliargs import LazySubParsers, add_module_commands

#: the group's commands: module -> {name: one-line help}
COMMANDS = {
    "tersetalk.mcp.tune_cli": {
        "tune": "tune the proxy from telemetry (rules R1-R5) or an agent's session logs "
        "(P1-P3), and show the effective configuration",
    },
    "tersetalk.mcp.telemetry_cli": {
        "telemetry": "the proxy's local telemetry: session summaries and per-endpoint fingerprints",
    },
}


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mcp",
        help="the MCP proxy's tools: tune it, read its local telemetry",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ms = p.add_subparsers(dest="mcp_command", required=True, metavar="COMMAND",
                          action=LazySubParsers)  # fmt: skip
    for module, commands in COMMANDS.items():
        ms.add_module_commands(module, commands)


def _said_moved(func: Callable[[argparse.Namespace], Any], old: str, new: str):
    def run(args: argparse.Namespace) -> Any:
        print(f"warning: `{old}` is now `{new}`; the old spelling still works but will go",
              file=sys.stderr)  # fmt: skip
        return func(args)

    return run


def _wrap(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    func = parser.get_default("func")
    if func is not None:
        parser.set_defaults(func=_said_moved(func, old, new))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                _wrap(child, f"{old} {name}", f"{new} {name}")


def old_spelling(module: str, old_group: str) -> Callable[[argparse._SubParsersAction], None]:
    """A builder adding ``module``'s commands under their old group (``tersetalk formats``),
    each of which warns on stderr that it moved under ``tersetalk mcp`` and then runs."""

    def build(sub: argparse._SubParsersAction) -> None:
        add_module_commands(module, sub)
        for name in COMMANDS[module]:
            _wrap(sub._name_parser_map[name], f"tersetalk {old_group} {name}",
                  f"tersetalk mcp {name}")  # fmt: skip

    return build
