"""``tersetalk mediator demo``: one over-budget message through the whole mediator.

Runs on a fresh clone with the embedded model: compresses the message in one or
more passes, extracts semantic keys, judges them, prints the statistics and
writes an inspectable JSONL trace (one record per message).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

DEMO_MESSAGE = (
    "Hi team, quick update from the planning side before tomorrow's review. We need a "
    "short report on the March sales figures for the three northern stores, because the "
    "regional manager asked for it yesterday afternoon. Store 12 sold 4,310 units, store "
    "17 sold 3,980 units and store 21 sold 5,125 units. Please compare them with February "
    "and point out which store grew the most. The report must stay under one page and it "
    "must not include any customer names. So far I have collected the raw numbers, and the "
    "February figures are in the shared folder. Our goal is to decide where to send the "
    "extra staff in April."
)


def _build_config(args: argparse.Namespace):
    from tersetalk.mediator.config import load_mediator_file, parse_mediator_config

    if args.mediator_config:
        file = load_mediator_file(args.mediator_config)
        # the file's logging.level is the level of the mediator's own loggers
        logging.getLogger("tersetalk.mediator").setLevel(file.logging.level)
        if file.dashboard.enabled:
            logging.getLogger("tersetalk.mediator").warning(
                "%s: dashboard.enabled is set; `mediator demo` starts no dashboard (%s:%d)",
                args.mediator_config, file.dashboard.host, file.dashboard.port,
            )  # fmt: skip
        cfg = file.mediator
    else:
        cfg = parse_mediator_config({"judge": {"enabled": True}})
    data = cfg.model_dump()
    if args.budget is not None:
        data["compression"]["token_budget"] = args.budget
    if args.recursion_limit is not None:
        data["compression"]["recursion_limit"] = args.recursion_limit
    if args.compressor:
        data["compression"]["compressor"] = args.compressor
    if args.extractor:
        data["semantic_keys"]["extractor"] = args.extractor
    if args.judge is not None:
        data["judge"]["enabled"] = args.judge
    data["trace"]["dir"] = args.trace_dir or data["trace"]["dir"] or "results/mediator"
    return parse_mediator_config(data, where="mediator demo")


def _needs_model(cfg) -> bool:
    return (
        (cfg.compression.enabled and cfg.compression.compressor == "model")
        or (cfg.semantic_keys.enabled and cfg.semantic_keys.extractor == "llm")
        or (cfg.judge.enabled and cfg.judge.kind == "llm")
        or cfg.compression.tokenizer == "model"
    )


def _cmd_demo(args: argparse.Namespace) -> None:
    from tersetalk.mediator import CollectingEmitter, MediatorError, aggregate_stats, build_mediator
    from tersetalk.models import GenerationConfig, make_client

    try:
        cfg = _build_config(args)
    except MediatorError as exc:
        print(f"tersetalk mediator demo: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    message = args.message
    if args.message_file:
        message = Path(args.message_file).read_text(encoding="utf-8")
    message = message or DEMO_MESSAGE
    client = None
    if _needs_model(cfg):
        client = make_client({"backend": "llamacpp", "model_path": args.model_path,
                              "threads": args.threads, "seed": args.seed})  # fmt: skip
    emitter = CollectingEmitter()
    gen = GenerationConfig(temperature=0.0, seed=args.seed)
    try:
        mediator = build_mediator(cfg, client=client, gen=gen, emitter=emitter)
    except MediatorError as exc:
        print(f"tersetalk mediator demo: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    result = mediator.process(message)
    rec = result.trace_record()
    c = result.compression
    print("== Agent A's message")
    print(message)
    print(f"\n== Stage 1: compression ({cfg.compression.compressor}, budget "
          f"{cfg.compression.token_budget} {cfg.compression.tokenizer} tokens, at most "
          f"{cfg.compression.recursion_limit} passes)")  # fmt: skip
    if c is not None:
        for p in c.log:
            kept = "kept" if p.accepted else "rejected"
            print(f"  pass {p.index}: {p.input_tokens} -> {p.output_tokens} tokens "
                  f"(ratio {p.ratio:.2f}, {kept})")  # fmt: skip
        print(f"  {c.original_tokens} -> {c.final_tokens} tokens in {c.passes} pass(es), "
              f"total ratio {c.total_ratio:.2f}, stopped: {c.stop_reason}")  # fmt: skip
        print(f"  compressed text: {c.text}")
    if result.extraction is not None:
        print(f"\n== Stage 2: semantic keys (schema {result.extraction.schema_version}, "
              f"{result.extraction.extractor} extractor)")  # fmt: skip
        for k in result.extraction.keys:
            print(f"  {k.type.value:<11} {k.value}")
    if result.judge is not None:
        j = result.judge
        print(f"\n== Judge ({j.judge}): {'PASS' if j.passed else 'FAIL'}, confidence "
              f"{j.confidence:.3f}")  # fmt: skip
        for issue in j.issues:
            print(f"  - {issue}")
    for w in result.warnings:
        print(f"\n!! warning: {w}")
    print("\n== Delivered to Agent B")
    print(result.delivered_text)
    stats = aggregate_stats([result])
    print(f"\n== Stats: {json.dumps(stats)}")
    print(f"   events: {', '.join(e.event.value for e in emitter.events)}")
    print(f"   duration: {rec['duration_ms']:.0f} ms")
    path = mediator.trace_writer.path if mediator.trace_writer else None
    print(f"   trace: {path} (message {result.message_id})")
    if result.error is not None:
        print(f"tersetalk mediator demo: error: {result.error}", file=sys.stderr)
        raise SystemExit(1)


def add_commands(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser(
        "mediator",
        help="the Mediated Minimal-Signaling mediator",
        description="Compression to a token budget, semantic keys, judge, traces.",
    )
    msub = m.add_subparsers(dest="mediator_command", required=True, metavar="SUBCOMMAND")
    d = msub.add_parser(
        "demo",
        help="run one over-budget message through the mediator and write a trace",
        description="Compress a message over budget in one or more passes, extract semantic "
        "keys, judge them, print statistics and write a JSONL trace. Uses the embedded model "
        "(llama.cpp) when a stage needs one.",
    )
    d.add_argument(
        "--mediator-config",
        metavar="FILE",
        help="mediator YAML (see config/mediator.example.yaml; the layout of the design "
        "document, with logging: and dashboard:, is accepted too)",
    )
    from tersetalk.core.cliargs import add_renamed_option

    add_renamed_option(d, "--config", "--mediator-config")
    d.add_argument("--message", help="the message to send (default: a built-in demo message)")
    d.add_argument("--message-file", help="read the message from this file")
    d.add_argument("--budget", type=int, help="token budget of stage 1")
    d.add_argument("--recursion-limit", type=int, help="most compression passes")
    d.add_argument(
        "--compressor",
        choices=["model", "distilbart", "llmlingua", "truncate"],
        help="compressor (default from config: model, the embedded LLM)",
    )
    d.add_argument("--extractor", choices=["rule", "llm"], help="semantic key extractor")
    d.add_argument(
        "--judge",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the judge (default: on)",
    )
    d.add_argument(
        "--trace-dir", help="folder for mediator_trace.jsonl (default: results/mediator)"
    )
    d.add_argument("--model-path", help="GGUF to use instead of the embedded SmolLM2")
    d.add_argument("--threads", type=int, default=None, help="llama.cpp threads")
    d.add_argument("--seed", type=int, default=0, help="generation seed")
    d.set_defaults(func=_cmd_demo)
