"""A small, deterministic booktabs table writer (no jinja2 templates)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from tersetalk.stats._common import StatsError

_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def escape_latex(text: str) -> str:
    """Escape the characters LaTeX treats specially in running text."""
    return "".join(_ESCAPES.get(ch, ch) for ch in str(text))


Formatter = str | Callable[[object], str]


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _cell(value: object, fmt: Formatter | None, digits: int) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "--"
    if fmt is not None:
        return fmt(value) if callable(fmt) else fmt.format(value)
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        v = float(value)
        if math.isinf(v):
            return r"$\infty$" if v > 0 else r"$-\infty$"
        return f"{v:.{digits}f}"
    return escape_latex(str(value))


def to_latex(
    df: pd.DataFrame,
    columns: Sequence[str] | Mapping[str, str],
    caption: str,
    label: str,
    *,
    digits: int = 3,
    formats: Mapping[str, Formatter] | None = None,
    escape_caption: bool = True,
    placement: str = "t",
) -> str:
    """A ``table`` environment with a booktabs ``tabular`` of ``columns`` of ``df``.

    ``columns`` is a list of column names or a mapping column -> header. Headers
    and text cells are escaped; numbers are right-aligned and printed with
    ``digits`` decimals (integers as integers), booleans as yes/no, NaN as "--".
    ``formats`` maps a column to a format string (``"{:.2g}"``) or a callable.
    The caption is escaped unless ``escape_caption=False`` (for raw LaTeX such
    as ``$\\delta$``). Needs ``\\usepackage{booktabs}``.
    """
    headers = dict(columns) if isinstance(columns, Mapping) else {c: c for c in columns}
    if not headers:
        raise StatsError("to_latex: no columns given")
    missing = [c for c in headers if c not in df.columns]
    if missing:
        raise StatsError(f"to_latex: columns not in the frame: {missing}")
    formats = dict(formats or {})
    align = "".join(
        "r" if len(df) and all(_is_number(v) or pd.isna(v) for v in df[c]) else "l" for c in headers
    )
    lines = [
        rf"\begin{{table}}[{placement}]",
        r"\centering",
        rf"\caption{{{escape_latex(caption) if escape_caption else caption}}}",
        rf"\label{{{label}}}",
        rf"\begin{{tabular}}{{{align}}}",
        r"\toprule",
        " & ".join(escape_latex(h) for h in headers.values()) + r" \\",
        r"\midrule",
    ]
    for row in df[list(headers)].itertuples(index=False, name=None):
        cells = [_cell(v, formats.get(c), digits) for c, v in zip(headers, row, strict=True)]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)
