"""``tersetalk``: one subcommand per workflow step.

Every Snakemake rule calls one of these, and each works alone, so a user can
rerun a single step or point a step at their own files.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tersetalk import __version__
from tersetalk.cliargs import (
    DEFAULT_CONFIG,
    LazySubParsers,
    add_config_option,
    add_renamed_option,
    nonnegative_int,
    positive_int,
)

__all__ = ["DEFAULT_CONFIG", "add_config_option", "add_renamed_option", "build_parser",
           "load_workflow_config", "main", "plain_text", "tidy_parser"]  # fmt: skip


#: loggers that log one line per HTTP request at INFO (the ``openai`` backend's client);
#: quiet unless ``-v``, so a run's log is its progress, not its traffic
HTTP_LOGGERS = ("httpx", "httpcore", "openai", "httpx2", "urllib3")

#: the plug-in modules' subcommands: module -> {name: one-line help}, in the order of
#: ``tersetalk --help``. Read to list them without importing a plug-in; ``tersetalk X``
#: imports X's module alone, whose ``add_commands(subparsers)`` adds X's parser (issue
#: 33: a job pays for the modules it uses). tests/test_cli_imports.py checks that each
#: module adds exactly these names with these helps.
PLUGIN_COMMANDS: dict[str, dict[str, str]] = {
    "tersetalk.encoders.cli": {
        "prepare-compressor": "make LLMLingua's local model (HF folder) from the embedded GGUF",
    },
    "tersetalk.mediator.cli": {"mediator": "the Mediated Minimal-Signaling mediator"},
    "tersetalk.msp.cli": {"msp": "the Minimal Signaling Protocol"},
    "tersetalk.bench.cli": {
        "bench": "microbenchmarks MB-1..4 (parsing, stream framing, wire formats, M# store), "
        "concurrency",
    },
    "tersetalk.metrics.audit_cli": {
        "audit": "per-line token audit of run messages: payload vs protocol overhead",
    },
    "tersetalk.formats.cli": {
        "formats": "format-adaptive encoding of JSON / Markdown payloads (knapsack, hints, "
        "savings)",
    },
    "tersetalk.dashboard.cli": {
        "dashboard": "web dashboard: live mediator pipeline, live workflow runs, results browser",
    },
    "tersetalk.stats_sim_cli": {
        "stats-sim": "simulation study of the statistics: type I error, power, interval coverage",
    },
    "tersetalk.stats.targets": {
        "targets": "the TerseTalk design's targets: measured, met / not met / inconclusive",
    },
    "tersetalk.metrics.topology_cli": {
        "topology": "the topology study's tables and figures from routed runs",
    },
    "tersetalk.topology_fit_cli": {
        "topology-signals": "the router's signals of a sample's briefs (no Worker runs)",
        "topology-fit": "fit the router's weights and θ on briefs' signals (logistic regression)",
        "topology-selection": "selection accuracy of briefs' signals, by the variant's rule and "
        "the fitted one",
        "route": "the router's signals and decision for each record of a file (offline)",
        "topology-heldout": "the router on held-out briefs, leave-one-task-out and "
        "leave-one-format-out",
    },
    "tersetalk.shards": {
        "shard-sample": "write one shard of a sample (run.shard_size examples, in sample order)",
        "merge-runs": "assemble a run file from its shards' run files",
    },
    "tersetalk.sensitivity": {"models": "model sensitivity (sensitivity.models)"},
    "tersetalk.mcp.cli": {
        "mcp-proxy": "an MCP server that re-encodes another MCP server's tool results",
    },
    "tersetalk.mcp.group_cli": {"mcp": "the MCP proxy's tools: tune it, read its local telemetry"},
    "tersetalk.mcp.experiment_cli": {
        "mcp-experiment": "the proxy on real MCP servers",
    },
    "tersetalk.results_doc": {
        "results-doc": "render a model's results folder as Markdown (RESULTS.md)",
    },
    "tersetalk.columns": {
        "columns": "the data dictionary: every output column's type, unit and meaning",
    },
    "tersetalk.overhead": {
        "overhead": "the workflow's own overhead: wall time against the model floor (overhead.csv)",
    },
    "tersetalk.plan": {
        "plan": "a config's model calls and tokens counted from its DAG, and the hours they take",
    },
}

#: the errors a subcommand reports as one line and exit code 2: (module, class name). Looked
#: up only in modules already imported (a module never imported raised none of its
#: errors), so a job does not import the calibration module (scipy) to catch its error.
EXPECTED_ERRORS = (
    ("tersetalk.configio", "ConfigError"),
    ("tersetalk.models.base", "ModelError"),
    ("tersetalk.tasks.loading", "TaskDataError"),
    ("tersetalk.calibration", "CalibrationError"),
    ("tersetalk.io", "InputFileError"),
    ("tersetalk.runner", "RunIncompleteError"),
    ("tersetalk.tasks.registry", "TaskPluginError"),
    ("tersetalk.mediator.errors", "MediatorConfigError"),
)


def _setup_logging(level: str, verbose: bool = False) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for name in HTTP_LOGGERS:  # NOTSET: the level above, as given by --log-level
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.WARNING)


def _old_mcp_spellings(name: str, parser: argparse.ArgumentParser) -> None:
    """``tersetalk formats tune|telemetry``, the MCP proxy's tools before they moved under
    ``tersetalk mcp``: added to the formats group when it is built, here (the formats
    study stands below the MCP proxy and does not import it); each warns, then runs."""
    if name != "formats":
        return
    from tersetalk.mcp.group_cli import COMMANDS, old_spelling

    fs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for module, commands in COMMANDS.items():
        for command, help in commands.items():
            fs.add_lazy(command, help, old_spelling(module, "formats"))


def load_workflow_config(paths: Sequence[str | Path] = ()) -> dict:
    """The workflow config a subcommand's ``--config`` names, validated.

    Layered as Snakemake layers ``--configfile`` over the Snakefile's ``configfile:``:
    the default config (:data:`DEFAULT_CONFIG`, when the working directory has one),
    then each given file merged over it in order, then the schema's defaults for what
    none of them sets. So a file holding only ``n_eval: 3`` changes only ``n_eval``.
    Why one function: every subcommand that takes ``--config`` reads it the same way,
    and a file means what it means to ``snakemake --configfile``.
    """
    from tersetalk.config import ConfigError, load_config

    layers = [Path(p) for p in paths]
    default = Path(DEFAULT_CONFIG)
    if default.is_file():
        if not (layers and layers[0].resolve() == default.resolve()):
            layers.insert(0, default)
        return load_config(*layers)
    try:
        return load_config(*layers)
    except ConfigError as exc:
        raise ConfigError(
            f"{exc}\n(there is no {DEFAULT_CONFIG} under {Path.cwd()} for --config to be "
            "layered over: run from the workflow's folder, or give --config files that "
            "together set every required key)"
        ) from None


_RST_ROLE = re.compile(r":[\w-]+:`~?([^`<]*?)\s*(?:<[^`>]*>)?`")
_RST_LINK = re.compile(r"`([^`<]+?)\s*<([^`>]+)>`__?")


def plain_text(text: str | None) -> str | None:
    """Help text without reStructuredText markup: docstrings double as descriptions.

    ``code`` and :role:`target` become their text (``~a.b`` its last part), a link its
    text and address, ``**bold**`` its text, and a literal-block ``::`` a colon.
    """
    if not text:
        return text

    def role(m: re.Match) -> str:
        inner = m.group(1)
        return inner.rsplit(".", 1)[-1] if m.group(0).split("`", 1)[1].startswith("~") else inner

    text = _RST_ROLE.sub(role, text)
    text = _RST_LINK.sub(r"\1 (\2)", text)
    text = re.sub(r"``(.+?)``", r"\1", text, flags=re.S)
    text = re.sub(r"\*\*(.+?)\*\*", r"\1", text)
    text = re.sub(r"`([^`]+)`_\b", r"\1", text)
    text = re.sub(r"(?m)^\s*::\s*$\n?", "", text)
    return re.sub(r"(?m)(\S)::$", r"\1:", text)


def _subcommand_missing(parser: argparse.ArgumentParser, choices: Sequence[str]):
    listed = f": {', '.join(choices)}" if len(choices) <= 8 else ""
    see = f"see {parser.prog} --help"

    def fail(args: argparse.Namespace) -> None:
        parser.error(f"choose a subcommand{listed} ({see})")

    return fail


def tidy_parser(parser: argparse.ArgumentParser, top: bool = True) -> None:
    """What every (sub)command's parser shares, applied after the plug-ins added theirs.

    Plain help text (no RST; a subcommand without a description gets its one-line help);
    a missing subcommand is an error that lists the choices (not the name of an internal
    argument); ``-v`` is accepted after the subcommand too.
    Works on any one parser, so a parser built later (lazily) can be tidied alone.
    """
    parser.description = plain_text(parser.description)
    parser.epilog = plain_text(parser.epilog)
    if not top and not any("-v" in a.option_strings for a in parser._actions):
        parser.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            default=argparse.SUPPRESS,
            help="also log each HTTP request to the model (as tersetalk -v)",
        )
    for action in parser._actions:
        if isinstance(action.help, str):
            action.help = plain_text(action.help)
        if isinstance(action, argparse._SubParsersAction):
            _tidy_subcommands(action)
            if action.required:
                action.required = False
                parser.set_defaults(func=_subcommand_missing(parser, list(action.choices)))


def _tidy_subcommands(action: argparse._SubParsersAction) -> None:
    """:func:`tidy_parser` on each subcommand's parser; a lazy one's when it is built."""
    helps = {}
    for choice in action._choices_actions:
        choice.help = plain_text(choice.help)
        helps[choice.dest] = choice.help
    seen: set[int] = set()

    def tidy(name: str, sub: argparse.ArgumentParser) -> None:
        if not sub.description and helps.get(name):  # at least what the list says
            sub.description = helps[name][0].upper() + helps[name][1:] + "."
        if id(sub) not in seen:  # once per parser (an alias shares its parser)
            seen.add(id(sub))
            tidy_parser(sub, top=False)

    if isinstance(action, LazySubParsers):
        action.on_build.append(tidy)
        built = action.built_items()
    else:
        built = list(action.choices.items())
    for name, sub in built:
        tidy(name, sub)


def _json_option(text: str, option: str, kind: type, example: str) -> Any:
    """The JSON value of a command-line option, or a ConfigError naming the option.

    Why not ``json.loads`` alone: a shell-quoting slip or a wrong shape would end in a
    traceback; this says which option, what is wrong and what to pass.
    """
    from tersetalk.config import ConfigError
    from tersetalk.io import load_json_text

    try:
        value = load_json_text(text, option, ConfigError)
    except ConfigError as exc:  # nested too deep
        raise ConfigError(f"{exc}; pass {example}") from None
    except ValueError as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ConfigError(
            f"{option} is not valid JSON ({reason}; got {text[:80]!r}); pass {example}, "
            "quoted for the shell"
        ) from None
    if not isinstance(value, kind):
        raise ConfigError(
            f"{option} must be a JSON {_JSON_KINDS[kind]}, got {_json_kind(value)}; pass {example}"
        )
    return value


_JSON_KINDS = {dict: "object", list: "array", str: "string", int: "integer"}


def _json_kind(value: object) -> str:
    """The JSON name of a decoded value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, float):
        return "number"
    return _JSON_KINDS.get(type(value), type(value).__name__)


