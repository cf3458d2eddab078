"""One model's results as a Markdown document, rendered from its results folder.

Why a generated document: numbers pasted into the README went stale as soon as the code
moved on (a results table there was several commits older than the code beside it).
``RESULTS.md`` is written by a rule from the files the workflow built, with the date,
the model key and the commit it was built at, so it always says what the folder holds.
A table the folder lacks (a study not run yet) gets one line saying it was not built,
never an old copy.

Usage: ``tersetalk results-doc --results results/<key> --figures figures/<key>
--out results/<key>/RESULTS.md`` (rule ``results_doc``, workflow/rules/docs.smk).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tersetalk.core.figmeta import git_commit
from tersetalk.stats.table import TEX_COLUMNS

__all__ = ["SECTIONS", "Section", "render", "write"]


@dataclass(frozen=True)
class Section:
    """A table of the results folder: its file (relative to ``results/<key>/``), a
    heading, what it shows, and which columns to keep when present (empty: all).
    ``patterns`` add the first column matching each regex (for columns whose exact
    name varies, such as the token means)."""

    path: str
    title: str
    note: str
    columns: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    built_by: str = "snakemake --cores all"
    max_rows: int = 200
    query: str | None = None


SECTIONS: tuple[Section, ...] = (
    Section(
        "summary.csv",
        "Main comparison",
        "One row per run (task, system, variant): examples, errors, quality, tokens per "
        "example and what still reaches the Worker. Every column is in `summary.csv`.",
        columns=(
            "task",
            "system",
            "variant",
            "n",
            "n_errors",
            "accuracy",
            "em",
            "f1",
            "token_reduction_mean",
            "mw_token_reduction_mean",
            "gold_reaches_worker_mean",
            "facts_reaching_worker_mean",
        ),
        patterns=(r"^tokens_total_cl100k(_mean)?$", r"^tokens_total.*mean$"),
    ),
    Section(
        "stats/noninferiority.csv",
        "Non-inferiority of accuracy, and paired token tests",
        "Each `[treatment, control]` pair of `evaluation.comparisons`: the paired "
        "difference in accuracy, its one-sided lower bound against the margin, the "
        "verdict, and the relative token reduction.",
        columns=(*TEX_COLUMNS, "not_computed"),  # the paper table's, and why a row has none
    ),
    Section(
        "tables/targets.csv",
        "Targets of the designs",
        "Each quantitative target with the measured value and `met` / `not met` / "
        "`inconclusive` (a small sample is never `met`), and why.",
        columns=("id", "task", "run", "measured", "status", "reason"),
    ),
    Section(
        "formats/savings_by_shape.csv",
        "Format study: savings against compact JSON",
        "Tokens per payload shape and encoder, lossless encodings only, and the saving "
        "against compact JSON (%), per tokenizer.",
        columns=(
            "shape",
            "encoder",
            "tokenizer",
            "n",
            "tokens",
            "json_compact",
            "savings_vs_json_compact_pct",
        ),
        built_by="snakemake --cores all formats",
    ),
    Section(
        "formats/knapsack_summary.csv",
        "Format study: the knapsack under a budget",
        "Value kept (share of leaves) and tokens per budget and method; the gap of the "
        "greedy and keep-or-drop methods to the exact solver.",
        built_by="snakemake --cores all formats",
    ),
    Section(
        "formats/dedup_summary.csv",
        "Format study: session dedup (L0)",
        "Hit rate and the dedup, encoder and combined savings (%) per encoder and "
        "baseline on the seeded replay.",
        built_by="snakemake --cores all formats",
    ),
    Section(
        "formats/comprehension_summary.csv",
        "Format study: comprehension",
        "The model's accuracy on questions about a payload, per encoding, and the "
        "paired difference to compact JSON (points).",
        built_by="snakemake --cores all formats",
    ),
    Section(
        "topology/six_policies.csv",
        "Topology study: the six policies",
        "Agreement with the outcome oracle (the cheapest fixed topology that answered "
        "each example correctly; inconclusive at the floor, with the counts), the "
        "agreement with the task labels (secondary: the layout of each task's brief "
        "already tells it), accuracy and tokens per example of each routing policy; the "
        "paired comparison with the best fixed topology.",
        columns=(
            "policy_label",
            "system",
            "variant",
            "n",
            "errors",
            "oracle_agreement",
            "oracle_agreement_ci_low",
            "oracle_agreement_ci_high",
            "n_decisive",
            "oracle_verdict",
            "label_agreement",
            "accuracy",
            "tokens",
            "chain_share",
            "token_reduction",
            "quality_verdict",
        ),
        built_by="snakemake --cores all topology",
    ),
    Section(
        "topology/heldout.csv",
        "Topology study: the router on held-out briefs",
        "Agreement with the labels of the hand-written briefs it never trained on "
        "(data/topology/heldout/; n in the table), overall, on the items that cross their "
        "format's label group, and on batch 7, written after the signals' last revision "
        "by an author who saw neither the router nor its decisions (batches 1 to 6 guided "
        "the revisions), per system and router, with 95% continuity-corrected Wilson "
        "intervals. Signals only: the same on every model.",
        columns=("system", "router", "subset", "n", "agree", "agreement", "ci_low", "ci_high"),
        built_by="snakemake --cores all topology",
        query="subset in ['all', 'crossing', 'not crossing', 'batch 7']",
    ),
    Section(
        "topology/policies.csv",
        "Topology study: every routed variant",
        "Every variant of the routed systems (policies, fitted router, ablations).",
        columns=(
            "system",
            "variant",
            "policy",
            "n",
            "errors",
            "oracle_agreement",
            "oracle_verdict",
            "label_agreement",
            "accuracy",
            "tokens",
            "chain_share",
            "overflow_rate",
            "quality_verdict",
        ),
        built_by="snakemake --cores all topology",
    ),
)

#: the files the document reads (relative to the model's results folder)
INPUTS: tuple[str, ...] = tuple(s.path for s in SECTIONS)


def _cell(value: object) -> str:
    """A table cell: floats to 4 significant digits, missing as empty, pipes and line
    breaks escaped so the row stays one row."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if value is pd.NA or value is pd.NaT:
        return ""
    if isinstance(value, float):
        text = f"{value:.4g}"
    else:
        text = str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _columns(df: pd.DataFrame, section: Section) -> list[str]:
    if not section.columns and not section.patterns:
        return list(df.columns)
    keep = [c for c in section.columns if c in df.columns]
    for pattern in section.patterns:
        rx = re.compile(pattern)
        found = next((c for c in df.columns if rx.search(c) and c not in keep), None)
        if found is not None:
            keep.append(found)
    return keep or list(df.columns)


