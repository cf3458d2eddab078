"""The workflow's steps as subcommands: ``sample``, ``run``, ``score``, ``aggregate``,
``stats`` and ``calibrate``. Each handler imports what it uses when it runs, so ``--help``
and the other commands do not pay for it."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from tersetalk.core.cliargs import DEFAULT_CONFIG, add_config_option, nonnegative_int, positive_int

__all__ = ["add_commands"]


def add_commands(sub: Any) -> None:
    """Add the workflow steps' subcommands to ``sub``, in the order ``--help`` lists them."""
    _add_sample(sub)
    _add_run(sub)
    _add_score(sub)
    _add_aggregate(sub)
    _add_stats(sub)
    _add_calibrate(sub)


def _add_sample(sub: Any) -> None:
    """``tersetalk sample``."""
    from tersetalk.tasks.registry import names as task_names

    s = sub.add_parser(
        "sample",
        help="draw the seeded evaluation sample and calibration shard",
        description="Load a task's dataset (checksummed local files or the hub) "
        "and write a seeded evaluation sample and a disjoint calibration shard.",
    )
    s.add_argument(
        "--task",
        required=True,
        choices=task_names(),
        help="which task (the registered ones: built-ins and TERSETALK_TASKS plug-ins)",
    )
    add_config_option(s, "; defaults of the options below")
    s.add_argument(
        "--n",
        type=int,
        help=f"evaluation examples (default: n_eval of the workflow config, {DEFAULT_CONFIG} "
        "in the working directory with any --config over it; without one, required)",
    )
    s.add_argument(
        "--calibration-n",
        type=nonnegative_int,
        help="calibration examples, disjoint from the evaluation ones; 0: none (default: "
        "calibration_n of the workflow config; without one, required)",
    )
    s.add_argument(
        "--seed",
        type=nonnegative_int,
        help="sampling seed, 0 or more (default: seed of the workflow config; without one, "
        "required)",
    )
    s.add_argument("--source", choices=["local", "hub"], help="local shipped files or the HF hub")
    s.add_argument("--data-dir", help="folder with the shipped data (default: data)")
    s.add_argument(
        "--task-options",
        help="JSON of the task's options that decide its examples (toolqa: max_payload_tokens, "
        "questions_per_kind; default: the config's section named after the task)",
    )
    s.add_argument("--out", required=True, help="evaluation sample Parquet to write")
    s.add_argument("--calibration-out", help="calibration shard Parquet to write")
    s.set_defaults(func=_cmd_sample)


def _add_run(sub: Any) -> None:
    """``tersetalk run``."""
    r = sub.add_parser(
        "run",
        help="run one system variant on a sample (resumable)",
        description="Run one (task, system, variant) over a sample file, or several "
        "(repeat --spec-json and --out) one after the other in one process. Finished "
        "examples are checkpointed, so an interrupted run resumes; model calls are "
        "cached, so a rerun makes no calls.",
    )
    r.add_argument("--task", help="task name (must match the sample)")
    r.add_argument("--system", help="registered system name, e.g. freeform")
    r.add_argument(
        "--variant", help="variant name under systems.<system>.variants (default: default)"
    )
    add_config_option(r)
    r.add_argument(
        "--spec-json",
        action="append",
        help="a complete run spec as JSON (what Snakemake passes); overrides --config. "
        "Repeat it, with one --out each, to run several specs over the same sample in one "
        "process (models and imports loaded once)",
    )
    r.add_argument("--sample", required=True, help="sample Parquet from `tersetalk sample`")
    r.add_argument(
        "--out",
        required=True,
        action="append",
        help="run Parquet to write (one row per example); the i-th --out is the i-th --spec-json's",
    )
    r.add_argument(
        "--limit", type=positive_int, help="only the first N examples of the sample (N >= 1)"
    )
    r.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    r.add_argument(
        "--manifest",
        help="once every run has finished, write this JSON file listing each --out with its "
        "SHA-256 (the workflow's batch and sweep jobs declare it as their output)",
    )
    r.add_argument(
        "--events",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="append progress events to <out>.events.jsonl for `tersetalk dashboard --attach` "
        "(default: on, unless the environment sets TERSETALK_EVENTS=off)",
    )
    r.set_defaults(func=_cmd_run)


