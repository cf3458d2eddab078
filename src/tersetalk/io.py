"""Reading and writing the workflow's tables: atomic writes, reads with clear errors.

Why one home: every step reads files another step wrote. A write that a kill
interrupts must never leave a half-file that looks finished (Snakemake would take it
as done), and a file that cannot be read must say which file and what to do, not end
in a pyarrow traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

__all__ = ["InputFileError", "read_parquet", "write_parquet_atomic"]


class InputFileError(ValueError):
    """An input file is missing, truncated or not what the step expects."""


def read_parquet(path: str | Path, what: str = "input") -> pd.DataFrame:
    """Read a Parquet file; any failure names the file, the cause and the fix."""
    path = Path(path)
    if not path.exists():
        raise InputFileError(f"{what} file {path} does not exist")
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise InputFileError(
            f"{what} file {path} is not a readable Parquet file ({type(exc).__name__}: "
            f"{str(exc)[:300]}); it may be truncated by a crash or not Parquet at all: delete "
            "it and rerun the step that writes it"
        ) from exc


def write_parquet_atomic(df: pd.DataFrame, out: Path, metadata: dict | None = None) -> None:
    """Write ``df`` to ``out`` through a temporary file and an atomic rename.

    ``metadata`` (JSON-able) is stored in the schema metadata under ``tersetalk``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(df, preserve_index=False)
    if metadata:
        meta = dict(table.schema.metadata or {})
        meta[b"tersetalk"] = json.dumps(metadata, sort_keys=True).encode()
        table = table.replace_schema_metadata(meta)
    tmp = out.with_name(out.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, out)
