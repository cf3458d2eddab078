"""The hybrid gate's decisions, with the scripted model and compressor doubles.

These test control flow only: which route each turn takes and what is logged.
"""

from __future__ import annotations

import copy
import json

import pytest

from tersetalk.agents.topology import STAR
from tersetalk.core.io import message_list
from tersetalk.encoders import lingua
from tersetalk.encoders.scripted import ScriptedCompressor
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import run_spec, validate_config
from tersetalk.pipeline.runner import run
from tersetalk.protocol import REPAIR_KINDS, TAGS, parse_lenient, parse_strict
from tersetalk.tasks.loading import load_records, sample

DIRECTIONS = STAR.layout.directions


@pytest.fixture
def compressor(monkeypatch):
    comp = ScriptedCompressor()
    comp.loads = 0

    def load(settings):
        comp.loads += 1
        return comp

    monkeypatch.setattr(lingua, "load_compressor", load)
    return comp


@pytest.fixture(scope="module")
def hotpot(tmp_path_factory):
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    records = load_records("hotpotqa", data_dir=repo / "data")
    ev, _ = sample("hotpotqa", records, n=3, calibration_n=0, seed=11)
    path = tmp_path_factory.mktemp("hybrid") / "hotpotqa.parquet"
    ev.to_parquet(path)
    return path


def spec_for(base_config, tmp_path, system="hybrid", max_revisions=None, **settings):
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    if max_revisions is not None:
        cfg["pipeline"]["max_revisions"] = max_revisions
    cfg["systems"].setdefault(system, {"variants": {}})["variants"]["v"] = settings
    validate_config(cfg)
    return run_spec(cfg, "hotpotqa", system, "v")


def model(need_ref: bool = False):
    def respond(messages, gen, schema):
        assert schema is not None, "schema mode makes structured calls only"
        if schema.__name__ == "CriticReply":
            return json.dumps({"verdict": "A", "note": "the span matches the facts"})
        first = len(messages) == 2
        if need_ref and first and "M#1" in messages[1]["content"]:
            return json.dumps({"plan": [], "need": ["M#1"], "answer": "unsure"})
        return json.dumps({"plan": ["find the span"], "need": [], "answer": "Paris"})

    return respond


def run_hybrid(base_config, tmp_path, hotpot, name="o", need_ref=False, **settings):
    spec = spec_for(base_config, tmp_path, **settings)
    return run(
        spec,
        hotpot,
        tmp_path / f"{name}.parquet",
        client=ScriptedClient(model(need_ref)),
        progress=False,
    )


def logs(df):
    return [json.loads(c)["route_log"] for c in df["counters"]]


@pytest.mark.parametrize("budget", [20, 60, 90, 120, 800])
def test_every_turn_follows_the_gate_rule_and_is_logged(
    base_config, tmp_path, hotpot, compressor, budget
):
    df = run_hybrid(base_config, tmp_path, hotpot, budget=budget)
    assert df["error"].isna().all()
    for log, raw in zip(logs(df), df["messages"], strict=True):
        msgs = message_list(raw)
        assert len(log) == len(msgs)  # one decision per message sent
        for entry, msg in zip(log, msgs, strict=True):
            assert entry["budget"] == budget and entry["sent_tokens"] == msg["tokens_cl100k"]
            if entry.get("repeat"):
                continue
            if entry["est_tt"] <= budget:
                assert entry["route"] == "tersetalk" and entry["projection"] is None
            elif entry["projection"] <= budget:
                assert entry["route"] == "llmlingua"
                assert entry["projection"] < entry["ff_tokens"] or entry["ff_tokens"] <= budget
            else:
                assert entry["route"] in ("overflow", "tersetalk")  # deref cannot overflow
            if entry["route"] in ("tersetalk", "overflow"):
                parse_strict(msg["content"])  # TerseTalk routes send valid JSONL
            else:
                assert not msg["content"].startswith("[")
    for route in ("tersetalk", "llmlingua", "overflow"):
        assert (df[f"c_route_{route}"] >= 0).all()
    shares = df[["c_share_tersetalk", "c_share_llmlingua", "c_share_overflow"]].sum(axis=1)
    assert shares.round(9).eq(1.0).all()
    assert (df["c_turns"] == df["n_messages"]).all()
    assert (df["c_hybrid_budget"] == budget).all()


def test_a_budget_that_never_binds_is_exactly_tersetalk(base_config, tmp_path, hotpot, compressor):
    df = run_hybrid(base_config, tmp_path, hotpot, budget=800)
    tt = run(
        spec_for(base_config, tmp_path, system="tersetalk"),
        hotpot,
        tmp_path / "tt.parquet",
        client=ScriptedClient(model()),
        progress=False,
    )
    assert (df["c_share_tersetalk"] == 1.0).all() and (df["c_brief_route_tersetalk"] == 1).all()
    assert compressor.loads == 0  # never needed, never loaded
    strip = lambda raw: [(m["kind"], m["content"]) for m in message_list(raw)]  # noqa: E731
    assert [strip(r) for r in df["messages"]] == [strip(r) for r in tt["messages"]]
    assert "c_lingua_rate" not in df.columns  # no compression, no made-up rate