#: the keys of a run spec (what :func:`tersetalk.config.run_spec` writes) and their types
_SPEC_KEYS: dict[str, type] = {"task": str, "system": str, "variant": str,
                               "variant_settings": dict, "seed": int, "models": dict,
                               "generation": dict, "pipeline": dict, "task_options": dict,
                               "cache_dir": str}  # fmt: skip
_SPEC_OPTIONAL_KEYS: dict[str, type] = {"calibration_file": str, "sensitivity_model": str}


def _spec_from_json(text: str) -> dict:
    """The run spec of ``--spec-json``, its keys, their types and its config sections'
    values (:func:`tersetalk.config.check_run_spec`) checked before the run."""
    from tersetalk.config import ConfigError, check_run_spec

    example = "the run spec Snakemake passes (a JSON object, see config.run_spec)"
    spec = _json_option(text, "--spec-json", dict, example)
    missing = [k for k in _SPEC_KEYS if k not in spec]
    if missing:
        raise ConfigError(f"--spec-json lacks key(s) {', '.join(missing)}; pass {example}")
    for key, kind in {**_SPEC_KEYS, **_SPEC_OPTIONAL_KEYS}.items():
        if key in spec and (
            not isinstance(spec[key], kind) or (kind is int and isinstance(spec[key], bool))
        ):
            raise ConfigError(
                f"--spec-json key {key!r} must be a JSON {_JSON_KINDS[kind]}, got "
                f"{_json_kind(spec[key])}; pass {example}"
            )
    check_run_spec(spec, "--spec-json")
    return spec


