"""What each figure and table was made from, recorded beside it: n, model, seed, commit.

Why: a report caption that quotes the config ("n = 10 per task") is wrong as soon as a
figure was built with another setting (``--config n_eval=1``). So every writer records
what the *data* it draws says, and the report reads that back:

- n: per task, taken from the rows the figure is drawn from (the summary rows' ``n``;
  for per-example rows, the distinct examples), never from the config;
- model: the model key (the results folder, see :mod:`tersetalk.core.paths`) and the
  ``backend:model`` names in the rows;
- seed: the sampling seeds in the rows;
- commit: ``git rev-parse HEAD`` of the source checkout, ``-dirty`` when its tree has
  changes, ``"unknown"`` when the code does not run from a git checkout.

Where it goes (one layout for every kind of file): a sidecar ``<file>.meta.json`` beside
each figure or table (``quality_vs_tokens.png.meta.json``, ``main.csv.meta.json``); PNGs
also carry it in text chunks (``tersetalk`` as JSON, ``Description`` as one sentence),
PDFs in their document info (``Subject`` the sentence, ``Keywords`` the JSON).

The Snakemake report reads the sidecars through a rule parameter
(``provenance=lambda wildcards, output: figmeta.provenance(output)``, which Snakemake
does not count as a rerun trigger because it derives from the output) and the caption
templates print ``{{ snakemake.params.provenance.<output name> }}``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from tersetalk.core.io import file_sha256

__all__ = [
    "SUFFIX",
    "caption",
    "describe",
    "git_commit",
    "pdf_metadata",
    "png_metadata",
    "provenance",
    "read",
    "report_figures",
    "rows_of",
    "sidecar",
    "write",
]

#: the sidecar's name is the file's name plus this
SUFFIX = ".meta.json"
#: columns naming one example (a question, a payload), first found counted for n
ID_COLUMNS = ("example_id", "qid", "item_id", "payload_id")
#: what a field says when the data does not hold it
UNKNOWN = "unknown"


@lru_cache(maxsize=4)
def git_commit(where: str | None = None) -> str:
    """``git rev-parse HEAD`` of the checkout holding ``where`` (default: this package's
    source), with ``-dirty`` when ``git status --porcelain`` lists changes to tracked
    files; ``"unknown"`` when that is not a git checkout or git is missing."""
    folder = Path(where) if where else Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout.strip()  # fmt: skip
        status = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    if not head:
        return UNKNOWN
    return head + ("-dirty" if status else "")


def _key_from_path(out: str | Path | None) -> str | None:
    """The model key a path names (``figures/<key>/...``, ``results/<key>/...``)."""
    if out is None:
        return None
    from tersetalk.core.paths import SHARED_FOLDERS

    parts = Path(out).parts
    for i, part in enumerate(parts[:-2]):
        if part in ("figures", "results") and parts[i + 1] not in SHARED_FOLDERS:
            return parts[i + 1]
    return None


def _n_per_task(frame) -> dict[str, Any]:
    """n per task from the rows: the ``n`` column's values (one int when the runs of a
    task agree, else ``[lowest, highest]``), else the distinct values of the first
    :data:`ID_COLUMNS` column (examples, questions, payloads), else the row count;
    ``"all"`` stands for the task when the rows name none."""
    tasks = frame["task"].astype(str) if "task" in frame.columns else None
    groups = frame.groupby(tasks, sort=True) if tasks is not None else [("all", frame)]
    out: dict[str, Any] = {}
    for task, rows in groups:
        if "n" in rows.columns:
            ns = sorted({int(v) for v in rows["n"].dropna()})
        elif ids := [c for c in ID_COLUMNS if c in rows.columns]:
            ns = [int(rows[ids[0]].nunique())]
        else:
            ns = [len(rows)]
        if not ns:
            continue
        out[str(task)] = ns[0] if len(ns) == 1 else [ns[0], ns[-1]]
    return out


def describe(
    frame=None,
    *,
    out: str | Path | None = None,
    model_key: str | None = None,
    models: Iterable[str] | None = None,
    seed: int | None = None,
    commit: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The metadata of a figure or table drawn from ``frame`` (a DataFrame of summary or
    per-example rows, or ``None`` when the figure is not drawn from runs).

    ``model_key`` defaults to the key in ``out``'s path, else the key of the one model
    the rows name; ``models`` (``backend:model`` names) to the rows' ``backend`` and
    ``model`` columns; ``seed`` to the rows' seeds; ``commit`` to :func:`git_commit`.
    ``extra`` keys are recorded as given (JSON-serialisable values)."""
    from tersetalk.core.paths import model_key as key_of

    meta: dict[str, Any] = {"n": None, "model": None, "seed": seed}
    names_given = sorted({str(m) for m in models or [] if str(m)})
    models = names_given
    if frame is not None and len(frame.columns):
        meta["n"] = _n_per_task(frame)
        if not models and "model" in frame.columns:
            names = frame["model"].astype(str)
            if "backend" in frame.columns:
                names = frame["backend"].astype(str) + ":" + names
            models = sorted(set(names))
        if seed is None and "seed" in frame.columns:
            seeds = sorted({int(s) for s in frame["seed"].dropna()})
            meta["seed"] = seeds[0] if len(seeds) == 1 else seeds or None
    key = model_key or _key_from_path(out)
    if key is None and len(models) == 1:
        try:
            key = key_of({"model": models[0].split(":", 1)[-1]})
        except ValueError:
            key = None
    if key or models:
        meta["model"] = {"key": key or UNKNOWN, "names": models}
    meta["commit"] = commit or git_commit()
    meta.update(extra)
    return meta


