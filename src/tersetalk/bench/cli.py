"""``tersetalk bench``: build the corpus, run MB-1/MB-2/MB-3 (and MB-4, the ``M#`` memory,
which needs no corpus), draw the figure."""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

log = logging.getLogger("tersetalk.bench")


def _ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _cmd_corpus(args: argparse.Namespace) -> None:
    from tersetalk.core.io import write_parquet_atomic

    from .corpus import build_corpus

    runs = list(args.runs)
    if args.present_runs:  # the workflow's run files: those written so far
        runs += [p for p in args.present_runs if Path(p).is_file()]
        log.info("%d of the %d run files of --present-runs are present", len(runs) - len(args.runs),
                 len(args.present_runs))  # fmt: skip
    for path in args.runs:
        if not Path(path).is_file():
            raise FileNotFoundError(f"run file {path} does not exist")
    df, summary = build_corpus(runs, sizes=args.sizes, per_size=args.per_size,
                               max_real=args.max_real, seed=args.seed)  # fmt: skip
    write_parquet_atomic(df, args.out, summary)
    real = summary["real"]
    if runs:
        log.info("real messages from %d run files: %d sent, %d without typed fields, %d "
                 "duplicates, %d ambiguous as prose (left out), %d kept", len(runs),
                 real.get("messages", 0), real.get("untyped", 0), real.get("duplicates", 0),
                 real.get("ambiguous", 0), real.get("kept", 0))  # fmt: skip
    # a corpus without real messages, and messages left out, are warned about by build_corpus
    groups = ", ".join(f"{g} {n}" for g, n in df["group"].value_counts(sort=False).items())
    log.info("wrote %s: %d messages (%s)", args.out, len(df), groups)


def _cmd_run(args: argparse.Namespace) -> None:
    from tersetalk.core.io import read_metadata, write_parquet_atomic

    from .corpus import SOURCE_REAL, read_corpus
    from .defaults import default_repeats
    from .results import EquivalenceError, log_environment
    from .timing import measure

    if args.which == "mb4":
        _cmd_run_mb4(args)
        return
    if args.which == "mb5":
        _cmd_run_mb5(args)
        return
    if not args.corpus:
        raise SystemExit(f"tersetalk bench run: error: --which {args.which} needs --corpus (a "
                         "corpus Parquet from `tersetalk bench corpus`)")  # fmt: skip
    try:
        corpus = read_corpus(args.corpus)
    except ValueError as exc:
        raise SystemExit(f"tersetalk bench run: error: {exc}") from None
    corpus_meta = read_metadata(args.corpus, "corpus")
    if args.repeats is None:
        args.repeats = default_repeats()
    common = {"repeats": args.repeats, "warmup": args.warmup,
              "min_batch_ns": int(args.min_batch_ms * 1e6), "seed": args.seed}  # fmt: skip
    log_environment()
    n_real = int((corpus["source"] == SOURCE_REAL).sum())
    if n_real == 0:
        log.warning("%s holds NO real workflow messages: every %s row comes from the synthetic "
                    "sweep (source=synthetic)", args.corpus, args.which.upper())  # fmt: skip
    else:
        log.info("%s: %d real workflow messages, %d synthetic", args.corpus, n_real,
                 len(corpus) - n_real)  # fmt: skip
    log.info("%s on %s (%d messages): %d repeats after %d warmup, batches of at least %.1f ms",
             args.which.upper(), args.corpus, len(corpus), args.repeats, args.warmup,
             args.min_batch_ms)  # fmt: skip
    measure({"noop": lambda: None}, repeats=1, warmup=0)  # settle imports before timing
    t0 = time.perf_counter()
    try:
        if args.which == "mb1":
            from .mb1 import run_mb1

            df = run_mb1(corpus, **common)
        elif args.which == "mb2":
            from .mb2 import run_mb2

            df = run_mb2(corpus, chunk_sizes=args.chunk_sizes, stream_bytes=args.stream_bytes,
                         **common)  # fmt: skip
        else:
            from .mb3 import run_mb3

            df = run_mb3(corpus, **common)
    except EquivalenceError as exc:
        raise SystemExit(f"tersetalk bench run: {exc}") from None
    df["repeats_requested"] = args.repeats
    df["corpus"] = str(args.corpus)
    write_parquet_atomic(df, args.out, {"corpus": str(args.corpus), "corpus_summary": corpus_meta,
                                 **common, "which": args.which})  # fmt: skip
    csv = Path(args.out).with_suffix(".csv")  # the same table for spreadsheets and diffs
    df.to_csv(csv, index=False)
    log.info("wrote %s (%d rows) in %.1f s", args.out, len(df), time.perf_counter() - t0)
    _log_verdict(df, args.which)


