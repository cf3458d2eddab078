"""``tersetalk msp demo``: encode a message to a Minimal Signal, decode it, judge it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DEMO_MESSAGE = (
    "Please analyse last week's support tickets for the mobile app and tell me which three "
    "problems came up most often. Only count tickets from paying customers, and keep the "
    "summary under 200 words. This is urgent: the product meeting starts at 3 pm today. "
    "I have already exported the 1,240 tickets to the shared drive."
)


def _cmd_demo(args: argparse.Namespace) -> None:
    from tersetalk.models import GenerationConfig, ModelError, make_client
    from tersetalk.msp import (
        MSPDecoder,
        MSPEncoder,
        MSPError,
        MSPPipeline,
        RateLimitedClient,
        SemanticJudge,
        load_msp_config,
        parse_msp_config,
    )

    try:
        cfg = load_msp_config(args.msp_config) if args.msp_config else parse_msp_config({})
        data = cfg.model_dump()
        if args.threshold is not None:
            data["judge"]["threshold"] = args.threshold
        if args.threads is not None:
            data["provider"]["threads"] = args.threads
        cfg = parse_msp_config(data, where="msp demo")
        client = make_client(cfg.provider.client_config(seed=args.seed))
    except (MSPError, ModelError) as exc:
        print(f"tersetalk msp demo: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if cfg.rate_limit is not None:
        client = RateLimitedClient(client, cfg.rate_limit)
    gen = GenerationConfig(temperature=0.0, seed=args.seed)
    decoder = MSPDecoder(client, gen, cfg.decoder_max_tokens)
    judge = SemanticJudge(cfg.judge.threshold, model_path=cfg.judge.model_path) \
        if cfg.judge.enabled else None  # fmt: skip
    pipeline = MSPPipeline(MSPEncoder(client, gen, cfg.encoder_max_tokens), decoder, judge,
                           tokenizer=cfg.tokenizer, wire=cfg.wire)  # fmt: skip
    message = args.message or DEMO_MESSAGE
    try:
        res = pipeline.process(message, args.style or cfg.style)
    except MSPError as exc:
        print(f"tersetalk msp demo: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    m = res.metrics
    print("== original\n" + message)
    print("\n== signal (" + res.wire + " wire form)\n" + res.signal_text)
    print("\n== decoded\n" + (res.decoded_text or "(not decoded)"))
    if res.judge is not None:
        j = res.judge
        print(f"\n== judge: {'PASS' if j.passed else 'FAIL'} similarity {j.similarity_score:.3f} "
              f"(threshold {j.threshold:.2f}) {'; '.join(j.issues)}")  # fmt: skip
    print(f"\n== metrics ({m.tokenizer}): original {m.original_tokens}, signal {m.signal_tokens}, "
          f"decoded {m.decoded_tokens} tokens; compression ratio {m.compression_ratio:.3f}; "
          f"latency {m.latency_ms:.0f} ms (encode {m.encode_ms:.0f}, decode {m.decode_ms:.0f}, "
          f"judge {m.judge_ms:.0f})")  # fmt: skip
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(res.model_dump(mode="json"), ensure_ascii=False) + "\n")
        print(f"   trace: {out}")


def add_commands(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser(
        "msp",
        help="the Minimal Signaling Protocol",
        description="Encode messages as Minimal Signals, decode and judge them.",
    )
    msub = m.add_subparsers(dest="msp_command", required=True, metavar="SUBCOMMAND")
    d = msub.add_parser("demo", help="encode, decode and judge one message",
                        description="Encode a message to a Minimal Signal with the model backend "
                        "(embedded model by default), decode it back, and score the round trip "
                        "with the MiniLM semantic judge.")  # fmt: skip
    d.add_argument("--msp-config", metavar="FILE", help="MSP YAML (see config/msp.example.yaml)")
    from tersetalk.core.cliargs import add_renamed_option

    add_renamed_option(d, "--config", "--msp-config")
    d.add_argument("--message", help="the message (default: a built-in demo message)")
    d.add_argument("--style", help="decoder style (default from config: professional)")
    d.add_argument("--threshold", type=float, help="judge threshold (default 0.80)")
    d.add_argument("--threads", type=int, help="llama.cpp threads for the embedded model")
    d.add_argument("--seed", type=int, default=0, help="generation seed")
    d.add_argument("--out", help="append the full result as a JSON line to this file")
    d.set_defaults(func=_cmd_demo)