def _add_score(sub: Any) -> None:
    """``tersetalk score``."""
    c = sub.add_parser(
        "score",
        help="metrics of a run (or several), recomputed with the official scorers",
        description="Compute one row of metrics for a run Parquet file. Repeat --run, "
        "--out-records and --out to score several runs of one task in one process (the "
        "sentence encoder loaded once): the i-th --run is written to the i-th --out and "
        "--out-records.",
    )
    c.add_argument(
        "--run",
        required=True,
        action="append",
        help="run Parquet from `tersetalk run` (repeatable)",
    )
    c.add_argument(
        "--reference",
        help="the free-form run of the same task, for token "
        "reduction and semantic preservation on the same examples",
    )
    c.add_argument(
        "--cache-dir",
        help="keep BERTScore's results under <dir>/bertscore/ and read them back when the "
        "same texts are scored again, without loading the encoder (the workflow passes its "
        "cache_dir; default: computed afresh every time)",
    )
    c.add_argument(
        "--out-records",
        action="append",
        help="per-example metrics Parquet to write (repeatable: one per --run, in order); "
        "given, the run's row also holds the means of the per-example metrics (token "
        "reduction, semantic and answer preservation: the facts each example's brief held, "
        "as the run recorded them)",
    )
    c.add_argument(
        "--out",
        required=True,
        action="append",
        help="metrics Parquet to write, one row (repeatable: one per --run, in order)",
    )
    c.add_argument(
        "--check-manifest",
        action="append",
        default=[],
        metavar="FILE",
        help="a manifest of the job that wrote some of the runs (`tersetalk run --manifest`): "
        "stop with a clear error if a file it lists is missing or changed since (repeatable)",
    )
    c.add_argument(
        "--manifest",
        help="once every run is scored, write this JSON file listing each --out and "
        "--out-records with its SHA-256 (the workflow's score jobs declare it as their output)",
    )
    c.set_defaults(func=_cmd_score)


def _add_aggregate(sub: Any) -> None:
    """``tersetalk aggregate``."""
    a = sub.add_parser(
        "aggregate",
        help="combine per-run metrics into the summary table",
        description="Concatenate per-run metric files into one summary table.",
    )
    a.add_argument("scores", nargs="+", help="metrics Parquet files from `tersetalk score`")
    a.add_argument("--out", required=True, help="summary Parquet to write")
    a.add_argument("--csv", help="also write the summary as CSV here")
    a.set_defaults(func=_cmd_aggregate)


def _add_stats(sub: Any) -> None:
    """``tersetalk stats``."""
    t = sub.add_parser(
        "stats",
        help="non-inferiority and paired token tests between runs",
        description="Paired bootstrap non-inferiority of accuracy and paired "
        "t / Wilcoxon tests of token reduction, per task, for the given "
        "[treatment, control] pairs of system/variant labels.",
    )
    t.add_argument(
        "records",
        nargs="+",
        help="per-example metrics Parquet files (tersetalk score --out-records)",
    )
    t.add_argument(
        "--comparisons",
        required=True,
        help="JSON list of [treatment, control] pairs, e.g. "
        '\'[["tersetalk/default", "freeform/default"]]\'',
    )
    t.add_argument(
        "--planned",
        help="JSON of task -> the system/variant runs scheduled on it; a comparison is then "
        "tested only on the tasks where both of its runs are planned (default: every task)",
    )
    t.add_argument("--margin", type=float, default=0.02, help="non-inferiority margin (0.02)")
    t.add_argument("--alpha", type=float, default=0.05, help="one-sided level (0.05)")
    t.add_argument("--n-resamples", type=int, default=2000, help="bootstrap resamples (2000)")
    t.add_argument("--seed", type=nonnegative_int, default=0, help="bootstrap seed (0)")
    t.add_argument("--out", required=True, help="statistics Parquet to write")
    t.add_argument("--csv", help="also write CSV here")
    t.add_argument("--tex", help="also write a LaTeX table here")
    t.set_defaults(func=_cmd_stats)