def _cmd_run_mb4(args: argparse.Namespace) -> None:
    """MB-4 times the memory store on seeded synthetic texts: no corpus to read."""
    from tersetalk.core.io import write_parquet_atomic

    from .defaults import default_repeats
    from .mb4 import run_mb4
    from .results import EquivalenceError, log_environment
    from .timing import measure

    if args.corpus:
        log.warning("MB-4 times the M# store on synthetic texts; --corpus %s is not read",
                    args.corpus)  # fmt: skip
    if args.repeats is None:
        args.repeats = default_repeats()
    common = {"repeats": args.repeats, "warmup": args.warmup,
              "min_batch_ns": int(args.min_batch_ms * 1e6), "seed": args.seed}  # fmt: skip
    log_environment()
    log.info("MB-4 at %s entries: %d repeats after %d warmup, batches of at least %.1f ms",
             ",".join(map(str, args.memory_sizes)), args.repeats, args.warmup,
             args.min_batch_ms)  # fmt: skip
    measure({"noop": lambda: None}, repeats=1, warmup=0)  # settle imports before timing
    t0 = time.perf_counter()
    try:
        df = run_mb4(sizes=args.memory_sizes, **common)
    except EquivalenceError as exc:
        raise SystemExit(f"tersetalk bench run: {exc}") from None
    df["repeats_requested"] = args.repeats
    write_parquet_atomic(df, args.out, {**common, "which": "mb4",
                                        "sizes": list(args.memory_sizes)})  # fmt: skip
    Path(args.out).with_suffix(".csv").parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(Path(args.out).with_suffix(".csv"), index=False)
    log.info("wrote %s (%d rows) in %.1f s", args.out, len(df), time.perf_counter() - t0)


def _cmd_run_mb5(args: argparse.Namespace) -> None:
    """MB-5 times the MCP proxy's session pipeline on seeded JSON payloads: no corpus."""
    from tersetalk.core.io import write_csv_atomic, write_parquet_atomic

    from .defaults import default_repeats
    from .mb5 import run_mb5
    from .results import EquivalenceError, log_environment

    if args.repeats is None:
        args.repeats = default_repeats()
    common = {"repeats": args.repeats, "warmup": args.warmup,
              "min_batch_ns": int(args.min_batch_ms * 1e6), "seed": args.seed}  # fmt: skip
    log_environment()
    t0 = time.perf_counter()
    try:
        df = run_mb5(sizes_kib=args.payload_kib, calls=args.calls, **common)
    except EquivalenceError as exc:
        raise SystemExit(f"tersetalk bench run: {exc}") from None
    write_parquet_atomic(df, args.out, {**common, "which": "mb5", "calls": args.calls,
                                        "payload_kib": list(args.payload_kib)})  # fmt: skip
    write_csv_atomic(df, Path(args.out).with_suffix(".csv"))
    log.info("wrote %s (%d rows) in %.1f s", args.out, len(df), time.perf_counter() - t0)
    for r in df[df["method"] == "added_call"].itertuples():
        log.info("MB-5 latency added per call at %d KiB: p50 %.2f ms, p95 %.2f ms (the "
                 "design's target: 20 ms and 50 ms)%s", r.payload_kib, r.p50_ns / 1e6,
                 r.p95_ns / 1e6, "" if r.meets_seed_limit else ": OVER")  # fmt: skip
    for r in df[df["ratio_to_seed_limit"].notna() & (df["method"] != "added_call")].itertuples():
        log.info("MB-5 %s at %d KiB: %s %.1f µs = %.2f x the design's limit (%.0f µs)%s",
                 r.method, r.payload_kib, r.seed_limit_stat,
                 r.ratio_to_seed_limit * r.seed_limit_ns / 1e3, r.ratio_to_seed_limit,
                 r.seed_limit_ns / 1e3, "" if r.meets_seed_limit else ": OVER")  # fmt: skip


