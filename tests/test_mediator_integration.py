"""The mediator and MSP on the real embedded model (SmolLM2-135M via llama.cpp).

Kept short: small generation budgets, one message each. They check that the real
code paths run end to end (grammar-constrained structured output included), not
how good a 135M model is at compressing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tersetalk.mediator import (
    CollectingEmitter,
    KeyType,
    PipelineEvent,
    build_mediator,
    keys_from_json,
    keys_to_json,
    parse_mediator_config,
    trace_problems,
)
from tersetalk.mediator.trace import PASS_FIELDS, REQUIRED_FIELDS
from tersetalk.models import GenerationConfig

pytestmark = pytest.mark.integration

MESSAGE = (
    "Goal: Answer the question with a short span taken from the facts.\nFacts:\n"
    "- Paul Kantner: Paul Lorin Kantner (March 17, 1941 - January 28, 2016) was an American "
    "rock musician.\n- Planet Earth Rock and Roll Orchestra is the final solo album by Paul "
    "Kantner.\nQuestion: When did the musician behind Planet Earth Rock and Roll Orchestra die?"
)


@pytest.fixture(scope="module")
def client():
    from tersetalk.models import make_client

    c = make_client({"backend": "llamacpp", "threads": 1, "seed": 0, "max_retries": 1})
    yield c
    c.close()


def test_mediator_on_the_embedded_model(client, tmp_path):
    cfg = parse_mediator_config({
        "compression": {"token_budget": 40, "recursion_limit": 2, "summary_max_tokens": 48},
        "semantic_keys": {"extractor": "llm", "max_tokens": 200, "max_keys": 3},
        "judge": {"enabled": True, "kind": "embedding"},
        "trace": {"dir": str(tmp_path)},
    })  # fmt: skip
    emitter = CollectingEmitter()
    m = build_mediator(cfg, client=client, gen=GenerationConfig(seed=0), emitter=emitter)
    res = m.process(MESSAGE)
    assert res.ok, res.error
    c = res.compression
    assert 1 <= c.passes <= 2 and c.final_tokens <= c.original_tokens
    # the LLM extractor's call really was grammar-constrained by the key schema
    rf = client.last_response_format
    assert rf["type"] == "json_object" and "keys" in rf["schema"]["properties"]
    keys = res.extraction.keys
    assert keys and all(isinstance(k.type, KeyType) for k in keys)
    assert keys_from_json(keys_to_json(keys)).keys == keys
    assert 0.0 <= res.judge.confidence <= 1.0
    assert emitter.kinds()[-1] is PipelineEvent.PIPELINE_COMPLETE
    record = res.trace_record()
    assert trace_problems(record) == [] and record["extraction"]["raw_output"]
    assert (tmp_path / "mediator_trace.jsonl").read_text().count("\n") == 1


def test_msp_round_trip_on_the_embedded_model(client):
    from tersetalk.msp import MinimalSignal, MSPDecoder, MSPEncoder, MSPPipeline, SemanticJudge

    gen = GenerationConfig(seed=0)
    pipe = MSPPipeline(MSPEncoder(client, gen), MSPDecoder(client, gen, max_tokens=48),
                       SemanticJudge(0.80))  # fmt: skip
    res = pipe.process(MESSAGE, trace_id="it-1")
    rf = client.last_response_format  # set by the encoder's structured call only
    assert rf["type"] == "json_object" and "intent" in rf["schema"]["properties"]
    sig = MinimalSignal.model_validate_json(res.signal.model_dump_json())
    assert sig == res.signal and sig.trace_id == "it-1"
    assert res.decoded_text
    m = res.metrics
    assert m.compression_ratio == m.signal_tokens / m.original_tokens
    assert 0.0 <= res.judge.similarity_score <= 1.0
    assert res.judge.passed == (res.judge.similarity_score >= 0.80)


def _tersetalk() -> list[str]:
    """The installed ``tersetalk`` command of this interpreter's environment."""
    script = Path(sys.executable).with_name("tersetalk")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tersetalk.cli"]


@pytest.mark.integration
def test_mediator_demo_with_default_settings_writes_a_trace(tmp_path):
    """``tersetalk mediator demo`` as a user runs it: the embedded model compresses,
    the rule extractor reads the keys, the MiniLM judge scores them."""
    proc = subprocess.run(
        [*_tersetalk(), "mediator", "demo", "--trace-dir", str(tmp_path / "trace")],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    path = tmp_path / "trace" / "mediator_trace.jsonl"
    assert path.is_file(), proc.stdout[-2000:]
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    records = [json.loads(ln) for ln in lines]  # every line is one JSON object
    assert len(records) == 1 and isinstance(records[0], dict)
    rec = records[0]
    assert trace_problems(rec) == []
    for block, fields in REQUIRED_FIELDS.items():
        part = rec[block] if block else rec
        assert all(f in part for f in fields), (block, sorted(part))
    comp = rec["compression"]
    assert comp["compressor"] == "model" and comp["stop_reason"] != "within_budget"
    assert len(comp["passes"]) >= 1 and comp["n_passes"] == len(comp["passes"])
    assert all(all(f in p for f in PASS_FIELDS) for p in comp["passes"])
    assert comp["final_tokens"] <= rec["original"]["tokens"]
    assert rec["extraction"]["keys"] and rec["error"] is None
    judge = rec["judge"]
    assert judge is not None and judge["judge"] == "embedding"
    assert 0.0 <= judge["confidence"] <= 1.0 and isinstance(judge["issues"], list)
    assert "Delivered to Agent B" in proc.stdout and "pass 1:" in proc.stdout
