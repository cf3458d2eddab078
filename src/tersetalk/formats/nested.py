"""The knapsack on nested records, per shape: the shared corpus and the held-out set.

Why a report of its own: the corpus-wide saving hides the payloads where tables used
to stop being eligible (arrays of objects whose values nest, objects holding them).
This prints, per shape and corpus, the o200k tokens of compact JSON and of the
lossless knapsack (``mckp``, no budget), the saving, and how many payloads the
knapsack made dearer than compact JSON (it never should). The held-out set
(``data/mastodon``: Mastodon API responses, shapes the shared corpus does not have)
is checked against its registered checksum before anything is counted.

    tersetalk formats shapes                       # both corpora, o200k_base
    tersetalk formats shapes data/mastodon --format csv
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from tersetalk.formats.corpus import load_corpus
from tersetalk.formats.solver import encode
from tersetalk.formats.tree import from_python

#: the corpora of the report: the shared corpus, then the held-out set
CORPORA = ("data/toolresponses", "data/mastodon")
#: the shapes the nested-record target is measured on
NESTED_SHAPES = ("nested_object", "array_of_objects (nested values)")


def shape_of(shape: str, value: Any) -> str:
    """The corpus's shape label, ``array_of_objects`` split by whether a value nests."""
    if shape != "array_of_objects":
        return shape
    nests = any(isinstance(v, dict | list) for item in value for v in item.values())
    return f"array_of_objects ({'nested' if nests else 'flat'} values)"


def payload_rows(corpora: Sequence[str] = CORPORA, tokenizer: str = "o200k_base") -> pd.DataFrame:
    """One row per JSON payload: its corpus, shape and tokens in compact JSON and mckp."""
    rows = []
    for corpus in corpora:
        payloads = load_corpus(corpus, kinds=("json",))
        for p in tqdm(payloads, desc=Path(corpus).name, unit="payload", file=sys.stderr):
            node = from_python(p.value)
            rows.append(
                {
                    "corpus": Path(corpus).name,
                    "item_id": p.id,
                    "shape": shape_of(p.shape, p.value),
                    "json_compact": encode(node, "json_compact", tokenizer=tokenizer).tokens,
                    "mckp": encode(node, "mckp", tokenizer=tokenizer).tokens,
                }
            )
    return pd.DataFrame(rows)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per corpus: a row per shape, then ``nested`` (the target's shapes) and ``all``."""
    out = []
    for corpus, d in rows.groupby("corpus", sort=False):
        groups = [(shape, g) for shape, g in d.groupby("shape")]
        groups.append(("nested", d[d["shape"].isin(NESTED_SHAPES)]))
        groups.append(("all", d))
        for shape, g in groups:
            if g.empty:
                continue
            compact, mckp = int(g["json_compact"].sum()), int(g["mckp"].sum())
            out.append(
                {
                    "corpus": corpus,
                    "shape": shape,
                    "payloads": len(g),
                    "json_compact": compact,
                    "mckp": mckp,
                    "saving_pct": 100 * (1 - mckp / compact),
                    "above_json": int((g["mckp"] > g["json_compact"]).sum()),
                }
            )
    return pd.DataFrame(out)