def _cmd_sample(args: argparse.Namespace) -> None:
    from tersetalk.config import ConfigError
    from tersetalk.io import write_parquet_atomic
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
        options = _json_option(args.task_options, "--task-options", dict, example)
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
    from tersetalk.config import ConfigError, run_spec
    from tersetalk.runner import run

    outs = args.out
    if args.spec_json:
        specs = [_spec_from_json(text) for text in args.spec_json]
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


def _cmd_score(args: argparse.Namespace) -> None:
    """Score each ``--run`` into its ``--out`` (and ``--out-records``), paired in order.

    Why several runs in one process: per-example metrics load BERTScore's sentence encoder
    (torch and transformers, seconds per process), the sample and the reference run are
    read once, and the runs' BERTScore is one call of the encoder, which embeds a text
    the runs share once (:func:`~tersetalk.metrics.per_record.per_record_metrics_many`).
    """
    from tersetalk.config import ConfigError
    from tersetalk.io import read_parquet, write_parquet_atomic
    from tersetalk.metrics.per_record import per_record_metrics_many
    from tersetalk.metrics.summary import run_metrics
    from tersetalk.systems import pooled_rates
    from tersetalk.tasks.loading import read_sample

    paths, outs, records_outs = args.run, args.out, args.out_records or []
    if len(outs) != len(paths) or (records_outs and len(records_outs) != len(paths)):
        given = f"{len(paths)} --run and {len(outs)} --out" + (
            f" and {len(records_outs)} --out-records" if records_outs else ""
        )
        raise ConfigError(
            f"got {given}: give one --out per --run (and, if any, one --out-records per "
            "--run), paired in the order given"
        )
    runs = [read_parquet(path, "run") for path in paths]
    per_records: list[Any] = [None] * len(runs)
    if args.sample:
        samples = {row["example_id"]: row for row in read_sample(args.sample)}
        reference = read_parquet(args.reference, "reference run") if args.reference else None
        per_records = per_record_metrics_many(runs, reference, samples, args.cache_dir)
    for i, (run, per_record, out) in enumerate(zip(runs, per_records, outs, strict=True)):
        if per_record is not None and records_outs:
            write_parquet_atomic(per_record, Path(records_outs[i]))
        # the pooled rates the run's system declares: the top floor reads the registry
        rates = pooled_rates(str(run["system"].iloc[0])) if len(run) else {}
        metrics = run_metrics(run, per_record, rates)
        write_parquet_atomic(metrics, Path(out))
        logging.info(
            "%s", metrics.iloc[0][["task", "system", "variant", "n", "accuracy"]].to_dict()
        )


