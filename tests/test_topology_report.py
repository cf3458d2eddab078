"""The topology study's report (issue 31, deliverables 4-5): the policy table's interval,
latency and overflow columns, the paired comparison with the best fixed topology, the
ablation table and figure, variants beyond the six policies, and the report's files.

All on synthetic run frames (no model call); timings are made-up numbers checked for
how they are summarised, never against a clock.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from tersetalk.agents.router import SIGNALS
from tersetalk.metrics.topology import (
    ablation_table,
    advantage_interval,
    compare_to_fixed,
    loto_summary,
    overflow_rate,
    paired_to_fixed,
    policy_table,
)
from tersetalk.metrics.topology_cli import main, report
from tersetalk.plots.topology import ablations_figure, task_name
from tersetalk.stats.intervals import wilson

TT, FF = "topology_tersetalk", "topology_freeform"
TASKS = {"boolq": "star", "socialiqa": "star", "gsm8k": "chain", "hotpotqa": "chain"}
WEIGHTS = json.dumps(dict.fromkeys(SIGNALS, 1.0), sort_keys=True)


def rows(system, variant, routes, *, policy="adaptive", n=5, tokens=100, correct=1,
         drop="", scrambled=False, overflow=None, t_example=1.0):  # fmt: skip
    """One run frame: n examples per task; ``routes``: task -> route (or a callable of the
    example index). TerseTalk rows carry the overflow counter, free-form rows do not."""
    out = []
    for task in TASKS:
        for i in range(n):
            route = routes(task, i) if callable(routes) else routes[task]
            sig = dict.fromkeys(SIGNALS, 0) | {"facts": 3 if TASKS[task] == "chain" else 1}
            r = {
                "task": task, "system": system, "variant": variant, "seed": 0,
                "example_id": f"{task}-{i}", "route": route, "route_policy": policy,
                "route_drop": drop, "route_scrambled": scrambled, "correct": float(correct),
                "tokens_total_cl100k": tokens * (2 if route == "chain" else 1),
                "t_route_s": 0.001, "t_example_s": t_example * (i + 1), "error": None,
                "route_signals": json.dumps(sig, sort_keys=True), "route_weights": WEIGHTS,
                "backend": "scripted", "model": "double",
            }  # fmt: skip
            if system == TT:
                r["c_overflow_total"] = overflow(task, i) if overflow else 0
            out.append(r)
    return pd.DataFrame(out)


RIGHT = dict(TASKS)
ALL_CHAIN = dict.fromkeys(TASKS, "chain")


def study(n=5):
    """TerseTalk: fixed star/chain, adaptive right everywhere, two dropped signals, scrambled
    tags, fitted and planned variants; free-form: fixed runs and an adaptive run that sends
    everything to the chain."""
    frames = [
        rows(TT, "star", dict.fromkeys(TASKS, "star"), policy="star", n=n),
        rows(TT, "chain", ALL_CHAIN, policy="chain", n=n),
        rows(TT, "adaptive", RIGHT, n=n, overflow=lambda t, i: int(t == "boolq")),
        rows(TT, "drop_facts", ALL_CHAIN, n=n, drop="facts"),
        rows(TT, "drop_code", RIGHT, n=n, drop="code"),
        rows(TT, "scrambled", lambda t, i: "chain" if i % 2 else "star", n=n, scrambled=True),
        rows(TT, "fitted", RIGHT, n=n),
        rows(TT, "planned", RIGHT, n=n),
        rows(FF, "star", dict.fromkeys(TASKS, "star"), policy="star", n=n),
        rows(FF, "chain", ALL_CHAIN, policy="chain", n=n),
        rows(FF, "adaptive", ALL_CHAIN, n=n),
    ]
    return pd.concat(frames, ignore_index=True)


def test_policy_table_adds_interval_latency_overflow_and_ablation_settings():
    table = policy_table(study()).set_index(["system", "variant"])
    old = ["policy", "n", "errors", "selection_accuracy", "accuracy", "tokens", "chain_share",
           "t_route_mean_s", "t_route_median_s"]  # fmt: skip
    assert list(table.columns[: len(old)]) == old  # the existing columns stay first, in order
    a = table.loc[(TT, "adaptive")]
    assert a["n"] == 20 and a["selection_accuracy"] == 1.0
    assert (a["selection_ci_low"], a["selection_ci_high"]) == pytest.approx(wilson(1.0, 20))
    # t_example_s of the five examples of each task: 1..5 s
    assert a["t_example_mean_s"] == 3.0 and a["t_example_median_s"] == 3.0
    assert a["overflow_rate"] == 0.25  # boolq's 5 of 20 briefs overflowed
    assert table.loc[(TT, "star"), "overflow_rate"] == 0.0
    assert math.isnan(table.loc[(FF, "adaptive"), "overflow_rate"])  # no counter: NaN, not 0
    assert table.loc[(TT, "drop_facts"), "drop"] == "facts"
    assert table.loc[(TT, "scrambled"), "scrambled"] and not a["scrambled"]
    # every variant gets a row, not only the six policies
    assert {"fitted", "planned", "drop_code"} <= set(table.loc[TT].index)


def test_latency_and_overflow_without_their_columns_are_nan():
    df = study().drop(columns=["t_example_s", "c_overflow_total"])
    a = policy_table(df).set_index(["system", "variant"]).loc[(TT, "adaptive")]
    assert math.isnan(a["t_example_mean_s"]) and math.isnan(a["overflow_rate"])
    assert math.isnan(overflow_rate(pd.DataFrame({"c_overflow_total": [None, None]})))


def test_an_error_row_on_a_scrambled_variant_keeps_the_variant_scrambled():
    df = rows(TT, "scrambled", RIGHT, scrambled=True)
    df.loc[0, ["route_scrambled", "route", "error"]] = [False, "error", "boom"]
    t = policy_table(df).iloc[0]
    assert t["scrambled"] and t["errors"] == 1 and t["selection_accuracy"] == 19 / 20


def test_paired_comparison_with_the_best_fixed_topology():
    df = study(n=40)  # 160 pairs: enough for the 0.02 margin (149)
    table = paired_to_fixed(df, compare_to_fixed(policy_table(df)), n_resamples=500)
    t = table.set_index(["system", "variant"])
    a = t.loc[(TT, "adaptive")]
    # both fixed runs are always right: the star is best (fewer tokens)
    assert a["best_fixed"] == "star" and a["best_fixed_variant"] == "star"
    assert a["n_paired"] == 160
    assert a["token_reduction_paired"] == pytest.approx(a["token_reduction"]) == -0.5
    assert a["token_reduction_ci_low"] <= -0.5 <= a["token_reduction_ci_high"]
    assert a["quality_diff"] == 0.0 and a["quality_verdict"] == "non-inferior"
    small = paired_to_fixed(study(n=2), compare_to_fixed(policy_table(study(n=2))),
                            n_resamples=200).set_index(["system", "variant"])  # fmt: skip
    assert small.loc[(TT, "adaptive"), "quality_verdict"] == "inconclusive"
    assert "too small" in small.loc[(TT, "adaptive"), "quality_verdict_reason"]


def test_paired_comparison_without_fixed_runs_is_empty_not_zero():
    df = study()
    df = df[df["variant"] == "adaptive"]
    t = paired_to_fixed(df, compare_to_fixed(policy_table(df)), n_resamples=100)
    assert (t["n_paired"] == 0).all() and t["token_reduction_ci_low"].isna().all()
    assert (t["quality_verdict"] == "").all()


def test_advantage_interval_pairs_the_examples_and_keeps_infinite_resamples():
    df = study(n=20)
    typed = df[(df["system"] == TT) & (df["variant"] == "adaptive")]
    prose = df[(df["system"] == FF) & (df["variant"] == "adaptive")]
    adv = advantage_interval(typed, prose, n_resamples=500)
    assert adv["n"] == 80 and adv["estimate"] == 2.0  # 1.0 over 0.5
    assert adv["ci_low"] <= 2.0 <= adv["ci_high"] and adv["ci_low"] > 1.0
    # free-form right on one of four examples: a third of the resamples miss it (+inf)
    typed = rows(TT, "adaptive", RIGHT, n=1)
    wrong = {"boolq": "star", "socialiqa": "chain", "gsm8k": "star", "hotpotqa": "star"}
    adv = advantage_interval(typed, rows(FF, "adaptive", wrong, n=1), n_resamples=500)
    assert adv["estimate"] == 4.0
    assert adv["ci_high"] == math.inf and np.isfinite(adv["ci_low"])
    empty = advantage_interval(typed, prose.iloc[0:0], n_resamples=10)
    assert empty["n"] == 0 and math.isnan(empty["estimate"])


def test_ablation_table_sets_each_ablation_beside_the_full_router():
    ab = ablation_table(policy_table(study()))
    tt = ab[ab["system"] == TT].set_index(["ablation", "variant"])
    assert list(ab[ab["system"] == TT]["ablation"]) == ["full", "drop", "drop", "scrambled"]
    assert tt.loc[("drop", "drop_facts"), "signal"] == "facts"
    assert tt.loc[("drop", "drop_facts"), "delta"] == -0.5
    assert tt.loc[("drop", "drop_code"), "delta"] == 0.0
    assert tt.loc[("scrambled", "scrambled"), "selection_accuracy"] == 0.5
    low, high = wilson(0.5, 20)
    assert tt.loc[("scrambled", "scrambled"), "selection_ci_low"] == pytest.approx(low)
    assert tt.loc[("scrambled", "scrambled"), "selection_ci_high"] == pytest.approx(high)
    ff = ab[ab["system"] == FF]
    assert list(ff["ablation"]) == ["full"]  # free-form ran no ablation
    none = ablation_table(policy_table(study()[lambda d: d["variant"] != "adaptive"]))
    assert none[none["ablation"] == "drop"]["delta"].isna().all()  # no full row: NaN


def test_loto_summary_of_a_precomputed_frame():
    loto = pd.DataFrame({"system": [TT, TT, FF], "held_out": ["boolq", "gsm8k", "boolq"],
                         "selection_accuracy": [1.0, 0.5, 0.0], "n": [10, 30, 10]})  # fmt: skip
    s = loto_summary(loto)
    assert s[TT]["mean_selection_accuracy"] == 0.75
    assert s[TT]["pooled_selection_accuracy"] == pytest.approx(25 / 40)
    assert s[TT]["held_out"] == {"boolq": 1.0, "gsm8k": 0.5} and s[FF]["n"] == 10
    assert set(loto_summary(loto.drop(columns="system"))) == {""}


def test_ablations_figure_draws_with_and_without_ablations(tmp_path):
    ab = ablation_table(policy_table(study()))
    ab = ab.assign(router=ab["system"].map({TT: "TerseTalk (typed lines)", FF: "free-form"}))
    out = ablations_figure(ab, "scripted:double", tmp_path / "ab")
    assert [p.suffix for p in out] == [".pdf", ".png"] and all(p.stat().st_size for p in out)
    bare = ab[ab["ablation"] == "full"]
    assert ablations_figure(bare, "m", tmp_path / "bare")[1].stat().st_size > 0
    assert task_name("socialiqa") == "Social IQa" and task_name("gsm8k") == "GSM8K"
    assert task_name("not-a-task") == "not-a-task"


def test_report_writes_every_variant_the_ablations_and_the_summary(tmp_path):
    runs = []
    for (system, variant), g in study(n=3).groupby(["system", "variant"]):
        p = tmp_path / "runs" / f"{system}-{variant}.parquet"
        p.parent.mkdir(exist_ok=True)
        g.to_parquet(p)
        runs.append(str(p))
    router = tmp_path / "router.yaml"
    router.write_text("systems:\n  topology_tersetalk:\n    theta: 2.0\n")
    loto = tmp_path / "loto_fitted.csv"
    pd.DataFrame({"system": [TT], "held_out": ["boolq"], "selection_accuracy": [0.8],
                  "n": [5]}).to_csv(loto, index=False)  # fmt: skip
    tables, figures = tmp_path / "tables", tmp_path / "figures"
    argv = [
        "topology",
        *runs,
        "--tables",
        str(tables),
        "--figures",
        str(figures),
        "--router-yaml",
        str(router),
        "--loto-fitted",
        str(loto),
        "--n-resamples",
        "200",
    ]
    assert main(argv) == 0
    pol = pd.read_csv(tables / "policies.csv", keep_default_na=False, na_values=[""])
    assert len(pol) == 11  # 8 TerseTalk variants, 3 free-form
    for col in ("selection_ci_low", "selection_ci_high", "t_example_mean_s",
                "t_example_median_s", "overflow_rate", "token_reduction_ci_low",
                "quality_verdict", "drop", "scrambled"):  # fmt: skip
        assert col in pol.columns, col
    six = pd.read_csv(tables / "six_policies.csv")
    assert "selection_ci_low" in six.columns and "TerseTalk-Adaptive" in set(six["policy_label"])
    ab = pd.read_csv(tables / "ablations.csv", keep_default_na=False)
    assert set(ab["ablation"]) == {"full", "drop", "scrambled"}
    summary = json.loads((tables / "summary.json").read_text())
    assert summary["protocol_advantage"] == 2.0 and summary["protocol_advantage_n"] == 12
    assert summary["protocol_advantage_ci_low"] <= 2.0 <= summary["protocol_advantage_ci_high"]
    assert set(summary["variants"][TT]) >= {"fitted", "planned", "scrambled"}
    fitted = summary["variants"][TT]["fitted"]
    assert fitted["n"] == 12 and fitted["selection_ci_low"] < 1.0
    assert summary["fitted_router"]["systems"][TT]["theta"] == 2.0
    assert summary["leave_one_task_out_fitted"][TT]["mean_selection_accuracy"] == 0.8
    assert set(summary["leave_one_task_out"]) == {TT, FF}
    for stem in ("topology_selection", "topology_tokens_accuracy", "topology_theta",
                 "topology_ablations"):  # fmt: skip
        for ext in ("png", "pdf"):
            assert (figures / f"{stem}.{ext}").stat().st_size > 0
    # deterministic apart from the timing columns: a second report writes the same tables
    again = tmp_path / "again"
    report(runs, again, tmp_path / "fig2", n_resamples=200, router_yaml=router, loto_fitted=loto)
    for name in ("policies.csv", "ablations.csv", "summary.json"):
        assert (again / name).read_text() == (tables / name).read_text()


def test_the_targets_read_what_the_report_writes(tmp_path):
    from tersetalk.stats.targets import topology_rows

    runs = []
    for (system, variant), g in study(n=40).groupby(["system", "variant"]):
        p = tmp_path / f"{system}-{variant}.parquet"
        g.to_parquet(p)
        runs.append(str(p))
    report(runs, tmp_path / "t", tmp_path / "f", n_resamples=300)
    rows = {r["id"]: r for r in topology_rows(tmp_path / "t")}
    agree = rows["topology_agreement"]
    assert agree["status"] == "met" and "160/160" in agree["measured"]
    assert agree["ci_low"] == pytest.approx(wilson(1.0, 160)[0])
    assert "fitted weights (fitted)" in agree["reason"]
    # adaptive routes half to the chain: 50% more tokens than the star, quality kept
    tokens = rows["topology_tokens"]
    assert tokens["status"] == "not met" and tokens["value"] == pytest.approx(-0.5)
    assert "non-inferior" in tokens["reason"] and "n=160 pairs" in tokens["measured"]
    adv = rows["topology_protocol_advantage"]
    assert adv["value"] == 2.0 and np.isfinite(adv["ci_low"]) and "rerun" not in adv["reason"]


def test_report_refuses_an_unreadable_router_file(tmp_path):
    runs = []
    for (system, variant), g in study(n=1).groupby(["system", "variant"]):
        p = tmp_path / f"{system}-{variant}.parquet"
        g.to_parquet(p)
        runs.append(str(p))
    bad = tmp_path / "router.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(SystemExit, match="expected a mapping"):
        main(["topology", *runs, "--tables", str(tmp_path / "t"), "--figures",
              str(tmp_path / "f"), "--router-yaml", str(bad), "--n-resamples", "10"])  # fmt: skip