def markdown_table(df: pd.DataFrame, columns: Sequence[str]) -> str:
    """``df[columns]`` as a GitHub-flavoured Markdown table."""
    lines = [
        "| " + " | ".join(_cell(c) for c in columns) + " |",
        "|" + "|".join(" --- " for _ in columns) + "|",
    ]
    for row in df[list(columns)].itertuples(index=False, name=None):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines)


def _section(results: Path, section: Section) -> str:
    path = results / section.path
    head = f"## {section.title}\n\n"
    if not path.is_file():
        return head + (
            f"Not built: `{path.as_posix()}` is absent (`{section.built_by}` builds it).\n"
        )
    try:
        df = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        df = pd.DataFrame()
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        return head + f"`{path.as_posix()}` could not be read: {exc}\n"
    if section.query and not df.empty:
        df = df.query(section.query)
    out = head + f"{section.note} Source: `{path.as_posix()}`.\n\n"
    if df.empty:
        return out + "The file holds no rows.\n"
    cols = _columns(df, section)
    shown = df.head(section.max_rows)
    out += markdown_table(shown, cols) + "\n"
    if len(df) > len(shown):
        out += f"\n({len(df) - len(shown)} more rows in the file.)\n"
    return out


def _model_line(results: Path) -> str | None:
    """``backend:model`` of the runs in the summary, when it says."""
    path = results / "summary.csv"
    if not path.is_file():
        return None
    try:
        df = pd.read_csv(path, usecols=lambda c: c in ("backend", "model"))
    except (ValueError, pd.errors.EmptyDataError, pd.errors.ParserError):
        return None
    if not {"backend", "model"} <= set(df.columns) or df.empty:
        return None
    return ", ".join(sorted(set(df["backend"].astype(str) + ":" + df["model"].astype(str))))


