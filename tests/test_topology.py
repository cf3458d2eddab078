"""The chain topology, the routed systems and the topology study's metrics.

The scripted double checks control flow only (who sends what to whom, when the fix
happens, what the record holds); one integration test runs the chain on the real
embedded model on one example. The metrics are checked on hand-made frames whose
answers are known.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from tersetalk.agents.codecs.prose import ProseCodec
from tersetalk.agents.codecs.tersetalk import TerseTalkCodec
from tersetalk.agents.context import RunContext
from tersetalk.agents.engine import converse
from tersetalk.agents.topology import CHAIN, STAR, Routed
from tersetalk.core.io import message_list
from tersetalk.core.records import deterministic_columns
from tersetalk.models import GenerationConfig, ScriptedClient
from tersetalk.pipeline.config import run_spec, validate_config
from tersetalk.pipeline.runner import run
from tersetalk.systems import system
from tersetalk.systems.topology import ProseRouteSettings, TerseTalkRouteSettings
from tersetalk.tasks.loading import load_records, read_sample, sample
from tersetalk.topology.metrics import (
    best_fixed,
    compare_to_fixed,
    efficiency_score,
    label_agreement,
    leave_one_task_out,
    policy_table,
    quality_preservation,
    ratio,
    theta_sweep,
    token_reduction,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    out = {}
    for task in ("hotpotqa", "gsm8k"):
        ev, _ = sample(task, load_records(task, data_dir=REPO / "data"), n=3, calibration_n=0,
                       seed=9)  # fmt: skip
        path = tmp_path_factory.mktemp(task) / "sample.parquet"
        ev.to_parquet(path)
        out[task] = path
    return out


def prose_model(verdict="REVISE. check the sum"):
    def respond(messages):
        if messages[0]["content"].startswith("You are the Critic"):
            return verdict
        if len(messages) > 2:  # the fix: history, the chain's answer, the critique
            return "Answer: 7"
        return "Answer: 5"

    return respond


def typed_model(verdict="R"):
    def respond(messages, gen, schema):
        assert schema is not None, "schema mode makes structured calls only"
        if schema.__name__ == "CriticReply":
            return json.dumps({"verdict": verdict, "note": "check the sum"})
        answer = "7" if len(messages) > 2 else "5"
        return json.dumps({"plan": ["add"], "need": [], "answer": answer})

    return respond


def context(task, client, max_revisions=1):
    gen = GenerationConfig(max_tokens=160, seed=1)
    return RunContext(task=task, client=client, gen=gen, critic_gen=gen,
                      max_revisions=max_revisions)  # fmt: skip


def edges(result):
    return [(m["sender"], m["receiver"], m["kind"]) for m in result.conversation.messages]


CHAIN_FLOW = [
    ("M", "W1", "brief"),
    ("W1", "W2", "brief"),
    ("W1", "W2", "draft"),
    ("W2", "C", "draft"),
    ("W2", "C", "brief"),
    ("C", "M", "verdict"),
]


@pytest.mark.parametrize(
    "codec,settings,model",
    [
        (ProseCodec, None, prose_model),
        (TerseTalkCodec, TerseTalkRouteSettings(policy="chain"), typed_model),
    ],
)
def test_chain_revise_buys_one_fix_by_worker1(samples, codec, settings, model):
    example = read_sample(samples["gsm8k"])[0]
    verdict = "R" if codec is TerseTalkCodec else "REVISE. check the sum"
    client = ScriptedClient(model(verdict))
    res = converse(example, context("gsm8k", client), codec=codec, topology=CHAIN,
                   settings=settings)  # fmt: skip
    assert edges(res) == [*CHAIN_FLOW, ("M", "W1", "verdict"), ("W1", "M", "final")]
    assert res.outcome == {"verdict": "revise", "verdict_explicit": True, "revisions": 1}
    assert res.prediction == "7"  # Worker1's fixed answer, not Worker2's proposal
    roles = [c["role"] for c in res.conversation.calls]
    # the TerseTalk codec's Speaker logs a call under the participant's kind, not its name
    names = ["worker1", "worker2"] if codec is ProseCodec else ["worker", "worker"]
    assert roles == [*names, "critic", names[0]]
    # the fix is Worker1's own chat: its brief, the chain's answer, then the critique
    fix_call = client.calls[-1]["messages"]
    assert fix_call[1]["content"] == client.calls[0]["messages"][1]["content"]
    assert fix_call[2] == {"role": "assistant", "content": res.conversation.messages[3]["content"]}


@pytest.mark.parametrize("verdict,max_revisions", [("ACCEPT. ok", 1), ("REVISE. no", 0)])
def test_chain_without_a_fix_ends_with_worker2s_proposal(samples, verdict, max_revisions):
    example = read_sample(samples["gsm8k"])[0]
    ctx = context("gsm8k", ScriptedClient(prose_model(verdict)), max_revisions)
    res = converse(example, ctx, codec=ProseCodec, topology=CHAIN)
    assert edges(res) == [*CHAIN_FLOW, ("W2", "M", "final")]
    assert res.outcome["revisions"] == 0 and res.prediction == "5"
    assert len(res.conversation.calls) == 3


def test_chain_layout_declares_its_edges():
    assert CHAIN.layout.directions == ("M_W1", "W1_W2", "M_W2", "W2_C", "C_M", "W2_M", "W1_M")
    assert [f.name for f in CHAIN.layout.outcome] == ["verdict", "verdict_explicit", "revisions"]
    routed = system("topology_tersetalk").layout
    assert set(STAR.layout.directions) | set(CHAIN.layout.directions) == set(routed.directions)


@pytest.mark.parametrize(
    "codec,settings,model,features",
    [
        (ProseCodec, ProseRouteSettings, prose_model, "prose"),
        (TerseTalkCodec, TerseTalkRouteSettings, typed_model, "typed"),
    ],
)
@pytest.mark.parametrize("policy,fixed", [("star", STAR), ("chain", CHAIN)])
def test_routed_run_is_the_fixed_topologys_run(samples, codec, settings, model, features,
                                               policy, fixed):  # fmt: skip
    """Routing adds columns, never changes a message: star is star, chain is chain."""
    example = read_sample(samples["hotpotqa"])[1]
    s = settings(policy=policy)
    verdict = "R" if codec is TerseTalkCodec else "REVISE. check the sum"
    routed = converse(example, context("hotpotqa", ScriptedClient(model(verdict))), codec=codec,
                      topology=Routed(features), settings=s)  # fmt: skip
    plain = converse(example, context("hotpotqa", ScriptedClient(model(verdict))), codec=codec,
                     topology=fixed, settings=s)  # fmt: skip
    assert routed.conversation.messages == plain.conversation.messages
    assert routed.prediction == plain.prediction
    # the same counters; the routed layout declares both topologies' edges (zero when unused)
    assert {k: routed.counters[k] for k in plain.counters} == plain.counters
    assert all(routed.counters[k] == 0 for k in set(routed.counters) - set(plain.counters))
    assert {k: routed.outcome[k] for k in plain.outcome} == plain.outcome
    assert routed.outcome["route"] == policy and routed.outcome["route_policy"] == policy


def routed_spec(base_config, tmp_path, task, name, variants):
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    cfg["systems"][name] = {"variants": copy.deepcopy(variants)}
    cfg.update(ablations={}, calibration={})
    cfg["evaluation"]["comparisons"] = []
    validate_config(cfg)
    return {v: run_spec(cfg, task, name, v) for v in variants}


POLICIES = {p: {"policy": p} for p in ("star", "chain", "random", "oracle", "adaptive")}


def test_policies_through_the_runner(base_config, tmp_path, samples):
    frames = []
    for task in ("hotpotqa", "gsm8k"):
        specs = routed_spec(base_config, tmp_path, task, "topology_tersetalk", POLICIES)
        for variant, spec in specs.items():
            df = run(spec, samples[task], tmp_path / f"{task}-{variant}.parquet",
                     client=ScriptedClient(typed_model("A")), progress=False)  # fmt: skip
            assert df["error"].isna().all(), df["error"].tolist()
            frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    by = {v: g for v, g in df.groupby("variant")}
    assert (by["star"]["route"] == "star").all() and (by["chain"]["route"] == "chain").all()
    assert (by["oracle"]["route"] == "chain").all()  # both tasks are chain-labelled
    assert (by["oracle"]["route_label"] == "chain").all()
    assert (by["adaptive"]["route"] == by["adaptive"]["route_rule"]).all()
    # every policy records the same signals for the same example
    sig = df.groupby("example_id")["route_signals"].nunique()
    assert (sig == 1).all()
    # a star row spends tokens on star edges only, a chain row on chain edges only
    star, chain = by["star"].iloc[0], by["chain"].iloc[0]
    assert star["tokens_M_W_cl100k"] > 0 and star["tokens_W1_W2_cl100k"] == 0
    assert chain["tokens_W1_W2_cl100k"] > 0 and chain["tokens_M_W_cl100k"] == 0
    assert json.loads(chain["counters"])["msg_lines_W1_W2"] > 0
    assert "t_route_s" not in deterministic_columns(df)
    table = policy_table(df)
    assert table.set_index("variant").loc["oracle", "label_agreement"] == 1.0
    assert table.set_index("variant").loc["star", "label_agreement"] == 0.0


def test_an_error_row_keeps_the_route_columns_typed(base_config, tmp_path, samples):
    def broken(messages, gen, schema):
        raise RuntimeError("model exploded")

    spec = routed_spec(base_config, tmp_path, "gsm8k", "topology_tersetalk",
                       {"adaptive": {}})["adaptive"]  # fmt: skip
    spec["pipeline"]["max_error_share"] = 1.0  # every row is an error row here
    df = run(spec, samples["gsm8k"], tmp_path / "err.parquet", client=ScriptedClient(broken),
             progress=False)  # fmt: skip
    assert df["error"].notna().all()
    assert (df["route"] == "error").all() and df["route_score"].isna().all()
    assert str(df["route_score"].dtype) == "float64" and str(df["route"].dtype) == "string"


@pytest.mark.integration
def test_chain_on_the_real_embedded_model(base_config, tmp_path, samples):
    """One GSM8K example down the chain, on SmolLM2 in process (TerseTalk, schema mode)."""
    spec = routed_spec(base_config, tmp_path, "gsm8k", "topology_tersetalk",
                       {"chain": {"policy": "chain"}})["chain"]  # fmt: skip
    df = run(spec, samples["gsm8k"], tmp_path / "real.parquet", limit=1, progress=False)
    row = df.iloc[0]
    assert row["error"] is pd.NA or pd.isna(row["error"]), row["error"]
    assert row["route"] == "chain" and row["backend"] == "llamacpp"
    messages = [m for m in message_list(row["messages"]) if m["kind"] != "deref"]
    assert [(m["sender"], m["receiver"], m["kind"]) for m in messages][:6] == CHAIN_FLOW
    calls = json.loads(row["calls"])
    assert [c["role"] for c in calls][:3] == ["worker", "worker", "critic"]  # Speaker: kinds
    assert row["tokens_W1_W2_cl100k"] > 0 and row["tokens_W2_C_cl100k"] > 0
    assert row["tokens_C_M_cl100k"] > 0
    assert row["revisions"] in (0, 1) and len(calls) == 3 + row["revisions"]


# -- metrics on hand-made frames -------------------------------------------------------------
def frame(system_name, variant, policy, rows):
    """rows: (task, route, correct, tokens) tuples."""
    return pd.DataFrame(
        [
            {
                "system": system_name, "variant": variant, "route_policy": policy, "task": t,
                "route": r, "correct": c, "tokens_total_cl100k": n, "t_route_s": 0.001,
                "error": None, "example_id": f"{t}{i}",
            }
            for i, (t, r, c, n) in enumerate(rows)
        ]
    )  # fmt: skip


def study():
    """TerseTalk: star 50% at 100 tokens, chain 75% at 200, adaptive 75% at 150 (right 4/4);
    free-form adaptive routes right 2 of 4."""
    tasks = ["boolq", "boolq", "gsm8k", "gsm8k"]
    tt = "topology_tersetalk"
    return pd.concat(
        [
            frame(tt, "star", "star",
                  [(t, "star", c, 100) for t, c in zip(tasks, [1, 1, 0, 0], strict=True)]),
            frame(tt, "chain", "chain",
                  [(t, "chain", c, 200) for t, c in zip(tasks, [1, 1, 1, 0], strict=True)]),
            frame(tt, "adaptive", "adaptive",
                  [("boolq", "star", 1, 100), ("boolq", "star", 1, 100),
                   ("gsm8k", "chain", 1, 200), ("gsm8k", "chain", 0, 200)]),
            frame("topology_freeform", "adaptive", "adaptive",
                  [(t, "chain", 1, 300) for t in tasks]),
        ],
        ignore_index=True,
    )  # fmt: skip


def test_metric_formulas():
    assert token_reduction(150, 200) == 0.25
    assert quality_preservation(0.5, 0.75) == pytest.approx(2 / 3)
    assert efficiency_score(0.25, 0.8) == pytest.approx(0.2)
    assert math.isnan(ratio(0, 0)) and ratio(1, 0) == math.inf


def test_policy_table_and_comparison_to_the_fixed_topologies():
    df = study()
    table = compare_to_fixed(policy_table(df), df).set_index(["system", "variant"])
    tt = table.loc["topology_tersetalk"]
    assert list(tt["label_agreement"]) == [1.0, 0.5, 0.5]  # adaptive, chain, star
    # star 2/4 against chain 3/4, one discordant pair: no significant difference, so no
    # best fixed topology (not the star by its tokens)
    assert best_fixed(df, "topology_tersetalk") == ""
    adaptive = tt.loc["adaptive"]
    assert adaptive["best_fixed"] == "none (tie: p = 1)" and adaptive["fixed_p_value"] == 1.0
    assert adaptive["accuracy"] == 0.75 and adaptive["tokens"] == 150
    assert math.isnan(adaptive["token_reduction"])  # against a best one: there is none
    assert adaptive["token_reduction_vs_chain"] == 0.25  # (200 - 150) / 200
    assert adaptive["token_reduction_vs_star"] == -0.5
    assert adaptive["quality_preservation_vs_chain"] == 1.0
    assert adaptive["quality_preservation_vs_star"] == 1.5
    assert adaptive["chain_share"] == 0.5
    # free-form has no fixed runs here: nothing to compare with, said as NaN, not 0
    ff = table.loc[("topology_freeform", "adaptive")]
    assert ff["best_fixed"] == "" and math.isnan(ff["token_reduction_vs_star"])
    assert label_agreement(df[df["system"] == "topology_freeform"]) == 0.5


def test_best_fixed_needs_both_fixed_runs():
    df = study()
    with pytest.raises(ValueError, match="fixed star and chain"):
        best_fixed(df, "topology_freeform")


def test_label_agreement_counts_errors_as_wrong_and_refuses_unlabelled_tasks():
    df = frame("s", "v", "adaptive", [("boolq", "star", 1, 1), ("boolq", "error", 0, 0)])
    assert label_agreement(df) == 0.5
    with pytest.raises(KeyError, match="no topology label"):
        label_agreement(frame("s", "v", "adaptive", [("toolqa", "star", 1, 1)]))


def signal_rows():
    """facts is the only signal; direct tasks have 1 fact, chain tasks 3."""
    rows = []
    for task, facts in [("boolq", 1), ("socialiqa", 1), ("gsm8k", 3), ("hotpotqa", 3)]:
        sig = {"facts": facts, "plans": 0, "questions": 0, "assumptions": 0, "refs": 0,
               "code": 0}  # fmt: skip
        rows.append({"task": task, "error": None, "route_signals": json.dumps(sig),
                     "route_weights": json.dumps({"facts": 1.0})})  # fmt: skip
    return pd.DataFrame(rows)


def test_theta_sweep_replays_the_rule_on_recorded_signals():
    sweep = theta_sweep(signal_rows(), [1, 2, 3, 5]).set_index(["theta", "task"])
    assert sweep.loc[(1.0, "all"), "label_agreement"] == 0.5  # everything chain
    assert sweep.loc[(2.0, "all"), "label_agreement"] == 1.0
    assert sweep.loc[(3.0, "all"), "label_agreement"] == 1.0
    assert sweep.loc[(5.0, "all"), "label_agreement"] == 0.5  # everything star
    assert sweep.loc[(5.0, "all"), "chain_share"] == 0.0
    assert sweep.loc[(1.0, "boolq"), "label_agreement"] == 0.0
    # without an outcome oracle: no oracle agreement, said as NaN and 0 decisive
    assert sweep["oracle_agreement"].isna().all() and (sweep["n_decisive"] == 0).all()


def test_leave_one_task_out_chooses_theta_without_the_held_out_task():
    loto = leave_one_task_out(signal_rows(), [1, 2, 3, 5]).set_index("held_out")
    assert list(loto.index) == ["boolq", "gsm8k", "hotpotqa", "socialiqa"]
    assert (loto["theta"] == 2.0).all()  # the smallest θ that separates the others
    assert (loto["label_agreement"] == 1.0).all()


def test_report_writes_the_tables_and_figures(base_config, tmp_path, samples):
    from tersetalk.topology.cli import main

    variants = {p: {"policy": p} for p in ("star", "chain", "adaptive")}
    paths = []
    for name, model in (("topology_tersetalk", typed_model("A")),
                        ("topology_freeform", prose_model("ACCEPT. ok"))):  # fmt: skip
        for task in ("hotpotqa", "gsm8k"):
            for variant, spec in routed_spec(base_config, tmp_path, task, name, variants).items():
                out = tmp_path / "runs" / task / name / f"{variant}.parquet"
                run(spec, samples[task], out, client=ScriptedClient(model), progress=False)
                paths.append(str(out))
    tables, figures = tmp_path / "tables", tmp_path / "figures"
    assert main(["topology", *paths, "--tables", str(tables), "--figures", str(figures)]) == 0
    six = pd.read_csv(tables / "six_policies.csv")
    assert list(six["policy_label"]) == ["Fixed-Star", "Fixed-Chain", "FreeForm-Adaptive",
                                         "TerseTalk-Adaptive", "Outcome-Oracle"]  # fmt: skip
    # real runs record the end-to-end time and, on TerseTalk only, the overflow counter
    pol = pd.read_csv(tables / "policies.csv").set_index(["system", "variant"])
    assert pol["t_example_mean_s"].notna().all() and pol["label_agreement_ci_low"].notna().all()
    # a scripted double at the floor: too few decisive examples, said with the counts
    assert (pol["oracle_verdict"] == "inconclusive").all()
    assert pol["oracle_note"].str.startswith("inconclusive: too few decisive examples").all()
    assert pol.loc["topology_tersetalk", "overflow_rate"].notna().all()
    assert pol.loc["topology_freeform", "overflow_rate"].isna().all()
    sweep = pd.read_csv(tables / "theta_sweep.csv")
    assert sorted(set(sweep["theta"])) == [1.0, 3.0, 5.0, 7.0]
    summary = json.loads((tables / "summary.json").read_text())
    assert summary["n_rows"] == 2 * 2 * 3 * 3 and summary["errors"] == 0
    assert set(summary["label_agreement_adaptive"]) == {"topology_tersetalk",
                                                         "topology_freeform"}  # fmt: skip
    assert summary["outcome_oracle"]["topology_tersetalk"]["n_oracle"] == 6
    assert summary["protocol_advantage"]["verdict"] == "inconclusive"  # no fitted runs
    for stem in ("topology_selection", "topology_tokens_accuracy", "topology_theta",
                 "topology_ablations"):  # fmt: skip
        assert (figures / f"{stem}.png").stat().st_size > 0
    other = pd.read_parquet(paths[0]).assign(system="freeform")
    other.to_parquet(tmp_path / "freeform.parquet")
    with pytest.raises(SystemExit, match="not routed systems"):
        main(["topology", str(tmp_path / "freeform.parquet"), "--tables", str(tables),
              "--figures", str(figures)])  # fmt: skip
