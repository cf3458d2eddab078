"""``tersetalk``: one subcommand per workflow step.

Every Snakemake rule calls one of these, and each works alone, so a user can
rerun a single step or point a step at their own files. The parser is in
:mod:`tersetalk.cli.parser`, the workflow's steps in :mod:`tersetalk.cli.pipeline`, the
figures in :mod:`tersetalk.cli.figures`; the plug-in packages add their own commands.
Nothing in the library imports this package: it stands above everything else.
"""

from __future__ import annotations

import argparse
import logging
import sys

from tersetalk.cli.parser import PLUGIN_COMMANDS, build_parser, plain_text, tidy_parser

__all__ = ["PLUGIN_COMMANDS", "build_parser", "main", "plain_text", "tidy_parser"]


#: loggers that log one line per HTTP request at INFO (the ``openai`` backend's client);
#: quiet unless ``-v``, so a run's log is its progress, not its traffic
HTTP_LOGGERS = ("httpx", "httpcore", "openai", "httpx2", "urllib3")

#: the errors a subcommand reports as one line and exit code 2: (module, class name). Looked
#: up only in modules already imported (a module never imported raised none of its
#: errors), so a job does not import the calibration module (scipy) to catch its error.
EXPECTED_ERRORS = (
    ("tersetalk.core.configio", "ConfigError"),
    ("tersetalk.models.base", "ModelError"),
    ("tersetalk.tasks.loading", "TaskDataError"),
    ("tersetalk.pipeline.calibration", "CalibrationError"),
    ("tersetalk.core.io", "InputFileError"),
    ("tersetalk.pipeline.runner", "RunIncompleteError"),
    ("tersetalk.tasks.registry", "TaskPluginError"),
    ("tersetalk.mediator.errors", "MediatorConfigError"),
)


def _setup_logging(level: str, verbose: bool = False) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for name in HTTP_LOGGERS:  # NOTSET: the level above, as given by --log-level
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; its exit code. Ctrl-C is one line and 130 (128 + SIGINT), not a
    traceback: a run's finished examples are checkpointed as they finish, so there is
    nothing more to say than that it stopped."""
    try:
        return _main(argv)
    except* KeyboardInterrupt:  # also inside an exception group (anyio's task groups)
        pass
    # outside the handler: the traceback's frames are gone, so a progress bar they held
    # has closed its line before this one is written
    print("tersetalk: interrupted", file=sys.stderr)
    return 130


def _main(argv: list[str] | None) -> int:
    try:  # the parser lists the registered tasks: a broken task plug-in fails here
        args = _parse(argv)
    except Exception as exc:
        if not _expected_error(exc):
            raise
        print(f"tersetalk: error: {exc}", file=sys.stderr)
        return 2
    _setup_logging(args.log_level, args.verbose)
    try:
        args.func(args)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] == "tersetalk":
            raise
        # the light install (the MCP proxy's) lacks the workflow's packages
        need = "pip install -c constraints.txt -e '.[workflow]'"
        print(f"tersetalk {args.command}: error: {exc}; this command needs the workflow's "
              f"packages: {need}", file=sys.stderr)  # fmt: skip
        return 2
    except Exception as exc:
        if not _expected_error(exc):
            raise
        print(f"tersetalk {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line, parsed. ``tersetalk mcp-proxy`` is parsed by its own parser alone:
    an MCP client waits for the proxy's initialize answer, and building every other
    command's parser (the task registry among them) would add a tenth of a second to it."""
    given = sys.argv[1:] if argv is None else argv
    if given[:1] != ["mcp-proxy"]:
        return build_parser().parse_args(argv)
    from tersetalk.mcp.cli import add_commands

    p = argparse.ArgumentParser(prog="tersetalk")
    p.set_defaults(log_level="INFO", verbose=False)
    add_commands(p.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    tidy_parser(p)
    return p.parse_args(given)


def _expected_error(exc: Exception) -> bool:
    """Whether ``exc`` is one of :data:`EXPECTED_ERRORS` (or a missing file)."""
    if isinstance(exc, FileNotFoundError):
        return True
    for module, name in EXPECTED_ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(exc, cls):
            return True
    return False