def _log_verdict(df, which: str) -> None:
    """The design's claim as measured: per method, its range of ratios and where it meets it."""
    if which == "mb3":
        return
    key, setting = ("group", "groups") if which == "mb1" else ("chunk_size", "chunk sizes")
    sub = df[df["seed_target"].notna()]
    target = float(sub["seed_target"].iloc[0])
    baseline = str(df["baseline"].iloc[0])
    best_meets = sub.groupby(key)["meets_seed_target"].any()
    for method, rows in sub.groupby("method", sort=False):
        met = int(rows["meets_seed_target"].astype(bool).sum())
        log.info("%s %s: %.2fx to %.2fx over %s; meets the design's %gx in %d of %d %s",
                 which.upper(), method, rows["speedup_vs_baseline"].min(),
                 rows["speedup_vs_baseline"].max(), baseline, target, met, len(rows),
                 setting)  # fmt: skip
    held = df[df["limit_target"].notna()] if "limit_target" in df else df.iloc[:0]
    for method, rows in held.groupby("method", sort=False):
        met = int(rows["meets_limit_target"].astype(bool).sum())
        log.info("%s %s: %.2f to %.2f of the limit (%s); at least %.2f in %d of %d %s",
                 which.upper(), method, rows["ratio_vs_limit"].min(), rows["ratio_vs_limit"].max(),
                 rows["limit"].iloc[0], rows["limit_target"].iloc[0], met, len(rows),
                 setting)  # fmt: skip
    if best_meets.all():
        log.info("%s: the design's %gx is met in every one of the %d %s (by the best method)",
                 which.upper(), target, len(best_meets), setting)  # fmt: skip
    else:
        log.warning("%s FALLS SHORT of the design's %gx: no method reaches it in %d of %d %s "
                    "(%s)", which.upper(), target, int((~best_meets).sum()), len(best_meets),
                    setting, ", ".join(map(str, best_meets[~best_meets].index)))  # fmt: skip


def _cmd_plot(args: argparse.Namespace) -> None:
    import pandas as pd

    from .plot import plot_bench

    mb4 = pd.read_parquet(args.mb4) if args.mb4 else None
    paths = plot_bench(pd.read_parquet(args.mb1), pd.read_parquet(args.mb2),
                       pd.read_parquet(args.mb3), args.out_stem, mb4=mb4)  # fmt: skip
    log.info("wrote %s", ", ".join(map(str, paths)))


def add_commands(subparsers) -> None:
    """``tersetalk bench`` and its steps: corpus, run, plot, events, concurrency."""
    b = subparsers.add_parser(
        "bench",
        help="microbenchmarks MB-1..4 (parsing, stream framing, wire formats, M# store), "
        "concurrency",
        description="Microbenchmarks of TerseTalk-JSONL against free-form text and other "
        "wire formats. Build a corpus, run each benchmark, then draw the figure.",
    )  # fmt: skip
    sub = b.add_subparsers(dest="bench_command", required=True, metavar="STEP")

    _add_corpus_parser(sub)
    _add_run_parser(sub)
    _add_plot_parser(sub)

    from .events import add_parser as add_events_parser

    add_events_parser(sub)  # `bench events`: runs with the dashboard's events on vs off

    from .concurrency import add_parser as add_concurrency_parser

    add_concurrency_parser(sub)  # `bench concurrency`: examples/s at max_concurrency levels


def _add_corpus_parser(sub) -> None:
    """``bench corpus``: the messages to benchmark (real runs and a synthetic sweep)."""
    from .defaults import DEFAULT_MAX_REAL, DEFAULT_PER_SIZE, DEFAULT_SIZES

    c = sub.add_parser("corpus", help="messages to benchmark: real runs + a synthetic sweep",
                       description="Reduce the messages of run files to their typed fields and "
                       "render each as TerseTalk-JSONL, free-form layout and prose; add a seeded "
                       "synthetic size sweep.")  # fmt: skip
    c.add_argument("--runs", nargs="*", default=[],
                   help="run Parquet files from `tersetalk run` (their messages column); none: "
                   "synthetic only")  # fmt: skip
    c.add_argument("--present-runs", nargs="*", default=[], metavar="RUN",
                   help="run Parquet files to read if they exist when the corpus is built (the "
                   "workflow names every run of its config here: the benchmarks never force a "
                   "model run); the corpus's metadata lists those read")  # fmt: skip
    c.add_argument("--sizes", type=_ints, default=DEFAULT_SIZES,
                   help=f"typed items per synthetic message (default: "
                   f"{','.join(map(str, DEFAULT_SIZES))})")  # fmt: skip
    c.add_argument(
        "--per-size",
        type=int,
        default=DEFAULT_PER_SIZE,
        help=f"distinct synthetic messages per size (default: {DEFAULT_PER_SIZE})",
    )
    c.add_argument("--max-real", type=int, default=DEFAULT_MAX_REAL,
                   help=f"at most this many real messages, a seeded sample (default: "
                   f"{DEFAULT_MAX_REAL})")  # fmt: skip
    c.add_argument("--seed", type=int, default=0, help="seed of the sweep and sample (default: 0)")
    c.add_argument("--out", required=True, help="corpus Parquet to write")
    c.set_defaults(func=_cmd_corpus)


