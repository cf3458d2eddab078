"""``tersetalk topology-signals`` and ``tersetalk route``: the router's signals of briefs
written by a routed system.

- ``topology-signals``: the router's signals of each example of a sample, from the
  Manager's brief written as a run of the routed system would write it (no Worker runs;
  no model call unless a planning Manager writes the brief):
  :func:`tersetalk.pipeline.topology_signals.write_signals`. ``tersetalk topology-fit``
  and the other steps of :mod:`tersetalk.topology.fit_cli` read what it writes.
- ``route``: the router's signals and decision for each record of a file in any task's
  format, one JSON line per record, offline (anyone can check the router on their own
  briefs).

Both write briefs through the registered systems under a workflow config, so they stand
on the pipeline, above the topology study's package.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

import pandas as pd

from tersetalk.core.cliargs import add_config_option

__all__ = ["add_commands", "signals_spec"]

log = logging.getLogger(__name__)


def signals_spec(args: argparse.Namespace) -> dict:
    """The run spec the briefs are written under: ``--spec-json`` (what the workflow
    passes) or the topology study's config (``--config``) for ``--system``/``--variant``
    on the sample's task."""
    from tersetalk.pipeline.config import (
        ConfigError,
        load_workflow_config,
        run_spec,
        spec_from_json,
        topology_config,
    )
    from tersetalk.tasks.loading import read_sample

    if args.spec_json:
        spec = spec_from_json(args.spec_json)
    else:
        if not args.system:
            raise ConfigError("give --system and --variant (or --spec-json)")
        task = args.task or str(read_sample(args.sample)[0]["task"])
        study = topology_config(load_workflow_config(args.config))
        variant = args.variant or study["topology"].get("fit", {}).get("variant", "adaptive")
        known = {name: sorted(sys_["variants"]) for name, sys_ in study["systems"].items()}
        if variant not in known.get(args.system, []):
            raise ConfigError(
                f"config key 'topology.systems.{args.system}.variants.{variant}' does not "
                f"exist; the topology study's systems and variants: {known}"
            )
        spec = run_spec(study, task, args.system, variant)
    for key in ("task", "system", "variant"):
        given = getattr(args, key)
        if given and given != spec[key]:
            raise ConfigError(f"--{key} {given} disagrees with the spec ({spec[key]})")
    return spec


def _cmd_signals(args: argparse.Namespace) -> None:
    from tersetalk.pipeline.topology_signals import write_signals

    spec = signals_spec(args)
    df = write_signals(spec, args.sample, args.out)
    ok = df[df["error"].isna()]
    agree = float((ok["route_rule"] == ok["label"]).mean()) if len(ok) else float("nan")
    log.info(
        "%s/%s/%s: %d briefs (%d errors, %d model calls); the variant's rule agrees with the "
        "label on %.2f -> %s",
        spec["task"], spec["system"], spec["variant"], len(df), len(df) - len(ok),
        int(df["model_calls"].sum()), agree, args.out,
    )  # fmt: skip


def _cmd_route(args: argparse.Namespace) -> None:
    from tersetalk.pipeline.config import (
        ConfigError,
        load_workflow_config,
        run_spec,
        topology_config,
    )
    from tersetalk.pipeline.topology_signals import brief_signals
    from tersetalk.tasks.registry import topology_labels
    from tersetalk.topology.router import decide, load_fitted

    formats = sorted(topology_labels())
    if args.task not in formats:
        raise ConfigError(
            f"--task {args.task}: no such format; a task with a topology label names one: "
            f"{', '.join(formats)}"
        )
    study = topology_config(load_workflow_config(args.config))
    variants = study["systems"].get(args.system, {}).get("variants", {})
    if args.variant not in variants:
        known = {name: sorted(s["variants"]) for name, s in study["systems"].items()}
        raise ConfigError(
            f"no variant {args.variant!r} of {args.system!r} in the topology study; "
            f"its systems and variants: {known}"
        )
    spec = run_spec(study, args.task, args.system, args.variant)
    fitted = load_fitted(args.router, args.system) if args.router else None
    frame = brief_signals(spec, args.records)
    out = sys.stdout
    for row in frame.to_dict("records"):
        line: dict = {"id": row["example_id"], "task": row["task"], "system": row["system"],
                      "variant": row["variant"], "features": row["features"]}  # fmt: skip
        if not pd.isna(row["error"]):
            line["error"] = row["error"]
        else:
            signals = json.loads(row["route_signals"])
            weights, theta = fitted if fitted else (json.loads(row["route_weights"]),
                                                    float(row["route_theta"]))  # fmt: skip
            route, score = decide(signals, weights, theta)
            line.update(signals=signals, weights=weights, theta=theta, score=score,
                        route=route, router="fitted" if fitted else "variant")  # fmt: skip
        line["label"] = row["label"]
        try:
            out.write(json.dumps(line, sort_keys=False) + "\n")
        except BrokenPipeError:  # the reader stopped (| head): nothing more to say
            return


def add_commands(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "topology-signals",
        help="the router's signals of a sample's briefs (no Worker runs)",
        description="Write each example's Manager brief as a run of the routed system "
        "writes it (its codec, the variant's settings) and record the router's six signals "
        "as the run reads them, the label, the variant's rule and the brief's wire size. "
        "No model is called unless a planning Manager writes the brief.",
    )
    s.add_argument("--sample", required=True, help="sample Parquet from `tersetalk sample`")
    s.add_argument("--system", help="routed system: topology_tersetalk or topology_freeform")
    s.add_argument(
        "--variant",
        default=None,
        help="variant under topology.systems.<system> (default: topology.fit.variant)",
    )
    s.add_argument("--task", help="the sample's task (default: read from the sample)")
    add_config_option(s, "; the variant is looked up in its topology section")
    s.add_argument("--spec-json", help="a complete run spec as JSON (overrides --config)")
    s.add_argument("--out", required=True, help="signals Parquet to write")
    s.set_defaults(func=_cmd_signals)

    r = sub.add_parser(
        "route",
        help="the router's signals and decision for each record of a file (offline)",
        description="Write each record's Manager brief as the routed system writes it and "
        "print one JSON line per record: its six signals, the weights and θ, the score and "
        "the route (star or chain), and its label when the record has one. No model is "
        "called (unless the variant's Manager plans with one). Records are JSON lines in "
        'the format of --task (the record itself or {"record": ...}; "id" names it), '
        "or a sample Parquet file from `tersetalk sample`.",
    )
    r.add_argument("records", help="JSONL file of records in --task's format, or a sample Parquet")
    r.add_argument("--task", required=True, help="the records' format: a task name (e.g. boolq)")
    r.add_argument(
        "--system",
        default="topology_tersetalk",
        help="routed system: topology_tersetalk (typed lines) or topology_freeform (prose); "
        "default topology_tersetalk",
    )
    r.add_argument("--variant", default="adaptive", help="its variant (default adaptive)")
    r.add_argument(
        "--router", help="a fitted router file (`tersetalk topology-fit`): its weights and θ "
        "for --system decide instead of the variant's"
    )  # fmt: skip
    add_config_option(r, "; the system and variant are looked up in its topology section")
    r.set_defaults(func=_cmd_route)
