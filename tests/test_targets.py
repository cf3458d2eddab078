"""tersetalk.stats.targets on hand-made inputs: met, not met and inconclusive of each kind."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tersetalk.cli import main
from tersetalk.core.intervals import wilson
from tersetalk.stats import noninferiority_table
from tersetalk.stats.targets import (
    BENCH_HINT,
    COLUMNS,
    STATUSES,
    bench_rows,
    build_targets,
    compliance_rows,
    formats_rows,
    interval_status,
    mediator_rows,
    msp_rows,
    noninferiority_rows,
    scale_rows,
    token_reduction_rows,
    topology_rows,
    ttft_rows,
)

REF = "freeform/default"


def _metrics(task: str, label: str, n: int, **cols) -> pd.DataFrame:
    system, variant = label.split("/")
    df = pd.DataFrame({"example_id": [f"e{i:03d}" for i in range(n)], "task": task,
                       "system": system, "variant": variant, "error": None})  # fmt: skip
    for k, v in cols.items():
        df[k] = v
    return df


def _by_status(rows, key="task"):
    return {r[key]: r["status"] for r in rows}


# -- the building blocks ------------------------------------------------------------------


def test_wilson_and_interval_status():
    low, high = wilson(95 / 100, 100)
    assert low < 0.95 < high
    assert wilson(0.0, 0) == (0.0, 1.0)  # no trials: nothing known, the whole unit interval
    with pytest.raises(ValueError, match="proportion"):
        wilson(95, 100)  # a count, not a proportion
    assert interval_status(0.96, 0.99, 0.95) == "met"
    assert interval_status(0.80, 0.90, 0.95) == "not met"
    assert interval_status(0.90, 0.99, 0.95) == "inconclusive"
    assert interval_status(0.2, 0.4, 0.5, below=True) == "met"
    assert interval_status(0.6, 0.7, 0.5, below=True) == "not met"
    assert interval_status(float("nan"), 1.0, 0.5) == "inconclusive"


# -- TerseTalk ----------------------------------------------------------------------------


def test_compliance_met_not_met_inconclusive():
    def calls(task, n, first, after=0):
        return _metrics(task, "tersetalk/default", n, c_compliance_calls=1,
                        c_compliance_first_try=[1] * first + [0] * (n - first),
                        c_compliance_after_retries=[0] * first + [1] * after
                        + [0] * (n - first - after))  # fmt: skip

    m = {
        ("big", "tersetalk/default"): calls("big", 1000, 1000),  # Wilson low 0.996
        ("bad", "tersetalk/default"): calls("bad", 100, 50, after=40),
        ("tiny", "tersetalk/default"): calls("tiny", 2, 2),  # Wilson [0.34, 1]
        ("none", "tersetalk/default"): calls("none", 3, 0).assign(c_compliance_calls=0),
    }
    rows = compliance_rows(m, "tersetalk/default")
    at95 = _by_status([r for r in rows if r["id"] == "compliance_first_try_95"])
    assert at95 == {"big": "met", "bad": "not met", "tiny": "inconclusive",
                    "none": "inconclusive"}  # fmt: skip
    after = _by_status([r for r in rows if r["id"] == "compliance_after_retries_100"])
    assert after == {"big": "met", "bad": "not met", "tiny": "met"}
    bad = next(r for r in rows if r["task"] == "bad" and r["id"] == "compliance_first_try_95")
    assert bad["value"] == 0.5 and "50/100" in bad["measured"]


def test_token_reduction_met_not_met_inconclusive():
    rng = np.random.default_rng(0)
    ctrl = rng.integers(300, 400, 40).astype(float)
    m = {
        ("a", REF): _metrics("a", REF, 40, tokens_total_cl100k=ctrl),
        ("a", "tersetalk/default"): _metrics("a", "tersetalk/default", 40,
                                             tokens_total_cl100k=ctrl * 0.5),  # 50% fewer
        ("b", REF): _metrics("b", REF, 40, tokens_total_cl100k=ctrl),
        ("b", "tersetalk/default"): _metrics("b", "tersetalk/default", 40,
                                             tokens_total_cl100k=ctrl * 0.95),  # 5% fewer
        # 4 examples, around 25% fewer but very noisy
        ("c", REF): _metrics("c", REF, 4, tokens_total_cl100k=[100.0, 400.0, 100.0, 400.0]),
        ("c", "tersetalk/default"): _metrics("c", "tersetalk/default", 4,
                                             tokens_total_cl100k=[100.0, 200.0, 40.0, 400.0]),
    }  # fmt: skip
    pairs = [("token_reduction", "tersetalk/default", REF, 0.25, "25-35%")]
    rows = token_reduction_rows(m, pairs, n_resamples=500)
    assert _by_status(rows) == {"a": "met", "b": "not met", "c": "inconclusive"}
    a = next(r for r in rows if r["task"] == "a")
    assert a["value"] == pytest.approx(0.5) and a["ci_low"] <= 0.5 <= a["ci_high"]
    # error rows are left out; nothing left: inconclusive
    m[("a", "tersetalk/default")]["error"] = "boom"
    again = token_reduction_rows({k: v for k, v in m.items() if k[0] == "a"}, pairs)
    assert again[0]["status"] == "inconclusive" and "error" in again[0]["reason"]


def test_token_reduction_names_the_quality_verdict_beside_it():
    frames = _ni_frames("a", 300, np.tile([1.0, 0.0], 150), np.tile([1.0, 0.0], 150))
    frames += _ni_frames("b", 300, np.zeros(300), np.zeros(300))
    table, _ = noninferiority_table(frames, [("tersetalk/default", REF)], margin=0.02,
                                    alpha=0.05, n_resamples=200, seed=0)  # fmt: skip
    m = {(f["task"].iloc[0], f"{f['system'].iloc[0]}/{f['variant'].iloc[0]}"): f for f in frames}
    pairs = [("token_reduction", "tersetalk/default", REF, 0.25, "25-35%")]
    rows = token_reduction_rows(m, pairs, n_resamples=200, stats_table=table)
    assert _by_status(rows) == {"a": "met", "b": "met"}  # half the tokens on both
    beside = "accuracy non-inferiority beside it: "
    assert beside + "non-inferior (score interval" in rows[0]["reason"]
    assert beside + "inconclusive (floor rule" in rows[1]["reason"]
    alone = token_reduction_rows(m, pairs, n_resamples=200)
    assert beside + "no non-inferiority table" in alone[0]["reason"]


def _ni_frames(task, n, t_correct, c_correct):
    return [
        _metrics(task, "tersetalk/default", n, correct=t_correct, tokens_total_cl100k=50.0),
        _metrics(task, REF, n, correct=c_correct, tokens_total_cl100k=100.0),
    ]


def test_noninferiority_rows_follow_the_stats_verdict():
    good = np.tile([1.0, 0.0], 150)  # n = 300, identical arms at 0.5
    frames = (
        _ni_frames("same", 300, good, good)  # n >= 149, no difference: non-inferior
        + _ni_frames("worse", 300, np.zeros(300), np.ones(300))  # inferior
        + _ni_frames("zero", 300, np.zeros(300), np.zeros(300))  # at the floor: inconclusive
        + _ni_frames("small", 10, np.ones(10), np.ones(10))  # n < 149: inconclusive
    )
    table, _ = noninferiority_table(
        frames, [("tersetalk/default", REF), ("hybrid/default", REF)],
        margin=0.02, alpha=0.05, n_resamples=300, seed=0,
    )  # fmt: skip
    rows = noninferiority_rows(table)
    computed = _by_status([r for r in rows if "hybrid" not in r["run"]])
    assert computed == {"same": "met", "worse": "not met", "zero": "inconclusive",
                        "small": "inconclusive"}  # fmt: skip
    # the stats table says the same: never non_inferior when inconclusive
    done = table[table["not_computed"] == ""]
    assert dict(zip(done["task"], done["non_inferior"], strict=True)) == {
        "same": True, "worse": False, "zero": False, "small": False}  # fmt: skip
    missing = [r for r in rows if "hybrid" in r["run"]]
    assert missing and all(r["status"] == "inconclusive" for r in missing)
    assert all("not computed" in r["reason"] for r in missing)
    zero = next(r for r in rows if r["task"] == "zero" and "hybrid" not in r["run"])
    assert "floor rule" in zero["reason"]
    # a table from before the verdict column: inconclusive, never read as met
    old = noninferiority_rows(table.drop(columns=["verdict"]))
    assert {r["status"] for r in old} == {"inconclusive"}
    assert noninferiority_rows(None)[0]["status"] == "inconclusive"


def test_scale_and_ttft():
    summary = pd.DataFrame([
        {"task": "a", "system": "freeform", "variant": "default", "n": 500,
         "t_ttft_mean_s": 1.0, "cache_hits": 0},
        {"task": "a", "system": "tersetalk", "variant": "default", "n": 500,
         "t_ttft_mean_s": 0.7, "cache_hits": 0},
        {"task": "b", "system": "freeform", "variant": "default", "n": 10,
         "t_ttft_mean_s": 1.0, "cache_hits": 0},
        {"task": "b", "system": "tersetalk", "variant": "default", "n": 10,
         "t_ttft_mean_s": 0.95, "cache_hits": 0},
        {"task": "c", "system": "freeform", "variant": "default", "n": 10,
         "t_ttft_mean_s": 1.0, "cache_hits": 0},
        {"task": "c", "system": "tersetalk", "variant": "default", "n": 10,
         "t_ttft_mean_s": float("nan"), "cache_hits": 4},
    ])  # fmt: skip
    assert _by_status(scale_rows(summary, REF)) == {"a": "met", "b": "not met", "c": "not met"}
    # per-example timings: 30% lower on a (the interval clears 20%), 5% lower on b
    rng = np.random.default_rng(2)
    base = rng.uniform(0.8, 1.2, 60)
    metrics = {(task, label): _metrics(task, label, 60, t_ttft_mean_s=base * f)
               for task, fast in (("a", 0.7), ("b", 0.95))
               for label, f in ((REF, 1.0), ("tersetalk/default", fast))}  # fmt: skip
    ttft = ttft_rows(summary, "tersetalk/default", REF, metrics, n_resamples=300)
    assert _by_status(ttft) == {"a": "met", "b": "not met", "c": "inconclusive"}
    assert ttft[0]["ci_low"] >= 0.2 and ttft[1]["ci_high"] < 0.2
    assert "paired bootstrap" in ttft[0]["reason"] and "call cache" in ttft[2]["reason"]
    # the means alone (a 30% lower mean on a) never decide: no per-example timings
    bare = ttft_rows(summary, "tersetalk/default", REF)
    assert {r["status"] for r in bare} == {"inconclusive"}
    assert "per-example" in bare[0]["reason"]


def _bench(tmp_path, name, lo, hi, speedup, target):
    pd.DataFrame([
        {"method": "base", "baseline": "base", "is_baseline": True, "speedup_vs_baseline": 1.0,
         "speedup_lo": 1.0, "speedup_hi": 1.0, "seed_target": None},
        {"method": "fast", "baseline": "base", "is_baseline": False,
         "speedup_vs_baseline": speedup, "speedup_lo": lo, "speedup_hi": hi,
         "seed_target": target},
    ]).to_csv(tmp_path / f"{name}.csv", index=False)  # fmt: skip


def test_bench_absent_met_not_met_inconclusive(tmp_path):
    rows = bench_rows(tmp_path / "nothing")
    assert [r["status"] for r in rows] == ["inconclusive"] * 3
    assert all(r["reason"] == BENCH_HINT for r in rows)
    _bench(tmp_path, "mb1", 11.0, 13.0, 12.0, 10.0)  # IQR clears 10x
    _bench(tmp_path, "mb2", 4.0, 6.0, 5.2, 5.0)  # straddles 5x
    rows = {r["id"]: r for r in bench_rows(tmp_path)}
    assert rows["mb1"]["status"] == "met" and rows["mb2"]["status"] == "inconclusive"
    assert rows["mb_any_10x"]["status"] == "met" and rows["mb_any_10x"]["value"] == 12.0
    _bench(tmp_path, "mb1", 0.3, 0.4, 0.35, 10.0)
    rows = {r["id"]: r for r in bench_rows(tmp_path)}
    assert rows["mb1"]["status"] == "not met" and "0.35" in rows["mb1"]["reason"]
    assert rows["mb_any_10x"]["status"] == "not met"


def test_bench_needs_every_condition(tmp_path):
    # one method, two chunk sizes: 20x in one, 3x in the other -> not a 10x win everywhere
    pd.DataFrame([
        {"method": "base", "baseline": "base", "is_baseline": True, "speedup_vs_baseline": 1.0,
         "speedup_lo": 1.0, "speedup_hi": 1.0, "seed_target": None, "chunk_size": c}
        for c in (1, 64)
    ] + [
        {"method": "fast", "baseline": "base", "is_baseline": False, "speedup_vs_baseline": v,
         "speedup_lo": v * 0.9, "speedup_hi": v * 1.1, "seed_target": 10.0, "chunk_size": c}
        for c, v in ((1, 20.0), (64, 3.0))
    ]).to_csv(tmp_path / "mb1.csv", index=False)  # fmt: skip
    row = next(r for r in bench_rows(tmp_path) if r["id"] == "mb1")
    assert row["status"] == "inconclusive" and "2 condition(s)" in row["reason"]


def test_topology_not_built_or_built_before_the_outcome_columns_is_inconclusive(tmp_path):
    """Met / not met from the outcome columns: tests/test_topology_outcomes.py. Here: a
    study not built, and files written before the outcome oracle, never decide."""
    rows = topology_rows(tmp_path / "topology")
    assert len(rows) == 3 and {r["status"] for r in rows} == {"inconclusive"}
    assert all("not built yet" in r["reason"] for r in rows)

    old = tmp_path / "old"
    old.mkdir()
    pd.DataFrame(
        [
            {
                "policy_label": "TerseTalk-Adaptive",
                "system": "topology_tersetalk",
                "variant": "adaptive",
                "n": 600,
                "selection_accuracy": 0.95,
                "token_reduction": 0.25,
                "quality_preservation": 0.99,
                "best_fixed": "star",
            }
        ]
    ).to_csv(old / "six_policies.csv", index=False)
    (old / "summary.json").write_text(json.dumps({"protocol_advantage": 2.1}))
    rows = {r["id"]: r for r in topology_rows(old)}
    for tid in ("topology_agreement", "topology_tokens", "topology_protocol_advantage"):
        assert rows[tid]["status"] == "inconclusive" and "rerun" in rows[tid]["reason"], tid


# -- MSP, mediator, formats -----------------------------------------------------------------


def test_msp_ratio_and_adequacy():
    m = {
        ("a", "msp/default"): _metrics("a", "msp/default", 3, c_msp_compression_ratio=0.3,
                                       c_msp_similarity=0.9, c_msp_judge_passed=True),
        ("b", "msp/default"): _metrics("b", "msp/default", 3, c_msp_compression_ratio=0.7,
                                       c_msp_similarity=0.9,
                                       c_msp_judge_passed=[True, False, True]),
    }  # fmt: skip
    # a mean ratio below 0.5 whose interval reaches over it: inconclusive
    m[("c", "msp/default")] = _metrics("c", "msp/default", 4,
                                       c_msp_compression_ratio=[0.1, 0.9, 0.2, 0.7],
                                       c_msp_similarity=0.9, c_msp_judge_passed=True)  # fmt: skip
    rows = msp_rows(m, "msp/default", n_resamples=300)
    ratio = [r for r in rows if r["id"] == "msp_ratio"]
    assert _by_status(ratio) == {"a": "met", "b": "not met", "c": "inconclusive"}
    assert ratio[2]["value"] < 0.5 < ratio[2]["ci_high"] and "bootstrap" in ratio[2]["reason"]
    adequacy = [r for r in rows if r["id"] == "msp_adequacy"]
    assert _by_status(adequacy) == {"a": "met", "b": "not met", "c": "met"}
    assert "1 of 3" in adequacy[1]["reason"]


def test_mediator_budget_and_termination():
    m = {
        ("a", "mediator/default"): _metrics("a", "mediator/default", 2,
                                            c_mediator_final_tokens=[60, 64], c_mediator_passes=1),
        ("b", "mediator/default"): _metrics("b", "mediator/default", 2,
                                            c_mediator_final_tokens=[60, 90],
                                            c_mediator_passes=[2, 3]),
    }  # fmt: skip
    rows = mediator_rows(m, "mediator/default", 64, 2)
    assert _by_status([r for r in rows if r["id"] == "mediator_budget"]) == {
        "a": "met", "b": "not met"}  # fmt: skip
    assert _by_status([r for r in rows if r["id"] == "mediator_termination"]) == {
        "a": "met", "b": "not met"}  # fmt: skip
    none = mediator_rows(m, "mediator/default", None, None)
    assert {r["status"] for r in none} == {"inconclusive"}


def _formats_dir(tmp_path, hint_tokens, mckp_pct, n_questions):
    d = tmp_path / "formats"
    d.mkdir(parents=True)
    pd.DataFrame({"hit": [True] * len(hint_tokens) + [False], "tokenizer": "o200k_base",
                  "tokens_sent": [*hint_tokens, 500]}).to_parquet(d / "dedup.parquet")  # fmt: skip
    pd.DataFrame([
        {"shape": "all", "encoder": "mckp", "tokenizer": "o200k_base", "n": 10,
         "savings_vs_json_compact_pct": mckp_pct},
        {"shape": "all", "encoder": "toon", "tokenizer": "o200k_base", "n": 10,
         "savings_vs_json_compact_pct": 50.0},
    ]).to_csv(d / "savings_by_shape.csv", index=False)  # fmt: skip
    rows = [{"qid": f"q{i}", "encoder": enc, "correct": 1.0}
            for i in range(n_questions) for enc in ("mckp", "json_compact")]  # fmt: skip
    pd.DataFrame(rows).to_parquet(d / "comprehension.parquet")
    return d


def test_formats_met_not_met_inconclusive(tmp_path):
    summary = pd.DataFrame([
        {"task": "toolqa", "system": "formats", "variant": "mckp", "c_format_lossless_mean": 1.0},
        {"task": "toolqa", "system": "formats", "variant": "lossy", "c_format_lossless_mean": 0.9},
        {"task": "toolqa", "system": "formats", "variant": "mckp_budget_200",
         "c_format_lossless_mean": 0.5},
    ])  # fmt: skip
    good = {r["id"]: r for r in formats_rows(
        _formats_dir(tmp_path / "g", [10, 14, 15], 35.0, 200), summary,
        budgeted=["mckp_budget_200"], n_resamples=300)}  # fmt: skip
    assert good["hint_tokens"]["status"] == "met"
    assert good["mckp_savings"]["status"] == "met" and good["mckp_savings"]["value"] == 0.35
    assert good["mckp_accuracy"]["status"] == "met"  # 200 questions, both always right
    bad = formats_rows(_formats_dir(tmp_path / "b", [14, 18], 10.0, 7), summary,
                       budgeted=["mckp_budget_200"], n_resamples=300)  # fmt: skip
    by_id = {}
    for r in bad:
        by_id.setdefault(r["id"], []).append(r)
    assert by_id["hint_tokens"][0]["status"] == "not met"
    assert by_id["mckp_savings"][0]["status"] == "not met"
    assert by_id["mckp_accuracy"][0]["status"] == "inconclusive"  # 7 questions
    # the budgeted variant is left out of the lossless target
    lossless = {r["run"]: r["status"] for r in by_id["lossless"]}
    assert lossless == {"formats/mckp": "met", "formats/lossy": "not met"}
    absent = formats_rows(tmp_path / "none", None)
    assert {r["status"] for r in absent} == {"inconclusive"}
    assert all("snakemake --cores all formats" in r["reason"] for r in absent)


# -- the whole table and the CLI --------------------------------------------------------------


def test_build_targets_and_cli(tmp_path):
    frames = _ni_frames("gsm8k", 12, np.zeros(12), np.zeros(12))
    for f in frames:
        f["c_compliance_calls"], f["c_compliance_first_try"] = 1, 1
    summary = pd.DataFrame([{"task": "gsm8k", "system": s, "variant": "default", "n": 12,
                             "t_ttft_mean_s": 1.0, "cache_hits": 2}
                            for s in ("freeform", "tersetalk")])  # fmt: skip
    table, _ = noninferiority_table(frames, [("tersetalk/default", REF)], margin=0.02,
                                    alpha=0.05, n_resamples=200, seed=0)  # fmt: skip
    config = {"evaluation": {"reference": REF, "margin": 0.02, "n_resamples": 200, "seed": 0}}
    dirs = dict(bench_dir=tmp_path / "b", formats_dir=tmp_path / "f", topology_dir=tmp_path / "t")
    df = build_targets(summary=summary, metrics=frames, stats_table=table, config=config, **dirs)
    assert list(df.columns) == list(COLUMNS) and set(df["status"]) <= set(STATUSES)
    # no hybrid, MSP or mediator run here: their targets are rows that say so
    absent = df[df["run"].isin(["hybrid/default", "msp/default", "mediator/default",
                                "formats/mckp"])]  # fmt: skip
    assert set(absent["id"]) == {"token_reduction", "gate_saving", "msp_ratio", "msp_adequacy",
                                 "mediator_budget", "lossless"}  # fmt: skip
    assert (absent["status"] == "inconclusive").all()
    assert absent["reason"].str.contains("not among this workflow's runs").all()
    ni = df[df["id"] == "noninferiority"].iloc[0]
    assert ni["status"] == "inconclusive" and "floor rule" in ni["reason"]
    assert (df[df["status"] == "inconclusive"]["reason"] != "").all()
    again = build_targets(summary=summary, metrics=frames, stats_table=table, config=config,
                          **dirs)  # fmt: skip
    pd.testing.assert_frame_equal(df, again)

    paths = []
    for i, f in enumerate(frames):
        paths.append(tmp_path / f"m{i}.parquet")
        f.to_parquet(paths[-1])
    summary.to_parquet(tmp_path / "summary.parquet")
    table.to_parquet(tmp_path / "ni.parquet")
    out = tmp_path / "tables" / "targets.csv"
    code = main(["targets", *map(str, paths), "--summary", str(tmp_path / "summary.parquet"),
                 "--stats", str(tmp_path / "ni.parquet"), "--config-json", json.dumps(config),
                 "--bench-dir", str(dirs["bench_dir"]), "--formats-dir", str(dirs["formats_dir"]),
                 "--topology-dir", str(dirs["topology_dir"]), "--csv", str(out),
                 "--tex", str(out.with_suffix(".tex"))])  # fmt: skip
    assert code == 0
    written = pd.read_csv(out)
    assert list(written["id"]) == list(df["id"]) and list(written["status"]) == list(df["status"])
    tex = out.with_suffix(".tex").read_text()
    assert "tab:targets" in tex and "inconclusive" in tex