def _add_calibrate(sub: Any) -> None:
    """``tersetalk calibrate``."""
    k = sub.add_parser(
        "calibrate",
        help="choose settings from calibration-shard runs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Pick, per system, a grid point by its objective (default: the fewest\n"
        "tokens among those within the margins of the system's reference run: its accuracy\n"
        "within the margin and its gold-reaches-Worker and facts-reaching-Worker rates within\n"
        "the preservation margin; when the reference's accuracy is 0 or its 95% Wilson\n"
        "interval is wider than the margin, accuracy is uninformative and preservation alone\n"
        "decides). Write the choice, the criterion that decided and why, the reference it was\n"
        "judged against and the table it was chosen from (with LLMLingua's achieved-rate\n"
        "distribution where the runs record it) as YAML.",
        epilog="--spec-json keys (all optional; defaults: the config schema's):\n"
        "  reference    system/variant of the default reference run (evaluation.reference;\n"
        "               absent: the first --reference-run)\n"
        "  margin       accuracy margin (evaluation.margin)\n"
        "  systems      system -> options of a system that has runs among RUNS:\n"
        "    objective            fewest_tokens_within_margin (default): fewest tokens among\n"
        "                         the points within the margins of the reference (preservation\n"
        "                         alone when accuracy is uninformative), else the most accurate\n"
        "                         (the best-preserving when accuracy is uninformative);\n"
        "                         max_accuracy: the most accurate point, ties to fewer tokens\n"
        "    preservation_margin  how far below the reference's gold-reaches-Worker and\n"
        "                         facts-reaching-Worker rates a point may fall\n"
        "    reference            system/variant of the run this system is judged against\n"
        "                         instead (calibration.<system>.reference)\n"
        'Example: --spec-json \'{"margin": 0.02, "systems": {"hybrid": {"reference":\n'
        '  "llmlingua/default", "objective": "max_accuracy"}}}\'\n'
        "The workflow passes the config's (tersetalk.pipeline.calibration.options).",
    )
    k.add_argument(
        "runs",
        nargs="+",
        help="calibration run Parquet files (tersetalk run on the "
        "calibration shard); their specs are read from the file metadata",
    )
    k.add_argument("--task", required=True, help="the task the runs belong to")
    k.add_argument(
        "--reference-run",
        required=True,
        nargs="+",
        metavar="RUN",
        help="the reference runs on the same shard: the default reference and each system's "
        "own; each is known by the system/variant of its run spec (file metadata)",
    )
    k.add_argument(
        "--sample",
        required=True,
        help="the calibration sample the runs were made on "
        "(results/samples/<task>.calibration.parquet): every run's examples must be from it",
    )
    k.add_argument(
        "--spec-json",
        default="{}",
        metavar="JSON",
        help="the options as one JSON object (keys below; default: {})",
    )
    k.add_argument("--out", required=True, help="calibration YAML to write")
    k.set_defaults(func=_cmd_calibrate)


def _cmd_sample(args: argparse.Namespace) -> None:
    from tersetalk.core.io import write_parquet_atomic
    from tersetalk.pipeline.config import ConfigError, json_option, load_workflow_config
    from tersetalk.tasks.loading import load_records, sample

    # the workflow config (config/config.yaml of the working directory, as Snakemake reads
    # it, with any --config over it); without one, the options alone, and no guessed
    # default for what decides the sample: the same command draws the same examples
    # wherever it is started, or refuses
    cfg = load_workflow_config(args.config) if args.config or Path(DEFAULT_CONFIG).is_file() else {}
    given = {"--n": args.n, "--calibration-n": args.calibration_n, "--seed": args.seed}
    if not cfg:
        missing = [flag for flag, value in given.items() if value is None]
        if missing:
            raise ConfigError(
                f"no workflow config here ({Path.cwd() / DEFAULT_CONFIG} does not exist) to "
                f"take {', '.join(missing)} from: give {' '.join(f'{m} N' for m in missing)}, "
                "or --config FILE, or run from the workflow's folder"
            )
    n = args.n if args.n is not None else cfg["n_eval"]
    cal_n = args.calibration_n if args.calibration_n is not None else cfg["calibration_n"]
    seed = args.seed if args.seed is not None else cfg["seed"]
    source = args.source or cfg.get("data", {}).get("source", "local")
    data_dir = args.data_dir or cfg.get("data", {}).get("dir", "data")
    if args.task_options:
        example = "a JSON object such as '{\"max_payload_tokens\": 1000}'"
        options = json_option(args.task_options, "--task-options", dict, example)
    else:
        options = cfg.get(args.task, {})
    records = load_records(args.task, source=source, data_dir=data_dir, options=options)
    ev, cal = sample(args.task, records, n=n, calibration_n=cal_n, seed=seed)
    meta = {"task": args.task, "n": n, "calibration_n": cal_n, "seed": seed, "source": source,
            "task_options": options}  # fmt: skip
    write_parquet_atomic(ev, Path(args.out), meta)
    if args.calibration_out:
        write_parquet_atomic(cal, Path(args.calibration_out), meta)
    logging.info(
        "sampled %d eval + %d calibration examples of %s (seed %d, %s)",
        len(ev),
        len(cal),
        args.task,
        seed,
        source,
    )


