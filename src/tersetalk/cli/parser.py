"""The ``tersetalk`` command line's parser: the top-level options, the workflow's steps
(:mod:`tersetalk.cli.pipeline`), the figures (:mod:`tersetalk.cli.figures`) and the
plug-in modules' commands, each module imported only when one of its commands is parsed;
and what every parser shares (:func:`tidy_parser`)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

from tersetalk import __version__
from tersetalk.core.cliargs import LazySubParsers

__all__ = ["PLUGIN_COMMANDS", "build_parser", "plain_text", "tidy_parser"]

#: the plug-in modules' subcommands: module -> {name: one-line help}, in the order of
#: ``tersetalk --help``. Read to list them without importing a plug-in; ``tersetalk X``
#: imports X's module alone, whose ``add_commands(subparsers)`` adds X's parser (a job
#: pays for the modules it uses). tests/test_cli_imports.py checks that each
#: module adds exactly these names with these helps.
PLUGIN_COMMANDS: dict[str, dict[str, str]] = {
    "tersetalk.encoders.cli": {
        "prepare-compressor": "make LLMLingua's local model (HF folder) from the embedded GGUF",
    },
    "tersetalk.mediator.cli": {"mediator": "the Mediated Minimal-Signaling mediator"},
    "tersetalk.msp.cli": {"msp": "the Minimal Signaling Protocol"},
    "tersetalk.bench.cli": {
        "bench": "microbenchmarks MB-1..4 (parsing, stream framing, wire formats, M# store), "
        "concurrency",
    },
    "tersetalk.metrics.audit_cli": {
        "audit": "per-line token audit of run messages: payload vs protocol overhead",
    },
    "tersetalk.formats.cli": {
        "formats": "format-adaptive encoding of JSON / Markdown payloads (knapsack, hints, "
        "savings)",
    },
    "tersetalk.dashboard.cli": {
        "dashboard": "web dashboard: live mediator pipeline, live workflow runs, results browser",
    },
    "tersetalk.pipeline.stats_sim_cli": {
        "stats-sim": "simulation study of the statistics: type I error, power, interval coverage",
    },
    "tersetalk.stats.targets": {
        "targets": "the TerseTalk design's targets: measured, met / not met / inconclusive",
    },
    "tersetalk.topology.cli": {
        "topology": "the topology study's tables and figures from routed runs",
    },
    "tersetalk.pipeline.topology_signals_cli": {
        "topology-signals": "the router's signals of a sample's briefs (no Worker runs)",
        "route": "the router's signals and decision for each record of a file (offline)",
    },
    "tersetalk.topology.fit_cli": {
        "topology-fit": "fit the router's weights and θ on briefs' signals (logistic regression)",
        "topology-selection": "selection accuracy of briefs' signals, by the variant's rule and "
        "the fitted one",
        "topology-heldout": "the router on held-out briefs, leave-one-task-out and "
        "leave-one-format-out",
    },
    "tersetalk.pipeline.shards": {
        "shard-sample": "write one shard of a sample (run.shard_size examples, in sample order)",
        "merge-runs": "assemble a run file from its shards' run files",
    },
    "tersetalk.pipeline.compare": {
        "compare-runs": "compare two results folders' run files in their deterministic columns",
    },
    "tersetalk.pipeline.sensitivity": {"models": "model sensitivity (sensitivity.models)"},
    "tersetalk.mcp.cli": {
        "mcp-proxy": "an MCP server that re-encodes another MCP server's tool results",
    },
    "tersetalk.mcp.group_cli": {"mcp": "the MCP proxy's tools: tune it, read its local telemetry"},
    "tersetalk.mcp.experiment_cli": {
        "mcp-experiment": "the proxy on real MCP servers",
    },
    "tersetalk.pipeline.results_doc": {
        "results-doc": "render a model's results folder as Markdown (RESULTS.md)",
    },
    "tersetalk.core.columns": {
        "columns": "the data dictionary: every output column's type, unit and meaning",
    },
    "tersetalk.pipeline.overhead": {
        "overhead": "the workflow's own overhead: wall time against the model floor (overhead.csv)",
    },
    "tersetalk.pipeline.plan": {
        "plan": "a config's model calls and tokens counted from its DAG, and the hours they take",
    },
}


def _old_mcp_spellings(name: str, parser: argparse.ArgumentParser) -> None:
    """``tersetalk formats tune|telemetry``, the MCP proxy's tools before they moved under
    ``tersetalk mcp``: added to the formats group when it is built, here (the formats
    study stands below the MCP proxy and does not import it); each warns, then runs."""
    if name != "formats":
        return
    from tersetalk.mcp.group_cli import COMMANDS, old_spelling

    fs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for module, commands in COMMANDS.items():
        for command, help in commands.items():
            fs.add_lazy(command, help, old_spelling(module, "formats"))


_RST_ROLE = re.compile(r":[\w-]+:`~?([^`<]*?)\s*(?:<[^`>]*>)?`")
_RST_LINK = re.compile(r"`([^`<]+?)\s*<([^`>]+)>`__?")


def plain_text(text: str | None) -> str | None:
    """Help text without reStructuredText markup: docstrings double as descriptions.

    ``code`` and :role:`target` become their text (``~a.b`` its last part), a link its
    text and address, ``**bold**`` its text, and a literal-block ``::`` a colon.
    """
    if not text:
        return text

    def role(m: re.Match) -> str:
        inner = m.group(1)
        return inner.rsplit(".", 1)[-1] if m.group(0).split("`", 1)[1].startswith("~") else inner

    text = _RST_ROLE.sub(role, text)
    text = _RST_LINK.sub(r"\1 (\2)", text)
    text = re.sub(r"``(.+?)``", r"\1", text, flags=re.S)
    # bold as reStructuredText has it: not inside a path or glob (runs/**/*.parquet)
    text = re.sub(r"(?<![\w/*])\*\*(?=\S)(.+?)(?<=\S)\*\*(?![\w/*])", r"\1", text)
    text = re.sub(r"`([^`]+)`_\b", r"\1", text)
    text = re.sub(r"(?m)^\s*::\s*$\n?", "", text)
    return re.sub(r"(?m)(\S)::$", r"\1:", text)


def _subcommand_missing(parser: argparse.ArgumentParser, choices: Sequence[str]):
    listed = f": {', '.join(choices)}" if len(choices) <= 8 else ""
    see = f"see {parser.prog} --help"

    def fail(args: argparse.Namespace) -> None:
        parser.error(f"choose a subcommand{listed} ({see})")

    return fail


def tidy_parser(parser: argparse.ArgumentParser, top: bool = True) -> None:
    """What every (sub)command's parser shares, applied after the plug-ins added theirs.

    Plain help text (no RST; a subcommand without a description gets its one-line help);
    a missing subcommand is an error that lists the choices (not the name of an internal
    argument); ``-v`` is accepted after the subcommand too.
    Works on any one parser, so a parser built later (lazily) can be tidied alone.
    """
    parser.description = plain_text(parser.description)
    parser.epilog = plain_text(parser.epilog)
    if not top and not any("-v" in a.option_strings for a in parser._actions):
        parser.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            default=argparse.SUPPRESS,
            help="also log each HTTP request to the model (as tersetalk -v)",
        )
    for action in parser._actions:
        if isinstance(action.help, str):
            action.help = plain_text(action.help)
        if isinstance(action, argparse._SubParsersAction):
            _tidy_subcommands(action)
            if action.required:
                action.required = False
                parser.set_defaults(func=_subcommand_missing(parser, list(action.choices)))


def _tidy_subcommands(action: argparse._SubParsersAction) -> None:
    """:func:`tidy_parser` on each subcommand's parser; a lazy one's when it is built."""
    helps = {}
    for choice in action._choices_actions:
        choice.help = plain_text(choice.help)
        helps[choice.dest] = choice.help
    seen: set[int] = set()

    def tidy(name: str, sub: argparse.ArgumentParser) -> None:
        if not sub.description and helps.get(name):  # at least what the list says
            sub.description = helps[name][0].upper() + helps[name][1:] + "."
        if id(sub) not in seen:  # once per parser (an alias shares its parser)
            seen.add(id(sub))
            tidy_parser(sub, top=False)

    if isinstance(action, LazySubParsers):
        action.on_build.append(tidy)
        built = action.built_items()
    else:
        built = list(action.choices.items())
    for name, sub in built:
        tidy(name, sub)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line's parser (the plug-ins' parsers built when used)."""
    from tersetalk.cli.figures import add_commands as add_figure_commands
    from tersetalk.cli.pipeline import add_commands as add_step_commands

    p = argparse.ArgumentParser(
        prog="tersetalk",
        description="Measure token-efficient message protocols between LLM agents. "
        "Each subcommand is one step of the Snakemake workflow.",
    )
    p.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging verbosity (default: INFO)",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also log each HTTP request to the model (the openai backend's httpx, httpcore "
        "and openai loggers; quiet otherwise)",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", action=LazySubParsers)
    sub.on_build.append(_old_mcp_spellings)
    add_step_commands(sub)
    add_figure_commands(sub)
    for module, commands in PLUGIN_COMMANDS.items():
        sub.add_module_commands(module, commands)  # imported when one of them is parsed
    tidy_parser(p)
    return p