def rows_of(files: Iterable[str | Path]):
    """The columns :func:`describe` reads (task, example_id, seed, backend, model) of
    Parquet files (runs, per-example metrics), as one DataFrame: for a file written
    from runs that does not keep their rows (a calibration choice)."""
    import pandas as pd
    import pyarrow.parquet as pq

    wanted = ("task", "example_id", "seed", "backend", "model")
    frames = []
    for f in files:
        names = set(pq.read_schema(f).names)
        frames.append(pd.read_parquet(f, columns=[c for c in wanted if c in names]))
    return pd.concat(frames, ignore_index=True) if frames else None


def sidecar(path: str | Path) -> Path:
    """The sidecar of ``path``: ``<path>.meta.json``."""
    path = Path(path)
    return path.with_name(path.name + SUFFIX)


def png_metadata(meta: Mapping[str, Any]) -> dict[str, str]:
    """``savefig(..., metadata=)`` for a PNG: text chunks."""
    return {"tersetalk": json.dumps(meta, sort_keys=True), "Description": caption(meta)}


def pdf_metadata(meta: Mapping[str, Any]) -> dict[str, str]:
    """``savefig(..., metadata=)`` for a PDF: document info (standard keys only)."""
    return {"Subject": caption(meta), "Keywords": json.dumps(meta, sort_keys=True)}


