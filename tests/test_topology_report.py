"""The topology study's report: the policy table's interval,
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

from tersetalk.core.intervals import wilson
from tersetalk.topology.cli import main, report
from tersetalk.topology.metrics import (
    ablation_table,
    compare_to_fixed,
    loto_summary,
    overflow_rate,
    paired_to_fixed,
    policy_table,
)
from tersetalk.topology.plots import ablations_figure, task_name
from tersetalk.topology.router import SIGNALS

TT, FF = "topology_tersetalk", "topology_freeform"
TASKS = {"boolq": "star", "socialiqa": "star", "gsm8k": "chain", "hotpotqa": "chain"}
WEIGHTS = json.dumps(dict.fromkeys(SIGNALS, 1.0), sort_keys=True)
#: a gold answer per task and a prediction its scorer finds wrong
GOLD = {"boolq": "yes", "socialiqa": "A", "gsm8k": "42", "hotpotqa": "Paris"}
WRONG = {"boolq": "no", "socialiqa": "B", "gsm8k": "7", "hotpotqa": "Rome"}


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
                # what the report's rescoring reads: the task's scorer agrees with correct
                "gold": GOLD[task], "prediction": GOLD[task] if correct else WRONG[task],
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
    old = ["policy", "n", "errors", "label_agreement", "accuracy", "tokens", "chain_share",
           "t_route_mean_s", "t_route_median_s"]  # fmt: skip
    assert list(table.columns[: len(old)]) == old  # the existing columns stay first, in order
    a = table.loc[(TT, "adaptive")]
    assert a["n"] == 20 and a["label_agreement"] == 1.0
    assert (a["label_agreement_ci_low"], a["label_agreement_ci_high"]) == pytest.approx(
        wilson(1.0, 20, continuity=True)
    )
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
    assert t["scrambled"] and t["errors"] == 1 and t["label_agreement"] == 19 / 20


def test_paired_comparison_with_the_fixed_topologies():
    df = study(n=40)  # 160 pairs: enough for the 0.02 margin (149)
    table = paired_to_fixed(df, compare_to_fixed(policy_table(df), df), n_resamples=500)
    t = table.set_index(["system", "variant"])
    a = t.loc[(TT, "adaptive")]
    # both fixed runs are always right: no difference, so no best one (not the star by
    # its tokens); the adaptive router is compared with each
    assert a["best_fixed"] == "none (tie: p = 1)" and a["best_fixed_variant"] == ""
    assert a["n_paired"] == 0 and a["quality_verdict"] == ""
    assert a["n_paired_vs_star"] == 160 and a["n_paired_vs_chain"] == 160
    assert a["token_reduction_paired_vs_star"] == pytest.approx(a["token_reduction_vs_star"])
    assert a["token_reduction_vs_star"] == -0.5 and a["token_reduction_vs_chain"] == 0.25
    assert a["token_reduction_ci_low_vs_star"] <= -0.5 <= a["token_reduction_ci_high_vs_star"]
    # the paired test's own verdict on 160 equal pairs (errors none, every answer right)
    from tersetalk.stats.noninferiority import noninferiority

    same = noninferiority(np.ones(160), np.ones(160), margin=0.02, n_resamples=500, seed=0)
    assert a["quality_diff_vs_chain"] == 0.0 and a["quality_verdict_vs_chain"] == same.verdict
    small = paired_to_fixed(study(n=2), compare_to_fixed(policy_table(study(n=2)), study(n=2)),
                            n_resamples=200).set_index(["system", "variant"])  # fmt: skip
    assert small.loc[(TT, "adaptive"), "quality_verdict_vs_star"] == "inconclusive"
    assert small.loc[(TT, "adaptive"), "quality_verdict_reason_vs_star"]  # says why


def test_paired_comparison_without_fixed_runs_is_empty_not_zero():
    df = study()
    df = df[df["variant"] == "adaptive"]
    t = paired_to_fixed(df, compare_to_fixed(policy_table(df), df), n_resamples=100)
    assert (t["n_paired_vs_star"] == 0).all() and t["token_reduction_ci_low_vs_star"].isna().all()
    assert (t["quality_verdict"] == "").all() and (t["best_fixed"] == "").all()


def test_ablation_table_sets_each_ablation_beside_the_full_router():
    ab = ablation_table(policy_table(study()))
    tt = ab[ab["system"] == TT].set_index(["ablation", "variant"])
    assert list(ab[ab["system"] == TT]["ablation"]) == ["full", "drop", "drop", "scrambled"]
    assert tt.loc[("drop", "drop_facts"), "signal"] == "facts"
    assert tt.loc[("drop", "drop_facts"), "delta"] == -0.5
    assert tt.loc[("drop", "drop_code"), "delta"] == 0.0
    assert tt.loc[("scrambled", "scrambled"), "label_agreement"] == 0.5
    low, high = wilson(0.5, 20, continuity=True)
    assert tt.loc[("scrambled", "scrambled"), "label_agreement_ci_low"] == pytest.approx(low)
    assert tt.loc[("scrambled", "scrambled"), "label_agreement_ci_high"] == pytest.approx(high)
    # without outcome columns in the table, the oracle's are NaN, not 0
    assert ab["oracle_agreement"].isna().all() and ab["oracle_delta"].isna().all()
    ff = ab[ab["system"] == FF]
    assert list(ff["ablation"]) == ["full"]  # free-form ran no ablation
    none = ablation_table(policy_table(study()[lambda d: d["variant"] != "adaptive"]))
    assert none[none["ablation"] == "drop"]["delta"].isna().all()  # no full row: NaN


def test_loto_summary_of_a_precomputed_frame():
    loto = pd.DataFrame({"system": [TT, TT, FF], "held_out": ["boolq", "gsm8k", "boolq"],
                         "label_agreement": [1.0, 0.5, 0.0], "n": [10, 30, 10]})  # fmt: skip
    s = loto_summary(loto)
    assert s[TT]["mean_label_agreement"] == 0.75
    assert s[TT]["pooled_label_agreement"] == pytest.approx(25 / 40)
    # the fitted router's frame names the same measure selection_accuracy
    fitted = loto.rename(columns={"label_agreement": "selection_accuracy"})
    assert loto_summary(fitted) == s
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
    pd.DataFrame(
        {"system": [TT], "held_out": ["boolq"], "selection_accuracy": [0.8], "n": [5]}
    ).to_csv(loto, index=False)  # the fit step's column name
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
    for col in ("label_agreement_ci_low", "label_agreement_ci_high", "t_example_mean_s",
                "t_example_median_s", "overflow_rate", "token_reduction_ci_low",
                "quality_verdict", "drop", "scrambled", "oracle_agreement", "n_decisive",
                "n_ties", "n_all_wrong", "accuracy_regret", "token_regret", "oracle_verdict",
                "oracle_note", "fixed_p_value", "token_reduction_vs_star",
                "quality_verdict_vs_chain"):  # fmt: skip
        assert col in pol.columns, col
    assert "selection_accuracy" not in pol.columns
    six = pd.read_csv(tables / "six_policies.csv")
    assert "oracle_agreement" in six.columns and "TerseTalk-Adaptive" in set(six["policy_label"])
    # every column the report writes is in the data dictionary
    from tersetalk.core import columns as C

    for path in sorted(tables.glob("*.csv")):
        kind = C.file_kind(f"results/m/topology/{path.name}")
        assert kind is not None and C.undocumented(C._read_columns(path), kind) == [], path
    ab = pd.read_csv(tables / "ablations.csv", keep_default_na=False)
    assert set(ab["ablation"]) == {"full", "drop", "scrambled"}
    summary = json.loads((tables / "summary.json").read_text())
    # free-form ran no fitted router here: no protocol advantage, and says why
    assert summary["protocol_advantage"]["verdict"] == "inconclusive"
    assert "no fitted run of topology_freeform" in summary["protocol_advantage"]["note"]
    assert set(summary["variants"][TT]) >= {"fitted", "planned", "scrambled"}
    fitted = summary["variants"][TT]["fitted"]
    assert fitted["n"] == 12 and fitted["label_agreement_ci_low"] < 1.0
    # every answer right in both fixed runs: the star (cheaper) is the oracle everywhere
    assert summary["outcome_oracle"][TT]["star_picks"] == 12
    assert fitted["oracle_agreement"] == 0.5 and fitted["oracle_verdict"] == "measured"
    assert summary["best_fixed"][TT]["best_label"] == "none (tie: p = 1)"
    assert summary["fitted_router"]["systems"][TT]["theta"] == 2.0
    assert summary["leave_one_task_out_fitted"][TT]["mean_label_agreement"] == 0.8
    assert set(summary["leave_one_task_out"]) == {TT, FF}
    for stem in ("topology_selection", "topology_tokens_accuracy", "topology_theta",
                 "topology_ablations"):  # fmt: skip
        for ext in ("png", "pdf"):
            assert (figures / f"{stem}.{ext}").stat().st_size > 0
    # deterministic apart from the timing columns: a second report writes the same tables
    again = tmp_path / "again"
    report(runs, again, tmp_path / "fig2", n_resamples=200, router_yaml=router, loto_fitted=loto)
    for name in (
        "policies.csv",
        "ablations.csv",
        "summary.json",
        "policies_by_task.csv",
        "outcome_oracle.csv",
        "theta_sweep.csv",
    ):
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
    # the adaptive router follows the task labels (label agreement 1.0) but both fixed
    # runs are always right, so the star (cheaper) is the oracle everywhere: it agrees on
    # the two direct tasks only, and four tasks leave the interval wide
    agree = rows["topology_agreement"]
    assert agree["status"] == "inconclusive" and agree["value"] == 0.5
    assert "of 160 decisive examples" in agree["measured"]
    assert agree["ci_low"] < 0.85 <= agree["ci_high"] and "straddles" in agree["reason"]
    assert "label agreement (secondary, set by the task mix): 1.000" in agree["reason"]
    assert "fitted weights (fitted)" in agree["reason"]
    # no significant accuracy difference between the fixed runs: decided against both;
    # 50% more tokens than the star (not met), 25% fewer than the chain
    tokens = rows["topology_tokens"]
    assert tokens["status"] in ("inconclusive", "not met") and "against both" in tokens["reason"]
    assert "quality verdict beside it" in tokens["reason"] and "n=160 pairs" in tokens["measured"]
    assert tokens["value"] == pytest.approx(-0.5) and np.isfinite(tokens["ci_low"])
    adv = rows["topology_protocol_advantage"]
    assert adv["status"] == "inconclusive" and "no fitted run of topology_freeform" in adv["reason"]


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


def test_the_report_reads_the_runs_a_batch_manifest_lists_and_checks_them(tmp_path):
    """The workflow's topology_batch job declares a manifest of the run files it wrote:
    the report reads those, and refuses one that changed since (naming it and the fix)."""
    from tersetalk.core.io import write_manifest
    from tersetalk.topology.cli import run_files

    runs = []
    for (system, variant), g in study(n=2).groupby(["system", "variant"]):
        p = tmp_path / f"{system}-{variant}.parquet"
        g.to_parquet(p)
        runs.append(str(p))
    manifest = write_manifest(tmp_path / "batch.json", runs[1:], "tersetalk run")
    assert run_files([runs[0], manifest]) == runs
    direct = report(runs, tmp_path / "a", tmp_path / "fa", n_resamples=50)
    batched = report([runs[0], manifest], tmp_path / "b", tmp_path / "fb", n_resamples=50)
    assert json.dumps(direct, sort_keys=True) == json.dumps(batched, sort_keys=True)
    pd.read_parquet(runs[-1]).iloc[:1].to_parquet(runs[-1])  # replaced since the batch
    with pytest.raises(SystemExit, match=r"changed since tersetalk run wrote it.*rerun"):
        main(["topology", runs[0], str(manifest), "--tables", str(tmp_path / "c"),
              "--figures", str(tmp_path / "fc"), "--n-resamples", "10"])  # fmt: skip


def test_the_report_scores_the_answers_not_the_runs_own_column(tmp_path):
    """The run's ``correct`` was its live check; the report applies the task's scorer to
    each prediction and gold, as ``tersetalk score`` does for the other runs. Runs whose
    recorded column says every answer was wrong, with answers the scorers find right (and
    one task's answers made wrong): the tables follow the scorers."""
    runs = []
    for (system, variant), g in study(n=2).groupby(["system", "variant"]):
        wrong = g["task"] == "gsm8k"
        g = g.assign(correct=0.0, prediction=g["prediction"].where(~wrong, "7"))
        p = tmp_path / f"{system}-{variant}.parquet"
        g.to_parquet(p)
        runs.append(str(p))
    out = tmp_path / "t"
    report(runs, out, tmp_path / "f", n_resamples=20)
    table = pd.read_csv(out / "policies.csv")
    assert (table["accuracy"] == 0.75).all()  # three tasks of four right, as scored
    by_task = pd.read_csv(out / "policies_by_task.csv").groupby("task")["accuracy"].max()
    assert by_task["gsm8k"] == 0.0 and by_task.drop("gsm8k").eq(1.0).all()


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda g: g.drop(columns=["prediction"]), "has no column prediction"),
        (lambda g: g.iloc[:0], "hold no example"),
    ],
    ids=["no-prediction", "all-empty"],
)
def test_runs_the_report_cannot_score_are_a_clear_error(tmp_path, change, said):
    runs = []
    for (system, variant), g in study(n=1).groupby(["system", "variant"]):
        p = tmp_path / f"{system}-{variant}.parquet"
        change(g).to_parquet(p)
        runs.append(str(p))
    with pytest.raises(SystemExit, match=said):
        main(["topology", *runs, "--tables", str(tmp_path / "t"), "--figures",
              str(tmp_path / "f"), "--n-resamples", "10"])  # fmt: skip