def _cmd_aggregate(args: argparse.Namespace) -> None:
    from tersetalk.io import write_csv_atomic, write_parquet_atomic
    from tersetalk.metrics.summary import aggregate

    df = aggregate(args.scores)
    write_parquet_atomic(df, Path(args.out))
    if args.csv:
        write_csv_atomic(df, args.csv)
        from tersetalk import figmeta  # n, model, seed, commit beside the table

        figmeta.write(args.csv, figmeta.describe(df, out=args.csv))
    cols = ["task", "system", "variant", "n", "n_errors", "accuracy", "tokens_total_cl100k_mean"]
    print(df[cols].to_string(index=False))


def _cmd_stats(args: argparse.Namespace) -> None:
    from tersetalk.config import ConfigError
    from tersetalk.io import read_parquet, write_csv_atomic, write_parquet_atomic, write_text_atomic
    from tersetalk.stats import StatsError, noninferiority_table, noninferiority_tex

    levels = dict(margin=args.margin, alpha=args.alpha, n_resamples=args.n_resamples,
                  seed=args.seed)  # fmt: skip
    comparisons = _json_option(args.comparisons, "--comparisons", list,
                               '\'[["tersetalk/default", "freeform/default"]]\'')  # fmt: skip
    planned = (_json_option(args.planned, "--planned", dict,
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

    from tersetalk import figmeta  # n, model, seed, commit beside each table

    rows = pd.concat(frames, ignore_index=True) if frames else None
    recorded = figmeta.describe(rows, out=args.csv or args.out, bootstrap_seed=args.seed)
    for path in filter(None, (args.csv, args.tex)):
        figmeta.write(path, recorded)
    print(df.to_string(index=False))


def _cmd_calibrate(args: argparse.Namespace) -> None:
    from tersetalk import calibration as cal

    example = '\'{"margin": 0.02, "systems": {"tersetalk": {"objective": "max_accuracy"}}}\''
    spec = _json_option(args.spec_json, "--spec-json", dict, example)
    doc = cal.calibrate_files(args.task, args.runs, args.reference_run, args.sample, spec)
    cal.write(doc, Path(args.out))
    from tersetalk import figmeta  # n, model, seed, commit beside the file

    runs = [*args.runs, *args.reference_run]
    figmeta.write(args.out, figmeta.describe(figmeta.rows_of(runs), out=args.out))
    cal.log_choices(doc)


def _cmd_plot(args: argparse.Namespace) -> None:
    import pandas as pd

    from tersetalk.io import read_parquet
    from tersetalk.plots import figures as F
    from tersetalk.plots.tables import write_main_table

    records = pd.concat(
        [read_parquet(p, "per-example metrics") for p in args.records], ignore_index=True
    )
    summary = F.with_intervals(read_parquet(args.summary, "summary"), records, seed=args.seed)
    out = Path(args.out_dir)
    paths = F.quality_vs_tokens(summary, out / "quality_vs_tokens")
    paths += F.token_breakdown(summary, out / "token_breakdown")
    paths += F.accuracy_by_length(records, args.reference, out / "accuracy_by_length")
    tables = write_main_table(summary, args.tables_dir, args.seed)
    logging.info("wrote %s", ", ".join(map(str, paths + tables)))


def _ablation_inputs(scores: list[str], records: list[str]):
    """The summary of the score files and the concatenated per-example metrics (None
    without ``--records``: the token panel then has no intervals, and says so)."""
    from tersetalk.metrics.summary import aggregate

    summary = aggregate(scores)
    if not records:
        return summary, None
    import pandas as pd

    from tersetalk.io import read_parquet

    frames = [read_parquet(p, "per-example metrics") for p in records]
    return summary, pd.concat(frames, ignore_index=True)


def _draw_ablation(summary, records, system, variants, setting, values, out_stem) -> list:
    from tersetalk.plots.figures import ablation
    from tersetalk.systems import ablation_axis

    axis = ablation_axis(system, setting)  # how the system draws this setting
    return ablation(
        summary, system, variants, setting, values, out_stem,
        axis_label=axis.label, axis_panels=axis.panels, records=records,
    )  # fmt: skip


def _cmd_plot_ablation(args: argparse.Namespace) -> None:
    values = _json_option(args.values, "--values", dict, "'{\"caps_small\": 16}'")
    summary, records = _ablation_inputs(args.scores, args.records)
    paths = _draw_ablation(
        summary, records, args.system, args.variants.split(","), args.setting, values,
        args.out_stem,
    )  # fmt: skip
    logging.info("wrote %s", ", ".join(map(str, paths)))


_ABLATIONS_EXAMPLE = (
    '\'{"caps": {"system": "tersetalk", "setting": "caps", "variants": ["caps_small"], '
    '"values": {"caps_small": 16}}}\''
)


def _cmd_plot_ablations(args: argparse.Namespace) -> None:
    """Every ablation's figure from one read of the score files: one process, one import
    of pandas and matplotlib for all of them (one job in the workflow, not one each)."""
    from tersetalk.config import ConfigError

    specs = _json_option(args.ablations_json, "--ablations-json", dict, _ABLATIONS_EXAMPLE)
    for name, spec in specs.items():
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):  # it names a file in --out-dir
            raise ConfigError(
                f"--ablations-json: ablation name {name!r} must be letters, digits, _ and - "
                "(it names the file ablation_<name>.png)"
            )
        missing = {"system", "setting", "variants"} - set(spec if isinstance(spec, dict) else ())
        if missing or not isinstance(spec.get("variants"), list):
            raise ConfigError(
                f"--ablations-json: ablation {name!r} needs 'system', 'setting' and a list "
                f"of 'variants' (missing: {', '.join(sorted(missing)) or 'a list'}); "
                f"pass {_ABLATIONS_EXAMPLE}"
            )
        if not isinstance(spec.get("values") or {}, dict):
            raise ConfigError(
                f"--ablations-json: ablation {name!r}: 'values' must be an object "
                f"{{variant: x value}}, got {_json_kind(spec['values'])}; pass {_ABLATIONS_EXAMPLE}"
            )
    summary, records = _ablation_inputs(args.scores, args.records)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, spec in specs.items():
        paths = _draw_ablation(
            summary, records, spec["system"], spec["variants"], spec["setting"],
            spec.get("values") or {}, out / f"ablation_{name}",
        )  # fmt: skip
        logging.info("wrote %s", ", ".join(map(str, paths)))


def _add_records_option(parser: argparse.ArgumentParser) -> None:
    """plot-ablation's and plot-ablations' ``--records``."""
    parser.add_argument(
        "--records",
        nargs="*",
        default=[],
        help="the runs' per-example metrics Parquet files (token intervals); default: none",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tersetalk",
        description="Measure token-efficient message protocols between LLM agents. "
        "Each subcommand is one step of the Snakemake workflow.",
    )
    p.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging verbosity (default: INFO)",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also log each HTTP request to the model (the openai backend's httpx, httpcore "
        "and openai loggers; quiet otherwise)",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", action=LazySubParsers)
    sub.on_build.append(_old_mcp_spellings)
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
        "--events",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="append progress events to <out>.events.jsonl for `tersetalk dashboard --attach` "
        "(default: on, unless the environment sets TERSETALK_EVENTS=off)",
    )
    r.set_defaults(func=_cmd_run)

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
        "--sample",
        help="the run's sample Parquet; enables per-example metrics "
        "(answer preservation needs the original records)",
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
        help="per-example metrics Parquet to write (repeatable: one per --run, in order)",
    )
    c.add_argument(
        "--out",
        required=True,
        action="append",
        help="metrics Parquet to write, one row (repeatable: one per --run, in order)",
    )
    c.set_defaults(func=_cmd_score)

    a = sub.add_parser(
        "aggregate",
        help="combine per-run metrics into the summary table",
        description="Concatenate per-run metric files into one summary table.",
    )
    a.add_argument("scores", nargs="+", help="metrics Parquet files from `tersetalk score`")
    a.add_argument("--out", required=True, help="summary Parquet to write")
    a.add_argument("--csv", help="also write the summary as CSV here")
    a.set_defaults(func=_cmd_aggregate)

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
        "The workflow passes the config's (tersetalk.calibration.options).",
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
        "(results/samples/<task>.calibration.parquet): the facts whose arrival is checked",
    )
    k.add_argument(
        "--spec-json",
        default="{}",
        metavar="JSON",
        help="the options as one JSON object (keys below; default: {})",
    )
    k.add_argument("--out", required=True, help="calibration YAML to write")
    k.set_defaults(func=_cmd_calibrate)

    f = sub.add_parser(
        "plot",
        help="the paper's figures and main table",
        description="Quality vs tokens (Pareto frontier, 95% CIs), token "
        "breakdown by role, accuracy by message length; main table as CSV "
        "and LaTeX.",
    )
    f.add_argument("--summary", required=True, help="summary Parquet from `tersetalk aggregate`")
    f.add_argument(
        "--records",
        nargs="+",
        required=True,
        help="per-example metrics Parquet files (tersetalk score --out-records)",
    )
    f.add_argument(
        "--reference",
        default="freeform/default",
        help="system/variant whose message lengths define the length bins",
    )
    f.add_argument("--out-dir", default="figures", help="folder for the figures (figures)")
    f.add_argument("--tables-dir", default="results/tables", help="folder for the tables")
    f.add_argument(
        "--seed", type=nonnegative_int, default=0, help="bootstrap seed for the intervals (0)"
    )
    f.set_defaults(func=_cmd_plot)

    g = sub.add_parser(
        "plot-ablation",
        help="one ablation figure (tokens/accuracy vs a setting)",
        description="Tokens and accuracy against one variant setting of a "
        "system; for caps also accuracy against overflow rate.",
    )
    g.add_argument("scores", nargs="+", help="per-run metrics Parquet files of the ablation")
    g.add_argument("--system", required=True, help="system whose variants are compared")
    g.add_argument("--variants", required=True, help="comma-separated variant names, in order")
    g.add_argument("--setting", required=True, help="name of the varied setting (axis label)")
    g.add_argument("--values", default="{}", help="JSON {variant: x value}; default: the names")
    g.add_argument("--out-stem", required=True, help="output path without extension")
    _add_records_option(g)
    g.set_defaults(func=_cmd_plot_ablation)

    g = sub.add_parser(
        "plot-ablations",
        help="every ablation's figure in one process (what the workflow runs)",
        description="The figures of plot-ablation for several ablations at once, from "
        "one read of the score files: writes OUT_DIR/ablation_<name>.{png,pdf} for each "
        "ablation named in --ablations-json.",
    )
    g.add_argument("scores", nargs="+", help="per-run metrics Parquet files of the ablations")
    g.add_argument(
        "--ablations-json",
        required=True,
        help="JSON {name: {system, setting, variants: [...], values: {variant: x}}}, "
        "e.g. " + _ABLATIONS_EXAMPLE,
    )
    g.add_argument("--out-dir", required=True, help="folder for ablation_<name>.{png,pdf}")
    _add_records_option(g)
    g.set_defaults(func=_cmd_plot_ablations)
    for module, commands in PLUGIN_COMMANDS.items():
        sub.add_module_commands(module, commands)  # imported when one of them is parsed
    tidy_parser(p)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; its exit code. Ctrl-C is one line and 130 (128 + SIGINT), not a
    traceback: a run's finished examples are checkpointed as they finish, so there is
    nothing more to say than that it stopped."""
    try:
        return _main(argv)
    except* KeyboardInterrupt:  # also inside an exception group (anyio's task groups)
        pass
    # outside the handler: the traceback's frames are gone, so a progress bar they held
    # has closed its line before this one is written
    print("tersetalk: interrupted", file=sys.stderr)
    return 130


def _main(argv: list[str] | None) -> int:
    try:  # the parser lists the registered tasks: a broken task plug-in fails here
        args = _parse(argv)
    except Exception as exc:
        if not _expected_error(exc):
            raise
        print(f"tersetalk: error: {exc}", file=sys.stderr)
        return 2
    _setup_logging(args.log_level, args.verbose)
    try:
        args.func(args)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] == "tersetalk":
            raise
        # the light install (the MCP proxy's) lacks the workflow's packages
        need = "pip install -c constraints.txt -e '.[workflow]'"
        print(f"tersetalk {args.command}: error: {exc}; this command needs the workflow's "
              f"packages: {need}", file=sys.stderr)  # fmt: skip
        return 2
    except Exception as exc:
        if not _expected_error(exc):
            raise
        print(f"tersetalk {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line, parsed. ``tersetalk mcp-proxy`` is parsed by its own parser alone:
    an MCP client waits for the proxy's initialize answer, and building every other
    command's parser (the task registry among them) would add a tenth of a second to it."""
    given = sys.argv[1:] if argv is None else argv
    if given[:1] != ["mcp-proxy"]:
        return build_parser().parse_args(argv)
    from tersetalk.mcp.cli import add_commands

    p = argparse.ArgumentParser(prog="tersetalk")
    p.set_defaults(log_level="INFO", verbose=False)
    add_commands(p.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    tidy_parser(p)
    return p.parse_args(given)


def _expected_error(exc: Exception) -> bool:
    """Whether ``exc`` is one of :data:`EXPECTED_ERRORS` (or a missing file)."""
    if isinstance(exc, FileNotFoundError):
        return True
    for module, name in EXPECTED_ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(exc, cls):
            return True
    return False


if __name__ == "__main__":
    sys.exit(main())