def savefig_metadata(path: str | Path, meta: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The ``metadata=`` argument of ``savefig`` for ``path``'s format (``None`` for
    others, and when there is nothing to record)."""
    if meta is None:
        return None
    suffix = Path(path).suffix.lower()
    if suffix == ".png":
        return png_metadata(meta)
    if suffix == ".pdf":
        return pdf_metadata(meta)
    return None


def write(path: str | Path, meta: Mapping[str, Any]) -> Path:
    """Write ``path``'s sidecar, with the SHA-256 of ``path`` as written (``sha256``),
    so a sidecar left beside a file some other writer replaced is known as stale.

    Why not modification times: Snakemake touches a job's outputs when it finishes, so
    a sidecar written a moment after its figure can look older than the figure."""
    from tersetalk.core.io import write_text_atomic

    path = Path(path)
    body = {**dict(meta), "sha256": file_sha256(path)} if path.is_file() else dict(meta)
    return write_text_atomic(json.dumps(body, indent=2, sort_keys=True) + "\n", sidecar(path))


def read(path: str | Path) -> dict[str, Any] | None:
    """The metadata recorded for ``path``: its sidecar, else a PNG's ``tersetalk`` text
    chunk; ``None`` when neither is there, or the sidecar names another content than
    the file's (a writer that does not record replaced the file)."""
    path = Path(path)
    side = sidecar(path)
    if side.is_file():
        try:
            meta = json.loads(side.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = None
        if isinstance(meta, dict):
            recorded = meta.pop("sha256", None)
            if recorded is None or not path.is_file() or recorded == file_sha256(path):
                return meta
    if path.suffix.lower() == ".png" and path.is_file():
        return _png_text(path).get("tersetalk")
    return None


def _png_text(path: Path) -> dict[str, Any]:
    """The ``tEXt`` chunks of a PNG (read with the standard library)."""
    import struct
    import zlib

    found: dict[str, Any] = {}
    data = path.read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return found
    pos = 8
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"tEXt" and b"\0" in body:
            key, value = body.split(b"\0", 1)
            found[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt" and b"\0" in body:
            key, rest = body.split(b"\0", 1)
            found[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        elif kind == b"iTXt" and b"\0" in body:
            key, rest = body.split(b"\0", 1)
            compressed = rest[0] == 1
            rest = rest[2:].split(b"\0", 2)[-1]
            text = zlib.decompress(rest) if compressed else rest
            found[key.decode("latin-1")] = text.decode("utf-8")
        elif kind == b"IEND":
            break
    if "tersetalk" in found:
        try:
            found["tersetalk"] = json.loads(found["tersetalk"])
        except ValueError:
            found.pop("tersetalk")
    return found


def _task_name(task: str) -> str:
    from tersetalk.core.display import task_display

    return task_display(task)


def _n_text(n: Any) -> str:
    if isinstance(n, list):
        return f"{n[0]}-{n[-1]}"
    return str(n)


def caption(meta: Mapping[str, Any] | None) -> str:
    """One RST sentence of ``meta``: n per task, model, seed, commit. When nothing was
    recorded it says so instead of guessing from the config."""
    if not meta:
        return "Built from: not recorded (the file has no ``.meta.json`` sidecar)."
    parts = []
    n = meta.get("n")
    if isinstance(n, Mapping) and n:
        values = {_n_text(v) for v in n.values()}
        if len(values) == 1 and len(n) > 1:
            parts.append(f"n = {values.pop()} per task")
        elif list(n) == ["all"]:
            parts.append(f"n = {_n_text(n['all'])}")
        else:
            per = ", ".join(f"{_task_name(t)} {_n_text(v)}" for t, v in n.items())
            parts.append(f"n per task: {per}")
    model = meta.get("model")
    if isinstance(model, Mapping):
        names = ", ".join(f"``{m}``" for m in model.get("names") or [])
        parts.append(f"model ``{model.get('key', UNKNOWN)}``" + (f" ({names})" if names else ""))
    seed = meta.get("seed")
    if seed is not None:
        parts.append(
            "seeds " + ", ".join(map(str, seed)) if isinstance(seed, list) else f"seed {seed}"
        )
    commit = str(meta.get("commit") or UNKNOWN)
    head, dirty = commit.removesuffix("-dirty"), commit.endswith("-dirty")
    short = head[:12] if len(head) == 40 else head
    parts.append(f"commit ``{short}{'-dirty' if dirty else ''}``")
    return "Built from: " + "; ".join(parts) + "."


def provenance(output: Iterable) -> dict[str, str]:
    """For a Snakemake rule's ``params``: each output's caption sentence by its name in
    the rule (``{"pareto": "Built from: n = 1 per task; ..."}``), its position (``"0"``)
    and its file name (``"topology_theta.png"``), read from the sidecars.

    Use it as ``provenance=lambda wildcards, output: figmeta.provenance(output)``: a
    parameter that takes ``output`` is not a rerun trigger, so the text changing once
    the job has written its files does not make Snakemake rerun the job."""
    named = output.items() if hasattr(output, "items") else []
    result = {str(name): caption(read(str(path))) for name, path in named}
    for i, path in enumerate(output):
        text = caption(read(str(path)))
        result.setdefault(str(i), text)
        # by file name too, for a rule whose outputs are a list (topology_report)
        result.setdefault(Path(str(path)).name, text)
    return result


def report_figures(files: Iterable[str], category: str, captions: str = "../report") -> list:
    """For a rule's ``output:`` in workflow/rules/: ``files`` with each PNG marked for
    the Snakemake report, captioned by ``<captions>/<its stem>.rst`` (the templates
    print ``provenance["<its file name>"]``); the other files as they are."""
    from snakemake.io import report

    return [
        report(f, caption=f"{captions}/{Path(f).stem}.rst", category=category)
        if str(f).endswith(".png")
        else f
        for f in files
    ]