def _cmd_run(args: argparse.Namespace) -> None:
    """Run each ``--spec-json`` into its ``--out``, paired in order, one after the other.

    Why several runs in one process: a job's fixed costs (Python and pandas, the run
    code, tiktoken's encodings, torch and LLMLingua's compressor for the systems that
    compress) are paid once for all of them. Each run is still on its own: its own
    client, checkpoint, caches' counters and file, exactly as if run alone. A run that
    fails does not stop the others; the first failure is raised once all have run.
    """
    from tersetalk.core.io import write_manifest
    from tersetalk.pipeline.config import (
        ConfigError,
        load_workflow_config,
        run_spec,
        spec_from_json,
    )
    from tersetalk.pipeline.runner import run

    outs = args.out
    if args.spec_json:
        specs = [spec_from_json(text) for text in args.spec_json]
    else:
        if not (args.task and args.system):
            raise ConfigError("give --task and --system (or --spec-json)")
        specs = [
            run_spec(
                load_workflow_config(args.config), args.task, args.system, args.variant or "default"
            )
        ]
    if len(outs) != len(specs):
        raise ConfigError(
            f"got {len(specs)} run spec(s) and {len(outs)} --out: give one --out per "
            "--spec-json, paired in the order given (without --spec-json, one --out)"
        )
    if len(set(outs)) != len(outs):
        raise ConfigError("--out names the same file twice: every run needs its own file")
    for out in map(Path, outs):  # before the first example, not after the last
        if out.is_dir():
            raise ConfigError(
                f"--out {out} is a folder; name the run Parquet file to write, e.g. "
                f"{out / 'run.parquet'}"
            )
        folder = next((p for p in out.parents if p.exists()), None)
        if folder is not None and not folder.is_dir():
            raise ConfigError(f"--out {out}: {folder} is a file, not a folder; choose another path")
    for spec in specs:
        for key in ("task", "system", "variant"):
            given = getattr(args, key)
            if given and given != spec[key]:
                raise ConfigError(f"--{key} {given} disagrees with the spec ({spec[key]})")
    failed: list[tuple[str, BaseException]] = []
    for i, (spec, out) in enumerate(zip(specs, outs, strict=True), 1):
        # run() reads the sample with task=spec["task"] before any model loads: a sample
        # of another task would otherwise run to the end with rows labelled with this task
        try:
            df = run(spec, args.sample, out, limit=args.limit, progress=not args.no_progress,
                     events=args.events)  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - the other runs go on; raised below
            if len(specs) == 1:
                raise
            logging.error("run %d of %d (%s) failed: %s", i, len(specs), out, exc)
            failed.append((out, exc))
            continue
        logging.info("wrote %s (%d rows, %d errors)", out, len(df), int(df["error"].notna().sum()))
    if failed:
        logging.error(
            "%d of %d runs failed: %s", len(failed), len(specs), ", ".join(o for o, _ in failed)
        )
        raise failed[0][1]
    if args.manifest:
        write_manifest(args.manifest, outs, "tersetalk run")


def _cmd_score(args: argparse.Namespace) -> None:
    """Score each ``--run`` into its ``--out`` (and ``--out-records``), paired in order.

    Why several runs in one process: per-example metrics load BERTScore's sentence encoder
    (torch and transformers, seconds per process), the sample and the reference run are
    read once, and the runs' BERTScore is one call of the encoder, which embeds a text
    the runs share once (:func:`~tersetalk.metrics.per_record.per_record_metrics_many`).
    """
    from tersetalk.core.io import (
        check_manifest,
        read_parquet,
        run_task_options,
        write_manifest,
        write_parquet_atomic,
    )
    from tersetalk.metrics.per_record import per_record_metrics_many
    from tersetalk.metrics.summary import example_scores, run_metrics
    from tersetalk.pipeline.config import ConfigError
    from tersetalk.systems import pooled_rates

    paths, outs, records_outs = args.run, args.out, args.out_records or []
    if len(outs) != len(paths) or (records_outs and len(records_outs) != len(paths)):
        given = f"{len(paths)} --run and {len(outs)} --out" + (
            f" and {len(records_outs)} --out-records" if records_outs else ""
        )
        raise ConfigError(
            f"got {given}: give one --out per --run (and, if any, one --out-records per "
            "--run), paired in the order given"
        )
    for manifest in args.check_manifest:
        check_manifest(manifest)
    runs = [read_parquet(path, "run") for path in paths]
    # each example's correctness, computed once here with the task's scorer (and its
    # config section as the run had it) and read by the per-example metrics and the
    # run's aggregate alike; the run's own score columns are its live check only
    scores = [
        example_scores(run, run_task_options(path)) for run, path in zip(runs, paths, strict=True)
    ]
    per_records: list[Any] = [None] * len(runs)
    if records_outs:
        reference = read_parquet(args.reference, "reference run") if args.reference else None
        per_records = per_record_metrics_many(runs, reference, args.cache_dir, scores,
                                              [f"run file {p}" for p in paths])  # fmt: skip
    for i, (run, per_record, out) in enumerate(zip(runs, per_records, outs, strict=True)):
        if per_record is not None and records_outs:
            write_parquet_atomic(per_record, Path(records_outs[i]))
        # the pooled rates the run's system declares: the top floor reads the registry
        rates = pooled_rates(str(run["system"].iloc[0])) if len(run) else {}
        metrics = run_metrics(run, per_record, rates, scores[i])
        write_parquet_atomic(metrics, Path(out))
        logging.info(
            "%s", metrics.iloc[0][["task", "system", "variant", "n", "accuracy"]].to_dict()
        )
    if args.manifest:
        write_manifest(args.manifest, [*records_outs, *outs], "tersetalk score")


