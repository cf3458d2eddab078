"""``tersetalk compare-runs``: are two results folders the same run, column by column?

The workflow promises that the same config and seed give identical deterministic
columns (every column but the timings: :func:`tersetalk.core.records.deterministic_columns`).
This command checks it between any two results folders: a rerun on another machine, the
same config at two commits, a run restored from an archive. For every Parquet file under
the first folder (the run files by default), the file at the same path under the second
is read and each deterministic column compared, dtype and row order included; the
timing columns are left out, as they describe one execution.

It prints one line per file (``same``, ``differs`` with the columns and how many rows,
``only in A`` / ``only in B``, ``unreadable`` with why) and a count, and exits 0 only when
every file is the same in both folders: a script or CI step can use it as it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["FileComparison", "compare_folders", "compare_frames", "add_commands"]

#: what is compared by default: the run files (``runs/{task}/{system}/{variant}.parquet``)
DEFAULT_PATTERN = "runs/**/*.parquet"


@dataclass
class FileComparison:
    """One file's verdict: ``same``, ``differs``, ``only in A``, ``only in B`` or
    ``unreadable``."""

    path: str
    status: str
    #: deterministic columns whose values differ, with the number of rows that differ
    #: (every row when the files do not have the same number of rows)
    columns: dict[str, int] = field(default_factory=dict)
    #: columns whose values are the same but not their dtype: column -> "int64 vs Int64"
    dtypes: dict[str, str] = field(default_factory=dict)
    #: deterministic columns one file has and the other has not
    missing_columns: list[str] = field(default_factory=list)
    rows: tuple[int, int] | None = None
    why: str = ""

    def line(self) -> str:
        if self.status == "differs":
            parts = [f"{c} ({n} rows)" for c, n in self.columns.items()]
            parts += [f"{c} (dtype {d}, the same values)" for c, d in self.dtypes.items()]
            parts += [f"{c} (in one file only)" for c in self.missing_columns]
            if self.rows and self.rows[0] != self.rows[1]:
                parts.insert(0, f"{self.rows[0]} rows vs {self.rows[1]}")
            return f"differs    {self.path}: {', '.join(parts)}"
        if self.status == "unreadable":
            return f"unreadable {self.path}: {self.why}"
        return f"{self.status:<10} {self.path}"


def _same_column(a, b) -> bool:
    import pandas as pd

    try:
        pd.testing.assert_series_equal(a, b, check_names=False, check_index=False)
    except AssertionError:
        return False
    except (TypeError, ValueError):  # cells pandas cannot compare (nested arrays)
        return a.map(repr).tolist() == b.map(repr).tolist()
    return True


def compare_frames(path: str, a, b) -> FileComparison:
    """The comparison of two frames of one file on their deterministic columns."""
    from tersetalk.core.records import deterministic_columns

    cols_a, cols_b = deterministic_columns(a), deterministic_columns(b)
    missing = sorted(set(cols_a) ^ set(cols_b))
    shared = [c for c in cols_a if c in set(cols_b)]
    rows = (len(a), len(b))
    differing: dict[str, int] = {}
    dtypes: dict[str, str] = {}
    for c in shared:
        if rows[0] == rows[1] and _same_column(a[c], b[c]):
            continue
        if rows[0] != rows[1]:
            differing[c] = max(rows)
            continue
        left = a[c].reset_index(drop=True).map(repr)
        right = b[c].reset_index(drop=True).map(repr)
        n = int((left != right).sum())
        if n == 0 and a[c].dtype != b[c].dtype:  # the same values, stored otherwise
            dtypes[c] = f"{a[c].dtype} vs {b[c].dtype}"
        else:
            differing[c] = n or rows[0]
    status = "differs" if differing or dtypes or missing or rows[0] != rows[1] else "same"
    return FileComparison(path, status, differing, dtypes, missing, rows)


def compare_folders(
    a: str | Path, b: str | Path, pattern: str = DEFAULT_PATTERN
) -> list[FileComparison]:
    """Every file matching ``pattern`` under either folder, compared (sorted by path)."""
    import pandas as pd

    root_a, root_b = Path(a), Path(b)
    for root in (root_a, root_b):
        if not root.is_dir():
            raise FileNotFoundError(f"{root}: no such results folder")
    found_a = {p.relative_to(root_a).as_posix() for p in root_a.glob(pattern) if p.is_file()}
    found_b = {p.relative_to(root_b).as_posix() for p in root_b.glob(pattern) if p.is_file()}
    out = []
    for rel in sorted(found_a | found_b):
        if rel not in found_b:
            out.append(FileComparison(rel, "only in A"))
            continue
        if rel not in found_a:
            out.append(FileComparison(rel, "only in B"))
            continue
        try:
            frames = [pd.read_parquet(root / rel) for root in (root_a, root_b)]
        except Exception as exc:  # noqa: BLE001 - a damaged file is a verdict, not a crash
            out.append(FileComparison(rel, "unreadable", why=f"{type(exc).__name__}: {exc}"))
            continue
        out.append(compare_frames(rel, *frames))
    return out


def _cmd_compare_runs(args: argparse.Namespace) -> None:
    try:
        found = compare_folders(args.a, args.b, args.pattern)
    except FileNotFoundError as exc:
        sys.exit(f"tersetalk compare-runs: {exc}")
    if not found:
        sys.exit(f"tersetalk compare-runs: no file matches {args.pattern!r} under either folder")
    if args.json:
        print(json.dumps([asdict(f) for f in found], indent=1))
    else:
        for f in found:
            print(f.line())
    same = sum(f.status == "same" for f in found)
    print(f"{same} of {len(found)} files the same in their deterministic columns "
          f"({args.a} vs {args.b})", file=sys.stderr)  # fmt: skip
    if same != len(found):
        sys.exit(1)


def add_commands(sub: argparse._SubParsersAction) -> None:
    """``tersetalk compare-runs`` (see the module docstring)."""
    p = sub.add_parser(
        "compare-runs",
        help="compare two results folders' run files in their deterministic columns",
        description="Compare every Parquet file matching --pattern under two results "
        "folders (two machines, two commits, a restored archive) in their deterministic "
        "columns (all but the timings), dtype and row order included. One line per file; "
        "exit status 0 only when every file is the same in both.",
    )
    p.add_argument("a", help="the first results folder, e.g. results/smollm2-135m-instruct")
    p.add_argument("b", help="the second results folder (the same layout)")
    p.add_argument(
        "--pattern",
        default=DEFAULT_PATTERN,
        help=f"files to compare, a glob under each folder (default: {DEFAULT_PATTERN}; "
        "'scores/**/*.parquet' for the scores, '**/*.parquet' for everything)",
    )
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    p.set_defaults(func=_cmd_compare_runs)
