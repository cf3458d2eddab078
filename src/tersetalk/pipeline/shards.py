"""Sharded runs: split a sample into contiguous shards and merge the shards' run files.

Why shards: on a cluster one job is the unit a scheduler places, and a run of 500
examples on one model is hours of calls. With ``run.shard_size`` set, the workflow
runs ``tersetalk run`` once per shard of the sample (``tersetalk shard-sample``
writes the shard's sample file) and ``tersetalk merge-runs`` assembles the run file.
The runner itself does not know about shards: a shard is a smaller sample, the run
spec (and so ``spec_hash``, the call cache keys and every deterministic column) is
the one of the unsharded run, so the merged file equals an unsharded run in its
deterministic columns.

Shard ``i`` of ``n`` (named ``{i}-of-{n}``) holds rows ``[i*size, (i+1)*size)`` of the
sample, in the sample's order; merging concatenates the shards in index order and
checks the result against the sample, example by example.
"""

from __future__ import annotations

import argparse
import logging
import math
import re
from pathlib import Path

from tersetalk.core.io import InputFileError, write_atomic

log = logging.getLogger("tersetalk.pipeline.shards")

__all__ = [
    "ShardError",
    "add_commands",
    "merge_runs",
    "parse_shard_name",
    "shard_count",
    "shard_name",
    "shard_names",
    "split_sample",
]

_NAME = re.compile(r"^(\d+)-of-(\d+)$")


class ShardError(InputFileError):
    """A shard file or a set of shards does not fit the sample or each other."""


def shard_count(n_examples: int, shard_size: int | None) -> int:
    """Shards of ``shard_size`` examples that cover ``n_examples`` (null or 0: one shard)."""
    if n_examples < 1:
        raise ShardError(f"a sample needs at least one example to shard, got {n_examples}")
    if not shard_size:
        return 1
    if shard_size < 0:
        raise ShardError(
            f"run.shard_size must be positive (or null/0 for one shard), got {shard_size}"
        )
    return math.ceil(n_examples / shard_size)


def shard_name(index: int, count: int) -> str:
    return f"{index}-of-{count}"


def shard_names(n_examples: int, shard_size: int | None) -> list[str]:
    """The ``{shard}`` wildcard values of a sample of ``n_examples``, in merge order."""
    count = shard_count(n_examples, shard_size)
    return [shard_name(i, count) for i in range(count)]


def parse_shard_name(name: str) -> tuple[int, int]:
    """``"2-of-5"`` -> ``(2, 5)``; anything else is a ShardError naming the expected form."""
    m = _NAME.match(name)
    if not m or int(m.group(1)) >= int(m.group(2)):
        raise ShardError(
            f"shard {name!r} is not of the form '<index>-of-<count>' with index < count"
        )
    return int(m.group(1)), int(m.group(2))


def split_sample(sample: str | Path, shard: str, shard_size: int, out: str | Path) -> int:
    """Write shard ``shard`` of ``sample`` to ``out``; return its number of examples.

    The shard count in the name must be the one ``shard_size`` gives for this sample:
    a mismatch means the workflow's config (``n_eval``) and the sample disagree.
    """
    from tersetalk.core.io import read_metadata, read_parquet, write_parquet_atomic

    index, count = parse_shard_name(shard)
    df = read_parquet(sample, "sample")
    expected = shard_count(len(df), shard_size)
    if count != expected:
        raise ShardError(
            f"shard {shard}: sample {sample} has {len(df)} examples, which shard_size "
            f"{shard_size} cuts into {expected} shards, not {count}; the sample and the "
            "config's n_eval disagree: rerun `tersetalk sample` (or snakemake) for this config"
        )
    size = shard_size or len(df)
    part = df.iloc[index * size : (index + 1) * size].reset_index(drop=True)
    meta = read_metadata(sample, "sample")
    meta["shard"] = {"name": shard, "index": index, "count": count, "size": size,
                     "of_sample": str(sample)}  # fmt: skip
    write_parquet_atomic(part, out, meta)
    log.info("shard %s of %s: %d examples -> %s", shard, sample, len(part), out)
    return len(part)


def _summed_model(descriptions: list[dict]) -> dict:
    """One model description for the merged run: the first shard's, with counters summed."""
    merged = dict(descriptions[0])
    for key in ("cache_hits", "cache_misses"):
        values = [d.get(key) for d in descriptions]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            merged[key] = sum(values)
    return merged