def _cmd_aggregate(args: argparse.Namespace) -> None:
    from tersetalk.core.io import write_csv_atomic, write_parquet_atomic
    from tersetalk.metrics.summary import aggregate

    df = aggregate(args.scores)
    write_parquet_atomic(df, Path(args.out))
    if args.csv:
        write_csv_atomic(df, args.csv)
        from tersetalk.core import figmeta  # n, model, seed, commit beside the table

        figmeta.write(args.csv, figmeta.describe(df, out=args.csv))
    cols = ["task", "system", "variant", "n", "n_errors", "accuracy", "tokens_total_cl100k_mean"]
    print(df[cols].to_string(index=False))


def _cmd_stats(args: argparse.Namespace) -> None:
    from tersetalk.core.io import (
        read_parquet,
        write_csv_atomic,
        write_parquet_atomic,
        write_text_atomic,
    )
    from tersetalk.pipeline.config import ConfigError, json_option
    from tersetalk.stats import StatsError, noninferiority_table, noninferiority_tex

    levels = dict(margin=args.margin, alpha=args.alpha, n_resamples=args.n_resamples,
                  seed=args.seed)  # fmt: skip
    comparisons = json_option(args.comparisons, "--comparisons", list,
                               '\'[["tersetalk/default", "freeform/default"]]\'')  # fmt: skip
    planned = (json_option(args.planned, "--planned", dict,
                            '\'{"hotpotqa": ["freeform/default"]}\'')
               if args.planned else None)  # fmt: skip
    frames = [read_parquet(p, "per-example metrics") for p in args.records]
    try:
        df, skipped = noninferiority_table(frames, comparisons, planned=planned, **levels)
    except StatsError as exc:
        raise ConfigError(str(exc)) from None
    write_parquet_atomic(df, Path(args.out))
    if args.csv:
        write_csv_atomic(df, args.csv)
    if args.tex:
        write_text_atomic(noninferiority_tex(df, skipped, **levels), args.tex)
    import pandas as pd

    from tersetalk.core import figmeta  # n, model, seed, commit beside each table

    rows = pd.concat(frames, ignore_index=True) if frames else None
    recorded = figmeta.describe(rows, out=args.csv or args.out, bootstrap_seed=args.seed)
    for path in filter(None, (args.csv, args.tex)):
        figmeta.write(path, recorded)
    print(df.to_string(index=False))


def _cmd_calibrate(args: argparse.Namespace) -> None:
    from tersetalk.pipeline import calibration as cal
    from tersetalk.pipeline.config import json_option

    example = '\'{"margin": 0.02, "systems": {"tersetalk": {"objective": "max_accuracy"}}}\''
    spec = json_option(args.spec_json, "--spec-json", dict, example)
    doc = cal.calibrate_files(args.task, args.runs, args.reference_run, args.sample, spec)
    cal.write(doc, Path(args.out))
    from tersetalk.core import figmeta  # n, model, seed, commit beside the file

    runs = [*args.runs, *args.reference_run]
    figmeta.write(args.out, figmeta.describe(figmeta.rows_of(runs), out=args.out))
    cal.log_choices(doc)