def _add_run_parser(sub) -> None:
    """``bench run``: time one benchmark (MB-1 to MB-5) and write its result Parquet."""
    from .defaults import (
        DEFAULT_CHUNK_SIZES,
        DEFAULT_MEMORY_SIZES,
        DEFAULT_MIN_BATCH_NS,
        DEFAULT_STREAM_BYTES,
        DEFAULT_WARMUP,
    )

    r = sub.add_parser("run", help="run one benchmark on a corpus",
                       description="Time one benchmark (medians over interleaved repeats, ratio "
                       "against its baseline in the same process) after asserting that every "
                       "method recovers the same content.")  # fmt: skip
    r.add_argument(
        "--which",
        required=True,
        choices=["mb1", "mb2", "mb3", "mb4", "mb5"],
        help="mb1 field extraction, mb2 stream boundaries, mb3 wire formats, mb4 the M# "
        "memory store (insert/lookup/evict), mb5 the MCP proxy's session pipeline",
    )
    r.add_argument("--corpus", help="corpus Parquet from `tersetalk bench corpus` (mb1-mb3)")
    r.add_argument("--out", required=True, help="result Parquet to write")
    r.add_argument(
        "--repeats",
        type=int,
        help="timed repeats per method (default: the config schema's bench.repeats)",
    )
    r.add_argument(
        "--warmup",
        type=int,
        default=DEFAULT_WARMUP,
        help=f"untimed warmup batches per method (default: {DEFAULT_WARMUP})",
    )
    r.add_argument("--min-batch-ms", type=float, default=DEFAULT_MIN_BATCH_NS / 1e6,
                   help="each timed batch repeats a call until it lasts this long (default: "
                   f"{DEFAULT_MIN_BATCH_NS / 1e6:g})")  # fmt: skip
    r.add_argument("--seed", type=int, default=0, help="seed of the repeat order and MB-2 stream")
    r.add_argument("--chunk-sizes", type=_ints, default=DEFAULT_CHUNK_SIZES,
                   help=f"MB-2 chunk sizes in bytes (default: "
                   f"{','.join(map(str, DEFAULT_CHUNK_SIZES))})")  # fmt: skip
    r.add_argument(
        "--stream-bytes",
        type=int,
        default=DEFAULT_STREAM_BYTES,
        help=f"MB-2 stream length in JSONL bytes (default: {DEFAULT_STREAM_BYTES})",
    )
    r.add_argument("--memory-sizes", type=_ints, default=DEFAULT_MEMORY_SIZES,
                   help=f"MB-4 store sizes in entries (default: "
                   f"{','.join(map(str, DEFAULT_MEMORY_SIZES))})")  # fmt: skip
    r.add_argument("--payload-kib", type=_ints, default=[4, 32, 64, 100],
                   help="MB-5 payload sizes in KiB (default: 4,32,64,100)")  # fmt: skip
    r.add_argument("--calls", type=int, default=1000,
                   help="MB-5 single calls timed for p50/p99 (default: 1000)")  # fmt: skip
    r.set_defaults(func=_cmd_run)


def _add_plot_parser(sub) -> None:
    """``bench plot``: the microbenchmark figure from the result Parquets."""
    p = sub.add_parser(
        "plot",
        help="the microbenchmark figure (PDF and PNG)",
        description="Draw MB-1, MB-2 and MB-3 in one figure.",
    )
    p.add_argument("--mb1", required=True, help="MB-1 result Parquet")
    p.add_argument("--mb2", required=True, help="MB-2 result Parquet")
    p.add_argument("--mb3", required=True, help="MB-3 result Parquet")
    p.add_argument("--mb4", help="MB-4 result Parquet (adds the memory store's panel)")
    p.add_argument("--out-stem", required=True, help="output path without extension")
    p.set_defaults(func=_cmd_plot)
