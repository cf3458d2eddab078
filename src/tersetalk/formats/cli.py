"""``tersetalk formats``: encode your own payloads, decode them back, count the savings.

tersetalk formats encode response.json --explain         # the knapsack's choice
tersetalk formats encode response.json --budget 300      # the most that fits 300 tokens
tersetalk formats encode response.json | tersetalk formats decode   # the exact JSON again
tersetalk formats savings a.json b.json README.md        # tokens per encoder, labelled
tersetalk formats shapes                                 # mckp vs compact JSON per shape
tersetalk formats experiment savings --out x.parquet     # one experiment of the study
tersetalk formats paired comprehension.parquet           # mckp vs compact JSON, per question
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tersetalk.core.cliargs import LazySubParsers

ENCODERS = ("mckp", "mckp_plain", "json_compact", "json_pretty", "toon", "csv", "markdown_table",
            "kv")  # fmt: skip


def _fail(message: str) -> None:
    print(f"tersetalk formats: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _read(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    path = Path(source)
    if not path.is_file():
        _fail(f"{source} is not a readable file (give a path, or - for stdin)")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        _fail(f"cannot read {source}: {exc}")
    return ""  # unreachable


def _parse(text: str, name: str):
    """A JSON tree, or None for Markdown (text that is not JSON but holds a GFM table)."""
    from tersetalk.formats.markdown import table_spans
    from tersetalk.formats.tree import TreeDepthError, TreeError, parse_json

    try:
        return parse_json(text)
    except TreeError as exc:
        if table_spans(text):
            return None
        if isinstance(exc, TreeDepthError):
            _fail(f"{name}: {exc}")
        _fail(f"{name} is neither JSON nor Markdown with a table ({exc})")


def _scheme(args):
    from tersetalk.formats.solver import ValueScheme

    try:
        return ValueScheme(args.value, priority=tuple(args.priority or ()))
    except ValueError as exc:
        _fail(str(exc))


def _cmd_encode(args: argparse.Namespace) -> None:
    from tersetalk.formats.markdown import encode_markdown
    from tersetalk.formats.solver import BudgetError, encode

    text = _read(args.file)
    node = _parse(text, args.file)
    if node is None:
        if args.budget is not None:
            _fail("--budget applies to JSON payloads; Markdown tables are re-encoded losslessly")
        m = encode_markdown(text, args.encoder, tokenizer=args.tokenizer)
        sys.stdout.write(m.text)
        if args.explain:
            print(
                f"markdown: {m.replaced} of {m.tables} tables re-encoded; "
                f"{m.source_tokens} -> {m.tokens} tokens ({args.tokenizer})",
                file=sys.stderr,
            )
        return
    try:
        enc = encode(
            node,
            args.encoder,
            budget=args.budget,
            tokenizer=args.tokenizer,
            method=args.method,
            scheme=_scheme(args),
        )
    except BudgetError as exc:
        _fail(str(exc))
    except ValueError as exc:
        _fail(str(exc))
    sys.stdout.write(enc.text + "\n")
    if args.explain:
        compact = encode(node, "json_compact", tokenizer=args.tokenizer).tokens
        print(
            f"{enc.encoder} ({enc.method}): {enc.tokens} tokens ({enc.tokenizer}); compact JSON "
            f"{compact}; value kept {enc.value_kept:g} of {enc.value_total:g}; "
            f"{'lossless' if enc.lossless else 'lossy: see the overflow hints'}",
            file=sys.stderr,
        )
        if enc.fallback:
            print(f"  fell back to compact JSON: {enc.fallback}", file=sys.stderr)
        if enc.aliases:
            print(f"  {enc.aliases} string prefix(es) named by alias hints", file=sys.stderr)
        for path, option in enc.choices:
            if option not in ("inline",) or path == "$":
                print(f"  {path}: {option}", file=sys.stderr)


def _cmd_decode(args: argparse.Namespace) -> None:
    from tersetalk.formats.encoders import FormatDecodeError
    from tersetalk.formats.markdown import decode_markdown, encoded_markdown
    from tersetalk.formats.solver import LossyEncodingError, decode

    text = _read(args.file)
    if encoded_markdown(text):  # Markdown whose tables were re-encoded: its exact source
        try:
            sys.stdout.write(decode_markdown(text))
        except FormatDecodeError as exc:
            _fail(str(exc))
        return
    try:
        value = decode(text.rstrip("\n"))
    except (LossyEncodingError, FormatDecodeError) as exc:
        _fail(str(exc))
    sys.stdout.write(json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n")


def _cmd_savings(args: argparse.Namespace) -> None:
    from tersetalk.formats.experiments import Item, savings, savings_by_shape
    from tersetalk.formats.tree import table_to_json

    items = []
    for f in args.files:
        text = _read(f)
        node = _parse(text, f)
        if node is not None:
            items.append(Item(f, "json", "json", node))
            continue
        from tersetalk.formats.markdown import table_spans

        for i, span in enumerate(table_spans(text)):
            try:
                items.append(
                    Item(f"{f}#t{i}", "markdown_table", "markdown_table", table_to_json(span.table))
                )
            except ValueError:
                continue
    if not items:
        _fail("no JSON payload or Markdown table in the files given")
    df = savings_by_shape(savings(items, tokenizers=(args.tokenizer,)), args.tokenizer)
    df = df[df["shape"] == "all"].drop(columns=["shape"]).sort_values("tokens")
    df.insert(1, "baseline", "json_compact")
    if args.format == "csv":
        df.to_csv(sys.stdout, index=False)
    elif args.format == "json":
        print(df.to_json(orient="records"))
    else:
        print(df.to_string(index=False, float_format=lambda x: f"{x:.1f}"))


def _cmd_shapes(args: argparse.Namespace) -> None:
    from tersetalk.formats.corpus import CorpusError
    from tersetalk.formats.nested import payload_rows, summary

    try:
        df = summary(payload_rows(args.corpora, tokenizer=args.tokenizer))
    except CorpusError as exc:
        _fail(str(exc))
    df.insert(2, "tokenizer", args.tokenizer)
    if args.format == "csv":
        df.to_csv(sys.stdout, index=False, float_format="%.1f")
    elif args.format == "markdown":
        print(df.to_markdown(index=False, floatfmt=".1f"))
    else:
        print(df.to_string(index=False, float_format=lambda x: f"{x:.1f}"))


def _cmd_experiment(args: argparse.Namespace) -> None:
    from tersetalk.formats.experiments import run

    raise SystemExit(run(args, args.parser))


def _cmd_paired(args: argparse.Namespace) -> None:
    from tersetalk.formats.paired import run

    raise SystemExit(run(args))


def _cmd_plot(args: argparse.Namespace) -> None:
    from tersetalk.formats.plot import run

    raise SystemExit(run(args))


def add_commands(sub: argparse._SubParsersAction) -> None:
    from tersetalk.core.tokens import ENCODINGS

    p = sub.add_parser(
        "formats",
        help="format-adaptive encoding of JSON / Markdown payloads (knapsack, hints, savings)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fs = p.add_subparsers(
        dest="formats_command", required=True, metavar="COMMAND", action=LazySubParsers
    )

    e = fs.add_parser(
        "encode",
        help="print a payload's encoding",
        description="Read JSON (or Markdown) and print its encoding. mckp: the "
        "cheapest lossless per-subtree encoding, or with --budget the most value "
        "that fits (what is left out is named by overflow hints); string prefixes "
        "that repeat (URLs) are named once by '> [alias: $1=...]' hints where that "
        "saves tokens. mckp_plain: the same without aliases.",
    )
    e.add_argument("file", nargs="?", default="-", help="JSON or Markdown file; - or none: stdin")
    e.add_argument("--encoder", choices=ENCODERS, default="mckp", help="default: %(default)s")
    e.add_argument(
        "--budget", type=int, help="mckp: most tokens the output may have (hints included)"
    )
    e.add_argument(
        "--method",
        choices=("exact", "greedy", "binary"),
        default="exact",
        help="with --budget: exact DP, greedy value per token, or keep/drop JSON only",
    )
    e.add_argument(
        "--tokenizer", choices=ENCODINGS, default="o200k_base", help="default: %(default)s"
    )
    e.add_argument(
        "--value",
        choices=("uniform", "depth", "priority"),
        default="uniform",
        help="value of each leaf under a budget (default: %(default)s)",
    )
    e.add_argument(
        "--priority", nargs="+", metavar="KEY", help="--value priority: keys whose leaves weigh 10x"
    )
    e.add_argument("--explain", action="store_true", help="print the choice per subtree to stderr")
    e.set_defaults(func=_cmd_encode)

    d = fs.add_parser(
        "decode",
        help="print the exact JSON of a lossless encoding (or the exact Markdown source)",
        description="Turn any lossless encoding (mckp, csv, toon, ...; named by its "
        "'> [encoded: ...]' hint, JSON without one) back into compact JSON; a Markdown "
        "document whose tables `encode` re-encoded comes back as its exact source text.",
    )
    d.add_argument("file", nargs="?", default="-", help="the encoding; - or none: stdin")
    d.set_defaults(func=_cmd_decode)

    s = fs.add_parser(
        "savings",
        help="tokens per encoder over files, against compact JSON",
        description="Total tokens per encoder over the files' JSON payloads and "
        "Markdown tables (lossless encodings only; a format that cannot carry a "
        "payload is not counted for it), labelled with baseline and tokenizer.",
    )
    s.add_argument("files", nargs="+", metavar="FILE", help="JSON or Markdown files")
    s.add_argument(
        "--tokenizer", choices=ENCODINGS, default="o200k_base", help="default: %(default)s"
    )
    s.add_argument(
        "--format", choices=("table", "csv", "json"), default="table", help="output format"
    )
    s.set_defaults(func=_cmd_savings)

    # the study's steps import pandas, scipy and matplotlib for their help: built when used
    for name, (help, build) in _STUDY_COMMANDS.items():
        fs.add_lazy(name, help, build)
    # the MCP proxy's tuner and telemetry moved to `tersetalk mcp tune|telemetry`; their
    # old spellings here are added by tersetalk.cli (formats does not import the proxy)


def _add_shapes(fs: argparse._SubParsersAction) -> None:
    from tersetalk.core.tokens import ENCODINGS
    from tersetalk.formats import nested

    h = fs.add_parser(
        "shapes",
        help=_STUDY_COMMANDS["shapes"][0],
        description=nested.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    h.add_argument(
        "corpora",
        nargs="*",
        default=list(nested.CORPORA),
        metavar="DIR",
        help="corpus folders holding json.jsonl (default: %(default)s)",
    )
    h.add_argument(
        "--tokenizer", choices=ENCODINGS, default="o200k_base", help="default: %(default)s"
    )
    h.add_argument(
        "--format", choices=("table", "csv", "markdown"), default="table", help="output format"
    )
    h.set_defaults(func=_cmd_shapes)


def _add_experiment(fs: argparse._SubParsersAction) -> None:
    from tersetalk.formats import experiments

    x = fs.add_parser(
        "experiment", help=_STUDY_COMMANDS["experiment"][0], description=experiments.DESCRIPTION
    )
    experiments.add_arguments(x)
    x.set_defaults(func=_cmd_experiment, parser=x)


def _add_paired(fs: argparse._SubParsersAction) -> None:
    from tersetalk.formats import paired

    c = fs.add_parser("paired", help=_STUDY_COMMANDS["paired"][0], description=paired.DESCRIPTION)
    paired.add_arguments(c)
    c.set_defaults(func=_cmd_paired)


def _add_plot(fs: argparse._SubParsersAction) -> None:
    from tersetalk.formats import plot as plots

    g = fs.add_parser("plot", help=_STUDY_COMMANDS["plot"][0], description=plots.DESCRIPTION)
    plots.add_arguments(g)
    g.set_defaults(func=_cmd_plot)


#: the format study's subcommands: name -> (one-line help, the builder of its parser)
_STUDY_COMMANDS = {
    "shapes": (
        "mckp vs compact JSON per shape, on the shared corpus and the held-out set",
        _add_shapes,
    ),
    "experiment": ("one experiment of the format study", _add_experiment),
    "paired": ("two encoders compared question by question", _add_paired),
    "plot": ("the format study's figures and tables", _add_plot),
}
