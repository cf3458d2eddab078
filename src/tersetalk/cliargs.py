"""Options that several subcommands share, for the modules that add subcommands.

Why a module of its own on the ground floor: the plug-ins (``mediator``, ``msp``,
``mcp``, ``stats.targets``, ...) add their options here without importing
:mod:`tersetalk.cli`, which imports them (the layer test, tests/test_import_graph.py).
Reading the files ``--config`` names is :func:`tersetalk.cli.load_workflow_config`.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["DEFAULT_CONFIG", "add_config_option", "add_renamed_option"]

#: the workflow's default config (the Snakefile's ``configfile:``), relative to the
#: working directory; every ``--config`` file is layered over it
DEFAULT_CONFIG = "config/config.yaml"


def add_config_option(parser: argparse.ArgumentParser, what: str = "") -> None:
    """``--config FILE ...``: the one meaning of ``--config`` in every subcommand
    (read with :func:`tersetalk.cli.load_workflow_config`)."""
    parser.add_argument(
        "--config",
        nargs="+",
        default=[],
        metavar="FILE",
        help=f"workflow config YAML file(s), each layered over the previous and all over "
        f"{DEFAULT_CONFIG} (as snakemake --configfile does){what}",
    )


def add_renamed_option(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """A hidden ``old`` flag that still works as ``new``, with a warning.

    Why: ``--config`` names a workflow config YAML in every subcommand; a command whose
    ``--config`` used to name another kind of file keeps accepting it for a while.
    """
    target = next(a for a in parser._actions if new in a.option_strings)

    class _Renamed(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            print(f"{parser.prog}: warning: {old} is deprecated here, use {new} ({old} names "
                  "a workflow config YAML elsewhere)", file=sys.stderr)  # fmt: skip
            setattr(namespace, target.dest, target.type(values) if target.type else values)

    parser.add_argument(old, action=_Renamed, help=argparse.SUPPRESS, metavar=target.metavar,
                        default=argparse.SUPPRESS)  # fmt: skip