def test_a_binding_budget_routes_the_brief_to_llmlingua_when_the_projection_fits(
    base_config, tmp_path, hotpot, compressor
):
    probe = run_hybrid(base_config, tmp_path, hotpot, name="probe", budget=800)
    est = int(probe["c_brief_est_tt"].min())
    df = run_hybrid(base_config, tmp_path, hotpot, budget=est - 1)
    first = [log[0] for log in logs(df)]
    assert all(e["kind"] == "brief" and e["est_tt"] > e["budget"] for e in first)
    routed = [e for e in first if e["route"] == "llmlingua"]
    assert routed, "a budget just under the TerseTalk estimate should let LLMLingua fit"
    assert all(e["projection"] <= e["budget"] for e in routed)
    assert compressor.loads == 1 and compressor.calls
    ok = df[df["c_brief_route_llmlingua"] == 1]
    assert (ok["c_lingua_tokens"] < ok["c_lingua_origin_tokens"]).all()
    assert (ok["c_brief_projection"] <= est - 1).all()


def test_projection_factor_can_send_the_same_turn_to_overflow(
    base_config, tmp_path, hotpot, compressor
):
    probe = run_hybrid(base_config, tmp_path, hotpot, name="probe", budget=800)
    budget = int(probe["c_brief_est_tt"].min()) - 1
    df = run_hybrid(base_config, tmp_path, hotpot, budget=budget, projection_factor=3.0)
    first = [log[0] for log in logs(df)]
    assert all(e["route"] == "overflow" for e in first if e["projection"] > budget)
    assert any(e["route"] == "overflow" for e in first)


def test_overflow_tightens_caps_and_its_memory_answers_the_worker(
    base_config, tmp_path, hotpot, compressor
):
    df = run_hybrid(base_config, tmp_path, hotpot, need_ref=True, budget=40, projection_factor=3.0)
    assert df["error"].isna().all()
    for log, raw in zip(logs(df), df["messages"], strict=True):
        brief = log[0]
        assert brief["route"] == "overflow"
        assert all(v < 30 for v in brief["caps"].values())  # tighter than the baseline caps
        msgs = message_list(raw)
        assert '"o"' in msgs[0]["content"]
        assert [m["kind"] for m in msgs].count("deref") == 1  # M#1 came from this memory
    assert (df["c_deref_derefs"] == 1).all() and (df["c_overflow_total"] > 0).all()


def is_critic(messages):
    return messages[0]["content"].startswith("You are the Critic")


def test_revise_is_one_round_as_in_tersetalk(base_config, tmp_path, hotpot, compressor):
    def revise(messages, gen, schema):
        if schema.__name__ == "CriticReply":
            return json.dumps({"verdict": "R", "note": "check the year"})  # always revise
        return json.dumps({"plan": ["look up"], "need": [], "answer": "Paris"})

    client = ScriptedClient(revise)
    spec = spec_for(base_config, tmp_path, max_revisions=3, budget=800)
    df = run(spec, hotpot, tmp_path / "o.parquet", client=client, progress=False)
    assert df["error"].isna().all()
    assert (df["revisions"] == 1).all() and (df["verdict"] == "revise").all()
    # per example: worker, critic, one revised worker; the Critic is not asked again
    assert [c["schema"].__name__ for c in client.calls] == [
        "WorkerReply",
        "CriticReply",
        "WorkerReply",
    ] * len(df)
    assert (df["c_compliance_calls"] == 3).all()
    none = spec_for(base_config, tmp_path, max_revisions=0, budget=800)
    df = run(none, hotpot, tmp_path / "n.parquet", client=ScriptedClient(revise), progress=False)
    assert (df["revisions"] == 0).all() and (df["c_compliance_calls"] == 2).all()


@pytest.mark.parametrize(
    ("critic_text", "verdict", "explicit"),
    [
        ("Looks fine to me.", "accept", False),  # no verdict anywhere: defaulted
        ("REVISE: the year is wrong.", "revise", True),  # raw text, but stated
        ('["r","C"]\n["v","E"]', "escalate", True),  # a v line
    ],
)
def test_verdict_explicit_is_carried_through(
    base_config, tmp_path, hotpot, compressor, critic_text, verdict, explicit
):
    def respond(messages):
        return critic_text if is_critic(messages) else '["r","W"]\n["x","answer","Paris"]'

    spec = spec_for(base_config, tmp_path, budget=800, tersetalk={"enforcement": "posthoc"})
    df = run(spec, hotpot, tmp_path / "o.parquet", client=ScriptedClient(respond), progress=False)
    assert df["error"].isna().all()
    assert (df["verdict"] == verdict).all()
    assert (df["verdict_explicit"] == explicit).all()


# a Worker that overruns the reply's bounds (a 150-character step, a 4th step) inside
# a code fence, and a Critic whose verdict comes in a fence after prose
WORKER_MESSY = "```\n" + "\n".join(
    ['["r","W"]', json.dumps(["p", "x" * 150]), '["p","b"]', '["p","c"]', '["p","d"]',
     '["x","answer","Paris"]', "```"]
)  # fmt: skip
CRITIC_MIXED = 'Sure!\n```\n["r","C"]\n{"verdict": "accept"}\n```'


