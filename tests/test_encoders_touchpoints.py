"""The three LLMLingua touchpoints: each toggle changes its own counters and no other's.

Scripted model and compressor doubles: control flow only.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tersetalk.core.io import message_list
from tersetalk.encoders import lingua
from tersetalk.encoders.scripted import ScriptedCompressor
from tersetalk.encoders.touchpoints import COUNTER_KEYS, Touchpoints
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import run_spec, validate_config
from tersetalk.pipeline.runner import run
from tersetalk.protocol import ContextLine, DerefResult, unregister_summarizer
from tersetalk.tasks.loading import load_records, sample

TOGGLES = {
    "lingua_payloads": {"tp_payload_calls", "tp_payload_fit"},
    "lingua_summaries": {"tp_summary_calls"},
    "lingua_deref": {"tp_deref_compressed", "tp_deref_tokens_saved"},
}


@pytest.fixture(autouse=True)
def compressor(monkeypatch):
    comp = ScriptedCompressor()
    monkeypatch.setattr(lingua, "load_compressor", lambda settings: comp)
    yield comp
    unregister_summarizer("llmlingua")  # leave the protocol's slot empty for other tests


@pytest.fixture(scope="module")
def hotpot(tmp_path_factory):
    repo = Path(__file__).resolve().parents[1]
    ev, _ = sample(
        "hotpotqa", load_records("hotpotqa", data_dir=repo / "data"), n=2, calibration_n=0, seed=11
    )
    path = tmp_path_factory.mktemp("tp") / "hotpotqa.parquet"
    ev.to_parquet(path)
    return path


def worker_asks_for_m1(messages, gen, schema):
    if schema.__name__ == "CriticReply":
        return json.dumps({"verdict": "A", "note": ""})
    if len(messages) == 2 and "M#1" in messages[1]["content"]:
        return json.dumps({"plan": [], "need": ["M#1"], "answer": "unsure"})
    return json.dumps({"plan": [], "need": [], "answer": "Paris"})


def run_system(base_config, tmp_path, hotpot, system, settings, name):
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    cfg["systems"].setdefault(system, {"variants": {}})["variants"][name] = settings
    validate_config(cfg)
    spec = run_spec(cfg, "hotpotqa", system, name)
    df = run(
        spec,
        hotpot,
        tmp_path / f"{system}-{name}.parquet",
        client=ScriptedClient(worker_asks_for_m1),
        progress=False,
    )
    assert df["error"].isna().all(), df["error"].tolist()
    return spec, df


def tp_counters(df) -> list[dict]:
    return [{k: json.loads(c)[k] for k in COUNTER_KEYS} for c in df["counters"]]


@pytest.mark.parametrize("system", ["tersetalk", "hybrid"])
def test_each_toggle_changes_its_own_counters_and_nothing_else(
    base_config, tmp_path, hotpot, system
):
    tt = {"caps": "aggressive", "deref": "conditional"}
    wrap = (lambda s: s) if system == "tersetalk" else (lambda s: {"budget": 800, "tersetalk": s})
    off_spec, off = run_system(base_config, tmp_path, hotpot, system, wrap(tt), "off")
    assert all(v == 0 for row in tp_counters(off) for v in row.values())
    assert (off["c_overflow_total"] > 0).all()  # aggressive caps overflow these facts
    for toggle, own in TOGGLES.items():
        spec, df = run_system(
            base_config, tmp_path, hotpot, system, wrap({**tt, toggle: True}), toggle
        )
        # the config differs in that one toggle only
        a = off_spec["variant_settings"].get("tersetalk", off_spec["variant_settings"])
        b = spec["variant_settings"].get("tersetalk", spec["variant_settings"])
        assert {k for k in a if a[k] != b[k]} == {toggle}
        for row in tp_counters(df):
            assert all(row[k] > 0 for k in own if k != "tp_deref_tokens_saved"), (toggle, row)
            assert all(row[k] == 0 for k in COUNTER_KEYS if k not in own), (toggle, row)
        if toggle == "lingua_summaries":
            # the method named on every overflow line of the brief (the first message)
            methods = [
                line[-1]
                for brief in (message_list(r)[0] for r in df["messages"])
                for line in map(json.loads, brief["content"].splitlines())
                if line[0] == "o"
            ]
            assert methods and all(m.startswith("llmlingua") for m in methods)
        if toggle == "lingua_payloads":
            assert (df["c_compressed_total"] > 0).all()
            assert (df["c_overflow_total"] < off["c_overflow_total"]).all()


def test_deref_compression_keeps_keys_and_counts_savings(compressor):
    text = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris, France."
    tp = Touchpoints(deref=True, compressor=lambda: compressor, question="When?")
    res = DerefResult(
        policy="conditional",
        texts={"M#1": text},
        lines=[ContextLine(key="M#1", value=text)],
        derefs=1,
        reinjected_tokens=20,
        missing=[],
    )
    out = tp.compress_deref(res)
    assert out.lines[0].key == "M#1" and len(out.lines[0].value) < len(text)
    assert out.derefs == 1 and out.texts == res.texts  # memory's full text is untouched
    assert tp.counts["tp_deref_compressed"] == 1 and tp.counts["tp_deref_tokens_saved"] > 0
    off = Touchpoints(compressor=lambda: compressor)
    assert off.compress_deref(res) is res and off.compress_hook is None
    assert off.summarizer("extractive") == "extractive"
