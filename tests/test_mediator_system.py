"""The ``mediator`` and ``msp`` systems through the runner, with the scripted double
(control flow only: what reaches the Worker, what the record carries)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tersetalk.core.io import message_list
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import ConfigError, run_spec, validate_config
from tersetalk.pipeline.runner import run
from tersetalk.tasks.loading import load_records, sample

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    repo = REPO
    out = {}
    folder = tmp_path_factory.mktemp("samples")
    for task in ("hotpotqa", "gsm8k"):
        ev, _ = sample(task, load_records(task, data_dir=repo / "data"), n=2, calibration_n=0,
                       seed=5)  # fmt: skip
        path = folder / f"{task}.parquet"
        ev.to_parquet(path)
        out[task] = path
    return out


def spec_for(base_config, tmp_path, system, task, **settings):
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    cfg["systems"][system] = {"variants": {"v": settings}}
    validate_config(cfg)
    return run_spec(cfg, task, system, "v")


def responder(messages, gen, schema):
    first = messages[0]["content"]
    if schema is not None:
        name = schema.__name__
        if name == "KeysDraft":
            return json.dumps({"keys": [{"type": "GOAL", "value": "answer it"},
                                        {"type": "CONTEXT", "value": "Paris is big"}]})  # fmt: skip
        if name == "_Verdict":
            return json.dumps({"passed": True, "confidence": 0.75, "issues": []})
        if name == "SignalDraft":
            return json.dumps({"intent": "QUERY", "target": "the capital",
                               "params": [{"key": "city", "value": "Paris"}]})  # fmt: skip
        raise AssertionError(name)
    if first.startswith("You compress"):
        return "Paris facts. Question: which city?"
    if first.startswith("You are the Critic"):
        return "ACCEPT. fine"
    if first.startswith("You are the Worker"):
        return "Answer: 42" if "math" in first else "Paris"
    return "the decoded message"


@pytest.mark.parametrize("task", ["hotpotqa", "gsm8k"])
def test_mediator_system_sends_keys_and_records_them(base_config, tmp_path, samples, task):
    spec = spec_for(base_config, tmp_path, "mediator", task, budget=12, extractor="llm",
                    judge=True, judge_kind="llm", trace_dir=str(tmp_path / "tr"))  # fmt: skip
    client = ScriptedClient(responder)
    df = run(spec, samples[task], tmp_path / "o.parquet", client=client, progress=False)
    assert df["error"].isna().all()
    for row in df.itertuples():
        msgs = message_list(row.messages)
        assert msgs[0]["content"] == "GOAL: answer it\nCONTEXT: Paris is big"
        c = json.loads(row.counters)
        assert c["mediator_passes"] >= 1 and c["mediator_n_keys"] == 2
        assert c["mediator_final_tokens"] <= c["mediator_original_tokens"]
        assert c["mediator_judge_passed"] is True and c["mediator_judge_confidence"] == 0.75
        roles = [call["role"] for call in json.loads(row.calls)]
        assert roles[0] == "mediator_compress" and "mediator_extract" in roles
        assert roles.index("mediator_judge") < roles.index("worker")
    assert (df["c_mediator_passes"] >= 1).all() and "c_mediator_judge_confidence" in df
    trace = [
        json.loads(x) for x in (tmp_path / "tr" / "mediator_trace.jsonl").read_text().splitlines()
    ]
    assert len(trace) == 2 and all(t["judge"]["confidence"] == 0.75 for t in trace)


def test_mediator_records_are_deterministic(base_config, tmp_path, samples):
    spec = spec_for(base_config, tmp_path, "mediator", "hotpotqa", budget=20,
                    compressor="truncate", judge=False)  # fmt: skip
    a = run(spec, samples["hotpotqa"], tmp_path / "a.parquet", client=ScriptedClient(responder),
            progress=False)  # fmt: skip
    b = run(spec, samples["hotpotqa"], tmp_path / "b.parquet", client=ScriptedClient(responder),
            progress=False)  # fmt: skip
    assert a["counters"].tolist() == b["counters"].tolist()
    assert [message_list(m) for m in a["messages"]] == [message_list(m) for m in b["messages"]]
    assert (a["c_mediator_final_tokens"] <= 20).all()


def test_mediator_failure_is_an_error_row_or_a_reported_passthrough(base_config, tmp_path,
                                                                    samples):  # fmt: skip
    def broken(messages, gen, schema):
        if messages[0]["content"].startswith("You compress"):
            raise RuntimeError("summarizer crashed")
        return responder(messages, gen, schema)

    spec = spec_for(base_config, tmp_path, "mediator", "gsm8k", budget=5, judge=False)
    spec["pipeline"]["max_error_share"] = 1.0  # every row is an error row here
    df = run(spec, samples["gsm8k"], tmp_path / "e.parquet", client=ScriptedClient(broken),
             progress=False)  # fmt: skip
    assert df["error"].str.contains("compression stage failed").all()
    spec = spec_for(base_config, tmp_path, "mediator", "gsm8k", budget=5, judge=False,
                    on_error="passthrough")  # fmt: skip
    df = run(spec, samples["gsm8k"], tmp_path / "p.parquet", client=ScriptedClient(broken),
             progress=False)  # fmt: skip
    assert df["error"].isna().all() and (df["c_mediator_passthrough"] == 1).all()
    c = json.loads(df["counters"].iloc[0])
    assert "summarizer crashed" in c["mediator_error"]


def test_bad_variants_are_rejected_at_config_time(base_config, tmp_path):
    with pytest.raises(ConfigError, match="budget"):
        spec_for(base_config, tmp_path, "mediator", "gsm8k", budget=0)
    with pytest.raises(ConfigError, match="extraction"):
        spec_for(base_config, tmp_path, "mediator", "gsm8k", extraction=False, judge=True)
    with pytest.raises(ConfigError, match="threshold"):
        spec_for(base_config, tmp_path, "msp", "gsm8k", threshold=1.5)
    with pytest.raises(ConfigError, match="wire"):
        spec_for(base_config, tmp_path, "msp", "gsm8k", wire="xml")


@pytest.mark.parametrize("task", ["hotpotqa", "gsm8k"])
def test_msp_system_sends_the_signal(base_config, tmp_path, samples, task):
    spec = spec_for(base_config, tmp_path, "msp", task, judge=False)
    df = run(spec, samples[task], tmp_path / "m.parquet", client=ScriptedClient(responder),
             progress=False)  # fmt: skip
    assert df["error"].isna().all()
    for row in df.itertuples():
        sent = json.loads(message_list(row.messages)[0]["content"])
        assert sent == {"intent": "QUERY", "target": "the capital", "params": {"city": "Paris"},
                        "constraints": [], "state": {}, "priority": "medium"}  # fmt: skip
        c = json.loads(row.counters)
        assert c["msp_signal_tokens"] == row.tokens_M_W_cl100k
        assert c["msp_compression_ratio"] == pytest.approx(
            c["msp_signal_tokens"] / c["msp_original_tokens"], abs=1e-6
        )
        assert c["msp_signal"]["trace_id"] and "timestamp" not in c["msp_signal"]
        assert json.loads(row.calls)[0]["role"] == "msp_encode"
    assert df["counters"].str.contains("msp_trace_id").all()


def test_msp_system_with_judge_records_similarity(base_config, tmp_path, samples):
    spec = spec_for(base_config, tmp_path, "msp", "hotpotqa", wire="traced", threshold=0.99)
    df = run(spec, samples["hotpotqa"], tmp_path / "j.parquet", client=ScriptedClient(responder),
             progress=False)  # fmt: skip
    assert df["error"].isna().all()
    assert df["c_msp_similarity"].between(0, 1).all() and (df["c_msp_judge_passed"] == 0).all()
    # "the decoded message" names neither the intent (QUERY) nor the target ("the capital"):
    # not adequate whatever the similarity, and the record says why
    assert (df["c_msp_intent_present"] == 0).all() and (df["c_msp_target_present"] == 0).all()
    issues = json.loads(df["counters"].iloc[0])["msp_judge_issues"]
    assert any(i.startswith("Intent missing") for i in issues)
    assert any("'capital'" in i for i in issues if i.startswith("Target missing"))
    roles = [c["role"] for c in json.loads(df["calls"].iloc[0])]
    assert roles[:2] == ["msp_encode", "msp_decode"]
    sent = json.loads(message_list(df["messages"].iloc[0])[0]["content"])
    assert sent["version"] == "1.0" and "trace_id" in sent
    # latency is a timing counter: in counters_timing, never in the deterministic counters
    for row in df.itertuples():
        timing = json.loads(row.counters_timing)
        assert {"t_msp_encode_ms", "t_msp_decode_ms", "t_msp_latency_ms"} <= set(timing)
        assert timing["t_msp_latency_ms"] >= timing["t_msp_encode_ms"] >= 0
        assert not any(k.startswith("t_") for k in json.loads(row.counters))


def test_msp_encoder_failure_is_an_error_row(base_config, tmp_path, samples):
    spec = spec_for(base_config, tmp_path, "msp", "gsm8k", judge=False)
    spec["pipeline"]["max_error_share"] = 1.0  # every row is an error row here
    bad = ScriptedClient(lambda m, g, s: "not json" if s else responder(m, g, s))
    df = run(spec, samples["gsm8k"], tmp_path / "x.parquet", client=bad, progress=False)
    assert df["error"].str.startswith("EncoderError: Failed to parse LLM response").all()


def test_a_workflow_run_writes_its_trace_beside_the_run_file(base_config, tmp_path, samples):
    """One trace record per example, complete and matching the records; a fresh run of
    the same output starts the trace over instead of appending to an old one."""
    from tersetalk.mediator import read_trace, trace_problems
    from tersetalk.systems.mediator_system import trace_file

    spec = spec_for(base_config, tmp_path, "mediator", "gsm8k", budget=12, judge=True)
    out = tmp_path / "runs" / "gsm8k" / "mediator" / "v.parquet"
    path = out.with_name("v.trace.jsonl")
    assert trace_file(out) == path
    for attempt in range(2):  # the second run rewrites, never appends
        if attempt:
            out.unlink()
        df = run(spec, samples["gsm8k"], out, client=ScriptedClient(responder), progress=False)
        trace = read_trace(path)
        ids = [json.loads(c)["mediator_message_id"] for c in df["counters"]]
        assert [t["message_id"] for t in trace] == ids and len(ids) == 2
        assert all(trace_problems(t) == [] for t in trace)
        assert [t["delivered"]["text"] for t in trace] == [
            message_list(m)[0]["content"] for m in df["messages"]
        ]
    off = spec_for(base_config, tmp_path, "mediator", "gsm8k", budget=12, trace=False)
    run(off, samples["gsm8k"], tmp_path / "off.parquet", client=ScriptedClient(responder),
        progress=False)  # fmt: skip
    assert not (tmp_path / "off.trace.jsonl").exists()


def test_a_resumed_run_appends_to_its_trace(tmp_path):
    from tersetalk.agents.context import RunContext
    from tersetalk.systems.mediator_system import MediatorSettings, _run_trace

    out = tmp_path / "v.parquet"
    out.with_name("v.trace.jsonl").write_text('{"message_id": "earlier example"}\n')

    def ctx(resumed):
        return RunContext(task="gsm8k", client=None, gen=None, critic_gen=None,
                          shared={"run_out": out, "run_resumed": resumed})  # fmt: skip

    settings = MediatorSettings()
    assert _run_trace(settings, ctx(True)).read_text().startswith('{"message_id"')
    assert not _run_trace(settings, ctx(False)).exists()  # fresh: started over
    assert _run_trace(MediatorSettings(trace_dir=str(tmp_path)), ctx(False)) is None
    assert _run_trace(settings, RunContext(task="gsm8k", client=None, gen=None,
                                           critic_gen=None)) is None  # fmt: skip


def test_with_metadata_delivers_the_metadata_line_to_agent_b(base_config, tmp_path, samples):
    assert base_config["systems"]["mediator"]["variants"]["with_metadata"]["metadata"] is True
    spec = spec_for(base_config, tmp_path, "mediator", "hotpotqa", budget=12, metadata=True,
                    extractor="llm", judge=False)  # fmt: skip
    df = run(spec, samples["hotpotqa"], tmp_path / "md.parquet", client=ScriptedClient(responder),
             progress=False)  # fmt: skip
    for row in df.itertuples():
        first, *keys = message_list(row.messages)[0]["content"].split("\n")
        c = json.loads(row.counters)
        sizes = f"{c['mediator_original_tokens']}->{c['mediator_final_tokens']}"
        assert first == f"[keys v1.0; {sizes} tokens, {c['mediator_passes']} passes]"
        assert keys == ["GOAL: answer it", "CONTEXT: Paris is big"]