def messy(messages):
    return CRITIC_MIXED if is_critic(messages) else WORKER_MESSY


def test_counters_are_the_tersetalk_systems_when_the_budget_never_binds(
    base_config, tmp_path, hotpot, compressor
):
    posthoc = {"enforcement": "posthoc"}
    spec = spec_for(base_config, tmp_path, budget=800, tersetalk=posthoc)
    df = run(spec, hotpot, tmp_path / "h.parquet", client=ScriptedClient(messy), progress=False)
    tt_spec = spec_for(base_config, tmp_path, system="tersetalk", **posthoc)
    tt = run(tt_spec, hotpot, tmp_path / "t.parquet", client=ScriptedClient(messy), progress=False)
    assert df["error"].isna().all() and tt["error"].isna().all()
    shared = [
        *(f"c_msg_lines_{k}" for k in ("total", *TAGS, *DIRECTIONS)),
        *(f"c_repairs_{k}" for k in REPAIR_KINDS),
        *(f"c_compliance_{k}" for k in ("calls", "first_try", "repaired", "fallback")),
        "c_repairs",
        "c_reply_truncated",
        "c_reply_dropped",
    ]
    for col in shared:
        assert col in df.columns, col
        assert df[col].tolist() == tt[col].tolist(), col
    assert (df["c_reply_truncated"] == 1).all()  # the long step was cut ...
    assert (df["c_reply_dropped"] == 1).all()  # ... and the 4th step dropped
    assert (df["c_repairs_code_fence"] > 0).all()
    assert (df["c_msg_lines_total"] > 0).all()


def test_messages_routed_to_llmlingua_add_no_lines(base_config, tmp_path, hotpot, compressor):
    probe = run_hybrid(base_config, tmp_path, hotpot, name="probe", budget=800)
    est = int(probe["c_brief_est_tt"].min())
    df = run_hybrid(base_config, tmp_path, hotpot, budget=est - 1)
    assert df["error"].isna().all()
    seen_prose = False
    for log, raw, (_, row) in zip(logs(df), df["messages"], df.iterrows(), strict=True):
        msgs = message_list(raw)
        typed = [m for e, m in zip(log, msgs, strict=True) if e["route"] != "llmlingua"]
        seen_prose |= len(typed) < len(msgs)
        for d in DIRECTIONS:
            lines = sum(
                len(parse_strict(m["content"]))
                for m in typed
                if f"{m['sender']}_{m['receiver']}" == d
            )
            assert row[f"c_msg_lines_{d}"] == lines, d
        assert row["c_msg_lines_total"] == sum(
            len(parse_lenient(m["content"]).lines) for m in typed
        )
        if log[0]["route"] == "llmlingua":  # the brief is prose: no lines to W
            assert row["c_msg_lines_M_W"] == 0
            # the Critic's copy is only the question, a message the gate routes on its own
            copy = next(e for e in log if e["kind"] == "brief_to_critic")
            assert "repeat" not in copy and copy["est_tt"] is not None
            assert row["c_msg_lines_M_C"] == (1 if copy["route"] != "llmlingua" else 0)
    assert seen_prose, "a budget just under the TerseTalk estimate should route some to LLMLingua"


def test_gate_off_sends_every_turn_as_tersetalk_and_still_counts_the_budget(
    base_config, tmp_path, hotpot, compressor
):
    """gate: false at a budget that binds: no turn is projected, compressed or overflowed,
    the messages are the gate-on run's at a budget that never binds, and the turns over
    the (logged) budget are still counted."""
    off = run_hybrid(base_config, tmp_path, hotpot, name="off", budget=20, gate=False)
    on = run_hybrid(base_config, tmp_path, hotpot, name="on", budget=20)
    free = run_hybrid(base_config, tmp_path, hotpot, name="free", budget=1_000_000)
    assert off["error"].isna().all()
    assert (off["c_route_tersetalk"] == off["c_turns"]).all()
    assert (off["c_projected_turns"] == 0).all() and compressor.loads == 1  # only `on` compressed
    assert (off["c_over_budget_turns"] > 0).all()
    msgs = lambda df: [message_list(m) for m in df["messages"]]  # noqa: E731
    assert msgs(off) == msgs(free)
    assert msgs(off) != msgs(on)
    assert all(e["gate"] is False and e["budget"] == 20 for log in logs(off) for e in log
               if not e.get("repeat"))  # fmt: skip


def test_budget_and_summarizer_ablations_name_what_they_vary(base_config):
    """The default config's budget ablation runs the design's 400/600/800 and gate off; its
    summarizer ablation compares extractive, truncation and LLMLingua summaries."""
    from tersetalk.pipeline.config import ablation_values

    budget = ablation_values(base_config, "budget")
    assert set(budget.values()) >= {"400", "600", "800", "gate off"}
    assert ablation_values(base_config, "summarizer") == {
        "caps_baseline": "extractive", "summ_truncation": "truncation",
        "summ_llmlingua": "llmlingua",
    }  # fmt: skip