def merge_runs(shards: list[str | Path], sample: str | Path, out: str | Path) -> int:
    """Concatenate shard run files (in the given order) into ``out``; return the rows.

    Refused, naming the file: shards written under different run specs, or shards
    whose examples are not exactly the sample's examples in the sample's order (a
    missing, repeated or foreign shard).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tersetalk.core.io import read_metadata, read_parquet, write_parquet_atomic

    if not shards:
        raise ShardError("merge-runs needs at least one shard run file")
    tables, metas = [], []
    for path in shards:
        meta = read_metadata(path, "shard run")
        if "spec_hash" not in meta:
            raise InputFileError(
                f"shard run file {path} carries no run spec; `tersetalk run` writes it"
            )
        try:
            tables.append(pq.read_table(path))
        except (OSError, ValueError) as exc:
            raise InputFileError(
                f"shard run file {path} is not readable Parquet ({exc}); delete it and rerun "
                "its job"
            ) from exc
        metas.append(meta)
    hashes = {m["spec_hash"] for m in metas}
    if len(hashes) > 1:
        detail = ", ".join(f"{p}: {m['spec_hash']}" for p, m in zip(shards, metas, strict=True))
        raise ShardError(
            f"shard run files were written under different run specs ({detail}); delete the "
            "stale ones and rerun their jobs"
        )
    table = pa.concat_tables(tables, promote_options="default")
    got = table.column("example_id").to_pylist()
    want = read_parquet(sample, "sample")["example_id"].tolist()
    if got != want:
        missing = [e for e in want if e not in set(got)]
        extra = [e for e in got if e not in set(want)]
        raise ShardError(
            f"the {len(shards)} shard run files hold {len(got)} examples, the sample {sample} "
            f"has {len(want)}; missing {missing[:5]}, not in the sample {extra[:5]}"
            + ("" if missing or extra else ", or not in the sample's order")
            + "; give every shard once, in index order"
        )
    meta = {
        "spec": metas[0]["spec"],
        "spec_hash": metas[0]["spec_hash"],
        "model": _summed_model([m.get("model", {}) for m in metas]),
        "shards": [
            {"path": str(p), "n": t.num_rows, "model": m.get("model", {})}
            for p, t, m in zip(shards, tables, metas, strict=True)
        ],
    }
    write_parquet_atomic(table.to_pandas(), out, meta)
    merge_side_files(shards, out)
    log.info("merged %d shards (%d examples) -> %s", len(shards), table.num_rows, out)
    return table.num_rows


#: Files a system writes beside its run file (``<run>.trace.jsonl``: the mediator's trace).
SIDE_SUFFIXES = (".trace.jsonl",)


def _side(path: str | Path, suffix: str) -> Path:
    path = Path(path)
    return path.with_name(path.name.removesuffix(".parquet") + suffix)


def merge_side_files(shards: list[str | Path], out: str | Path) -> list[Path]:
    """Concatenate the shards' side files (in shard order) beside ``out``; return them.

    A side file that only some shards have is merged from those, and the missing
    ones are named in the log (a shard run with ``trace: false`` writes none).
    """
    written = []
    for suffix in SIDE_SUFFIXES:
        parts = [_side(p, suffix) for p in shards]
        present = [p for p in parts if p.exists()]
        if not present:
            continue
        if len(present) < len(parts):
            missing = [str(p) for p in parts if not p.exists()]
            log.warning("merging %s from %d of %d shards; none from: %s", suffix,
                        len(present), len(parts), ", ".join(missing))  # fmt: skip
        target = _side(out, suffix)

        def concatenate(tmp: Path, present: list[Path] = present) -> None:
            with tmp.open("wb") as fh:
                for part in present:
                    data = part.read_bytes()
                    fh.write(data if not data or data.endswith(b"\n") else data + b"\n")

        write_atomic(target, concatenate)  # a temporary file of its own (two mergers)
        written.append(target)
    return written


def _cmd_shard_sample(args: argparse.Namespace) -> None:
    split_sample(args.sample, args.shard, args.shard_size, args.out)


def _cmd_merge_runs(args: argparse.Namespace) -> None:
    merge_runs(args.shards, args.sample, args.out)


def add_commands(sub: argparse._SubParsersAction) -> None:
    """``tersetalk shard-sample`` and ``tersetalk merge-runs`` (see the module docstring)."""
    s = sub.add_parser(
        "shard-sample",
        help="write one shard of a sample (run.shard_size examples, in sample order)",
        description="Write shard <i>-of-<n> of a sample: rows [i*size, (i+1)*size).",
    )
    s.add_argument("--sample", required=True, help="sample Parquet from `tersetalk sample`")
    s.add_argument("--shard", required=True, help="shard name '<index>-of-<count>', e.g. 0-of-4")
    s.add_argument(
        "--shard-size", type=int, required=True, help="examples per shard (run.shard_size)"
    )
    s.add_argument("--out", required=True, help="the shard's sample Parquet to write")
    s.set_defaults(func=_cmd_shard_sample)

    m = sub.add_parser(
        "merge-runs",
        help="assemble a run file from its shards' run files",
        description="Concatenate shard run files in the order given; check they share one "
        "run spec and hold exactly the sample's examples in its order.",
    )
    m.add_argument("shards", nargs="+", help="shard run Parquet files, in shard index order")
    m.add_argument("--sample", required=True, help="the full sample the shards were cut from")
    m.add_argument("--out", required=True, help="run Parquet to write")
    m.set_defaults(func=_cmd_merge_runs)
