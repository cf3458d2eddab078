"""The topology study judged by outcomes: the outcome oracle (cheapest correct fixed
topology), regret against it, the jackknife t interval over tasks, the floor verdict, the
best fixed topology only on a significant McNemar test, error rows as wrong answers, the
protocol advantage of the fitted routers, and the targets that read them.

All on hand-built run frames whose answers are known (no model call).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from test_topology_report import GOLD, WRONG  # the study's frames: answers the scorers read

from tersetalk.core.intervals import wilson
from tersetalk.stats.cluster import cluster_bootstrap
from tersetalk.topology.metrics import (
    SIX_POLICIES,
    compare_to_fixed,
    fixed_comparison,
    label_of,
    oracle_counts,
    outcome_columns,
    outcome_oracle,
    paired_to_fixed,
    policy_table,
    protocol_advantage,
    six_policies,
)
from tersetalk.topology.router import SIGNALS

TT, FF = "topology_tersetalk", "topology_freeform"
SIGNALS_JSON = json.dumps(dict.fromkeys(SIGNALS, 1), sort_keys=True)
WEIGHTS_JSON = json.dumps(dict.fromkeys(SIGNALS, 1.0), sort_keys=True)


def run(system, variant, policy, rows, task="gsm8k"):
    """rows: (route, correct, tokens[, error]) per example e0, e1, ... of ``task``."""
    out = []
    for i, r in enumerate(rows):
        route, correct, tokens, *rest = r
        error = rest[0] if rest else None
        out.append({
            "system": system, "variant": variant, "route_policy": policy, "task": task,
            "example_id": f"e{i}", "seed": 0, "route": route, "correct": correct,
            # what the report's rescoring reads: the task's scorer agrees with correct
            "gold": GOLD[task], "prediction": GOLD[task] if correct else WRONG[task],
            "tokens_total_cl100k": tokens, "t_route_s": 0.001, "error": error,
            "route_signals": SIGNALS_JSON, "route_weights": WEIGHTS_JSON,
            "backend": "scripted", "model": "double",
        })  # fmt: skip
    return pd.DataFrame(out)


def hand_built():
    """Seven examples of one task: the oracle of each is known.

    e0 both right, star cheaper -> star; e1 both right, chain cheaper -> chain;
    e2 chain only -> chain; e3 star only -> star; e4 both wrong -> tie (all-wrong);
    e5 both right at equal tokens -> tie; e6 the star row is an error row that records
    correct 1 (it counts 0) and the chain is right -> chain.
    """
    star = run(TT, "star", "star", [
        ("star", 1, 100), ("star", 1, 300), ("star", 0, 100), ("star", 1, 100),
        ("star", 0, 100), ("star", 1, 150), ("error", 1, 0, "boom"),
    ])  # fmt: skip
    chain = run(TT, "chain", "chain", [
        ("chain", 1, 200), ("chain", 1, 200), ("chain", 1, 200), ("chain", 0, 200),
        ("chain", 0, 80), ("chain", 1, 150), ("chain", 1, 200),
    ])  # fmt: skip
    return pd.concat([star, chain], ignore_index=True)


def test_the_outcome_oracle_is_the_cheapest_correct_topology():
    o = outcome_oracle(hand_built(), TT)
    assert list(o["oracle"]) == ["star", "chain", "chain", "star", "", "", "chain"]
    assert list(o["oracle_kind"]) == ["cheaper", "cheaper", "only-chain", "only-star",
                                      "all-wrong", "equal-tokens", "only-chain"]  # fmt: skip
    assert list(o["oracle_correct"]) == [1, 1, 1, 1, 0, 1, 1]
    # the pick's tokens; a tie spends the fewer of the two
    assert list(o["oracle_tokens"]) == [100, 200, 200, 100, 80, 150, 200]
    assert o.loc[6, "star_correct"] == 0  # the error row counts as wrong
    c = oracle_counts(o)
    assert (c["n_oracle"], c["n_decisive"], c["n_ties"], c["n_all_wrong"]) == (7, 5, 2, 1)
    assert (c["star_picks"], c["chain_picks"]) == (2, 3)
    assert c["accuracy"] == pytest.approx(6 / 7)
    with pytest.raises(ValueError, match="fixed star and chain"):
        outcome_oracle(hand_built()[lambda d: d["variant"] == "star"], TT)


def test_regret_and_agreement_against_the_oracle():
    df = hand_built()
    # a policy that always takes the star: right on e0 e1 e3 e5, error-free
    pol = run(TT, "adaptive", "adaptive", [
        ("star", 1, 100), ("star", 1, 300), ("star", 0, 100), ("star", 1, 100),
        ("star", 0, 100), ("star", 1, 150), ("star", 0, 100),
    ])  # fmt: skip
    o = outcome_oracle(df, TT)
    cols = outcome_columns(pol, o, interval="wilson")
    assert (cols["n_decisive"], cols["n_ties"], cols["n_all_wrong"]) == (5, 2, 1)
    assert cols["oracle_agreement"] == pytest.approx(2 / 5)  # e0 and e3 of 5 decisive
    assert (cols["oracle_agreement_ci_low"], cols["oracle_agreement_ci_high"]) == (
        pytest.approx(wilson(0.4, 5, continuity=True))
    )
    # oracle correct 1,1,1,1,0,1,1 minus policy 1,1,0,1,0,1,0
    assert cols["accuracy_regret"] == pytest.approx(2 / 7)
    # policy tokens minus the oracle's: 0, 100, -100, 0, 20, 0, -100
    assert cols["token_regret"] == pytest.approx(-80 / 7)


def test_cluster_bootstrap_resamples_whole_clusters_deterministically():
    values = np.r_[np.zeros(50), np.ones(50)]
    clusters = ["a"] * 50 + ["b"] * 50
    res = cluster_bootstrap(values, clusters, n_resamples=1000, seed=3)
    assert res.estimate == 0.5 and res.n_clusters == 2 and res.n == 100
    # two clusters: resamples are {a,a} -> 0, {a,b} -> 0.5, {b,b} -> 1 (an example
    # bootstrap of these 100 values would give about [0.4, 0.6])
    assert (res.low, res.high) == (0.0, 1.0)
    again = cluster_bootstrap(values, clusters, n_resamples=1000, seed=3)
    assert again == res
    # the default (per-cluster sums) and a callable mean draw the same clusters
    uneven = np.r_[np.zeros(3), np.ones(7), np.full(5, 0.5)]
    groups = ["x"] * 3 + ["y"] * 7 + ["z"] * 5
    fast = cluster_bootstrap(uneven, groups, n_resamples=300, seed=1)
    slow = cluster_bootstrap(uneven, groups, np.mean, n_resamples=300, seed=1)
    assert (fast.low, fast.high) == pytest.approx((slow.low, slow.high))
    one = cluster_bootstrap([0.0, 1.0], ["t", "t"], n_resamples=50)
    assert one.n_clusters == 1 and one.low == one.high == 0.5
    assert math.isnan(cluster_bootstrap([], [], n_resamples=10).estimate)
    with pytest.raises(ValueError, match="one label per row"):
        cluster_bootstrap([1.0, 2.0], ["a"], n_resamples=10)


def test_outcomes_at_the_floor_are_inconclusive_with_their_counts():
    df = hand_built()
    table = policy_table(df, oracles={TT: outcome_oracle(df, TT)}, n_resamples=50)
    star = table.set_index("variant").loc["star"]
    assert star["oracle_verdict"] == "inconclusive"
    assert star["oracle_note"].startswith("inconclusive: too few decisive examples (5 of 7)")
    assert star["n_decisive_tasks"] == 1
    # enough decisive examples over two tasks: measured, with a jackknife t interval
    big = pd.concat([many(TT, task) for task in ("boolq", "gsm8k")], ignore_index=True)
    t = policy_table(big, oracles={TT: outcome_oracle(big, TT)}, n_resamples=200)
    row = t.set_index("variant").loc["star"]
    assert row["oracle_verdict"] == "measured" and row["n_decisive"] == 24
    assert "jackknife t interval over 2 task(s)" in row["oracle_interval"]
    assert row["oracle_agreement_ci_low"] <= row["oracle_agreement"]
    assert row["oracle_agreement"] <= row["oracle_agreement_ci_high"]


def many(system, task, n=12, star_right=None, chain_right=None, routes=None, variant=None):
    """n examples of ``task``: fixed runs (star 100 tokens, chain 200) and, with
    ``routes``, a routed variant; star right on ``star_right`` indices (default: even
    ones), chain on ``chain_right`` (default: odd ones)."""
    star_right = set(range(0, n, 2)) if star_right is None else set(star_right)
    chain_right = set(range(1, n, 2)) if chain_right is None else set(chain_right)
    frames = [
        run(system, "star", "star", [("star", int(i in star_right), 100) for i in range(n)], task),
        run(system, "chain", "chain", [("chain", int(i in chain_right), 200) for i in range(n)],
            task),
    ]  # fmt: skip
    if routes is not None:
        right = {"star": star_right, "chain": chain_right}
        rows = [(r, int(i in right[r]), 100 if r == "star" else 200)
                for i, r in enumerate(routes(task, i) for i in range(n))]  # fmt: skip
        frames.append(run(system, variant or "adaptive", "adaptive", rows, task))
    out = pd.concat(frames, ignore_index=True)
    out["example_id"] = task + "-" + out["example_id"]
    return out


def test_the_best_fixed_topology_needs_a_significant_difference():
    # 2/30 against 2/30 on different examples: a tie, whatever the tokens say
    df = many(TT, "gsm8k", n=30, star_right=[0, 1], chain_right=[2, 3])
    test = fixed_comparison(df, TT)
    assert (test["star_only"], test["chain_only"]) == (2, 2)
    assert test["p_value"] == 1.0 and test["best"] == ""
    assert test["best_label"] == "none (tie: p = 1)"
    table = compare_to_fixed(policy_table(df), df)
    star = table.set_index("variant").loc["star"]
    assert star["best_fixed"] == "none (tie: p = 1)" and star["best_fixed_variant"] == ""
    assert math.isnan(star["token_reduction"])  # no best one to reduce against
    chain = table.set_index("variant").loc["chain"]
    assert chain["token_reduction_vs_star"] == -1.0 and chain["token_reduction_vs_chain"] == 0
    paired = paired_to_fixed(df, table, n_resamples=100).set_index("variant")
    assert paired.loc["chain", "n_paired_vs_star"] == 30 and paired.loc["chain", "n_paired"] == 0
    assert paired.loc["chain", "quality_verdict"] == ""
    # 20/30 against 5/30 (15 discordant, all the star's way): the star, p = 2 / 2^15
    df = many(TT, "gsm8k", n=30, star_right=range(20), chain_right=range(5))
    test = fixed_comparison(df, TT)
    assert test["best"] == "star" and test["p_value"] == pytest.approx(2 * 0.5**15)
    table = compare_to_fixed(policy_table(df), df).set_index("variant")
    assert table.loc["chain", "best_fixed"] == "star"
    assert table.loc["chain", "token_reduction"] == -1.0


def test_an_error_row_counts_as_a_wrong_answer_and_stays_paired():
    df = many(TT, "gsm8k", n=4, star_right=range(4), chain_right=range(4))
    pol = run(TT, "adaptive", "adaptive", [
        ("star", 1, 100), ("star", 1, 100), ("star", 1, 100), ("error", None, 0, "boom"),
    ])  # fmt: skip
    pol["example_id"] = "gsm8k-" + pol["example_id"]
    df = pd.concat([df, pol], ignore_index=True)
    table = policy_table(df)
    assert table.set_index("variant").loc["adaptive", "accuracy"] == 0.75  # not 3/3
    paired = paired_to_fixed(df, compare_to_fixed(table, df), n_resamples=100)
    a = paired.set_index("variant").loc["adaptive"]
    assert a["n_paired_vs_star"] == 4  # the error row is paired, not dropped
    assert a["quality_diff_vs_star"] == -0.25


def test_six_policies_rename_the_label_policy_and_add_the_outcome_oracle():
    assert [label for label, _, _ in SIX_POLICIES][3] == "Task-Label"
    assert dict((v, label) for label, _, v in SIX_POLICIES)["oracle"] == "Task-Label"
    df = pd.concat([many(TT, t) for t in ("boolq", "gsm8k")], ignore_index=True)
    oracles = {TT: outcome_oracle(df, TT)}
    table = compare_to_fixed(policy_table(df, oracles=oracles, n_resamples=50), df)
    six = six_policies(table, oracles).set_index("policy_label")
    assert list(six.index) == ["Fixed-Star", "Fixed-Chain", "Outcome-Oracle"]
    virtual = six.loc["Outcome-Oracle"]
    assert virtual["accuracy"] == 1.0  # any-correct: one of the two is right on each
    assert virtual["tokens"] == 150.0  # the picks: star on even, chain on odd examples
    assert virtual["oracle_agreement"] == 1.0 and virtual["accuracy_regret"] == 0.0


def routed(system, task, i, *, typed_good):
    """A router's route: TerseTalk's follows the outcome (even: star), free-form's the
    task label (boolq and socialiqa star, gsm8k and hotpotqa chain)."""
    if typed_good:
        return "star" if i % 2 == 0 else "chain"
    return label_of(task)


def advantage_frames(n):
    frames = []
    for system, good in ((TT, True), (FF, False)):
        for task in ("boolq", "gsm8k", "hotpotqa", "socialiqa"):
            frames.append(
                many(
                    system,
                    task,
                    n=n,
                    variant="fitted",
                    routes=lambda t, i, s=system, g=good: routed(s, t, i, typed_good=g),
                )
            )
    return pd.concat(frames, ignore_index=True)  # fmt: skip


def test_protocol_advantage_of_the_fitted_routers_by_outcomes():
    df = advantage_frames(12)
    oracles = {s: outcome_oracle(df, s) for s in (TT, FF)}
    pick = {s: df[(df["system"] == s) & (df["variant"] == "fitted")] for s in (TT, FF)}
    adv = protocol_advantage(pick[TT], pick[FF], oracles[TT], oracles[FF], n_resamples=300)
    assert adv["n_paired"] == 48 and adv["n_tasks"] == 4
    o = adv["oracle"]
    assert o["typed"] == 1.0 and o["prose"] == 0.5 and o["ratio"] == 2.0
    assert o["difference"] == 0.5 and o["verdict"] == "measured"
    assert o["ratio_ci_low"] <= 2.0 <= o["ratio_ci_high"]
    # free-form's label routes agree with the label on every example, TerseTalk's on half
    assert adv["label"]["typed"] == 0.5 and adv["label"]["prose"] == 1.0
    again = protocol_advantage(pick[TT], pick[FF], oracles[TT], oracles[FF], n_resamples=300)
    assert again == adv


def write_study(tmp_path, df, name="t"):
    from tersetalk.topology.cli import report

    runs = []
    for (system, variant), g in df.groupby(["system", "variant"]):
        p = tmp_path / f"{name}-{system}-{variant}.parquet"
        g.to_parquet(p)
        runs.append(str(p))
    out = tmp_path / name
    report(runs, out, tmp_path / f"{name}-fig", n_resamples=200)
    return out


def test_targets_read_the_outcomes_and_never_decide_on_the_task_mix(tmp_path):
    from tersetalk.stats.targets import topology_rows

    # the floor: two examples per task, few decisive ones; the label ratio is set by the mix
    df = advantage_frames(2)
    adaptive = df[df["variant"] == "fitted"].assign(variant="adaptive")
    out = write_study(tmp_path, pd.concat([df, adaptive], ignore_index=True), "floor")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["protocol_advantage"]["verdict"] == "inconclusive"
    assert summary["outcome_oracle"][TT]["n_decisive"] == 8
    rows = {r["id"]: r for r in topology_rows(out)}
    adv = rows["topology_protocol_advantage"]
    assert adv["status"] == "inconclusive" and "too few decisive examples" in adv["reason"]
    agree = rows["topology_agreement"]
    assert agree["status"] == "inconclusive"
    assert "too few decisive examples (8 of 8)" in agree["reason"]
    # measured: TerseTalk follows the outcomes on every example of four tasks
    df = advantage_frames(12)
    adaptive = df[df["variant"] == "fitted"].assign(variant="adaptive")
    out = write_study(tmp_path, pd.concat([df, adaptive], ignore_index=True), "big")
    rows = {r["id"]: r for r in topology_rows(out)}
    agree = rows["topology_agreement"]
    assert agree["status"] == "met" and agree["value"] == 1.0
    assert np.isfinite(agree["ci_low"]) and "jackknife t interval over 4 task(s)" in agree["reason"]
    assert "label agreement (secondary" in agree["reason"]
    adv = rows["topology_protocol_advantage"]
    assert adv["value"] == 2.0 and np.isfinite(adv["ci_low"]) and np.isfinite(adv["ci_high"])
    # every task alike (1.0 against 0.5): every resample of tasks gives 2.0
    assert adv["status"] == "met" and (adv["ci_low"], adv["ci_high"]) == (2.0, 2.0)
    assert "label agreement ratio (secondary" in adv["reason"]
    # star right on even, chain on odd examples: no significant difference -> both
    tokens = rows["topology_tokens"]
    assert "none (tie: p = 1)" in tokens["reason"] and "decided against both" in tokens["reason"]
    assert "vs star" in tokens["measured"] and "vs chain" in tokens["measured"]
    assert "quality verdict beside it" in tokens["reason"]
    assert np.isfinite(tokens["ci_low"]) and np.isfinite(tokens["ci_high"])


def _six(d, **over):
    d.mkdir()
    base = {
        "policy_label": "TerseTalk-Adaptive", "system": TT, "variant": "adaptive", "n": 600,
        "label_agreement": 0.5, "oracle_agreement": 0.95, "oracle_agreement_ci_low": 0.9,
        "oracle_agreement_ci_high": 0.97, "n_oracle": 600, "n_decisive": 400, "n_ties": 200,
        "n_all_wrong": 150, "oracle_verdict": "measured", "oracle_note": "",
        "oracle_interval": "cluster bootstrap over 6 task(s), 2000 resamples",
        "best_fixed": "none (tie: p = 0.5)", "best_fixed_variant": "", "fixed_p_value": 0.5,
    }  # fmt: skip
    for arm in ("star", "chain"):
        base |= {
            f"n_paired_vs_{arm}": 600, f"token_reduction_paired_vs_{arm}": 0.25,
            f"token_reduction_ci_low_vs_{arm}": 0.22, f"token_reduction_ci_high_vs_{arm}": 0.28,
            f"quality_diff_vs_{arm}": 0.0, f"quality_verdict_vs_{arm}": "non-inferior",
            f"quality_verdict_reason_vs_{arm}": "bound above the margin",
        }  # fmt: skip
    base |= over
    pd.DataFrame([base]).to_csv(d / "six_policies.csv", index=False)
    return d


def test_the_token_target_on_a_tie_is_decided_against_both_fixed_topologies(tmp_path):
    from tersetalk.stats.targets import topology_rows

    def tokens(d):
        return {r["id"]: r for r in topology_rows(d)}["topology_tokens"]

    assert tokens(_six(tmp_path / "both"))["status"] == "met"
    half = tokens(_six(tmp_path / "half", token_reduction_ci_low_vs_chain=0.01,
                       token_reduction_ci_high_vs_chain=0.1))  # fmt: skip
    assert half["status"] == "inconclusive" and half["ci_low"] == 0.01  # the binding arm
    none = tokens(_six(tmp_path / "none", token_reduction_ci_high_vs_chain=0.1,
                       token_reduction_ci_low_vs_chain=0.01, token_reduction_ci_low_vs_star=0.0,
                       token_reduction_ci_high_vs_star=0.05))  # fmt: skip
    assert none["status"] == "not met"
    worse = tokens(_six(tmp_path / "worse", quality_verdict_vs_star="inferior"))
    assert worse["status"] == "inconclusive" and "inferior" in worse["reason"]
    old = tmp_path / "old"
    old.mkdir()
    pd.DataFrame([{"policy_label": "TerseTalk-Adaptive", "system": TT, "variant": "adaptive",
                   "n": 10, "selection_accuracy": 1.0, "best_fixed": "star"}]).to_csv(
        old / "six_policies.csv", index=False)  # fmt: skip
    (old / "summary.json").write_text(json.dumps({"protocol_advantage": 2.0}))
    rows = {r["id"]: r for r in topology_rows(old)}
    assert all(r["status"] == "inconclusive" and "rerun" in r["reason"] for r in rows.values())
    assert "withdrawn" in rows["topology_protocol_advantage"]["reason"]