def _figures(figures: Path | None, out: Path) -> str:
    head = "## Figures\n\n"
    if figures is None:
        return ""
    pngs = sorted(figures.glob("*.png")) if figures.is_dir() else []
    if not pngs:
        return head + f"Not built: no figures in `{figures.as_posix()}`.\n"
    lines = [head + f"The PNGs in `{figures.as_posix()}`:\n"]
    for png in pngs:
        rel = Path(os.path.relpath(png, out.parent)).as_posix()
        lines.append(f"- [{png.stem}]({rel})")
    return "\n".join(lines) + "\n"


def render(
    results: str | Path,
    figures: str | Path | None = None,
    out: str | Path | None = None,
    model_key: str | None = None,
    commit: str | None = None,
    date: str | None = None,
    sections: Sequence[Section] = SECTIONS,
) -> str:
    """The document for the results folder ``results`` (and its figures folder).

    ``out`` is where the document goes (figure links are relative to it); the model key
    defaults to the results folder's name, the commit to the working tree's HEAD, the
    date to today (UTC)."""
    results = Path(results)
    figures = Path(figures) if figures is not None else None
    out = Path(out) if out is not None else results / "RESULTS.md"
    key = model_key or results.name
    commit = commit or git_commit()  # figmeta's: the commit every figure records
    date = date or dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = [
        f"# Results: {key}",
        "",
        "Generated by `tersetalk results-doc` from the files in "
        f"`{results.as_posix()}`; do not edit by hand (the rule `results_doc` rewrites it).",
        "",
        f"- model key: `{key}`",
    ]
    model = _model_line(results)
    if model:
        header.append(f"- model: `{model}`")
    header += [f"- commit: `{commit}`", f"- generated: {date}", ""]
    parts = ["\n".join(header)]
    parts += [_section(results, s) for s in sections]
    fig = _figures(figures, out)
    if fig:
        parts.append(fig)
    return "\n".join(parts)


def write(results: str | Path, out: str | Path, **kwargs) -> Path:
    """Render and write the document atomically; returns its path."""
    from tersetalk.core.io import write_text_atomic

    return write_text_atomic(render(results, out=out, **kwargs), out)


def _cmd_results_doc(args: argparse.Namespace) -> None:
    if not Path(args.results).is_dir():
        raise FileNotFoundError(f"--results {args.results}: no such folder")
    path = write(args.results, args.out, figures=args.figures, model_key=args.model_key)
    print(path)


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "results-doc",
        help="render a model's results folder as Markdown (RESULTS.md)",
        description="Render the tables present in one model's results folder (summary, "
        "non-inferiority, targets, format and topology studies) and its figures as one "
        "Markdown document, with the date, model key and commit; a table that was not "
        "built is named as such.",
    )
    p.add_argument("--results", required=True, help="the model's results folder, results/<key>")
    p.add_argument("--figures", help="the model's figures folder, figures/<key> (optional)")
    p.add_argument("--out", required=True, help="the Markdown file to write")
    p.add_argument("--model-key", help="the key to print (default: the results folder's name)")
    p.set_defaults(func=_cmd_results_doc)
