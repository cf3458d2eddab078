import json

import pandas as pd

from tersetalk.agents.topology import STAR
from tersetalk.core.records import records_frame
from tersetalk.metrics.summary import aggregate, run_metrics
from tersetalk.pipeline.records import build_record
from tersetalk.systems import pooled_rates

DIRECTIONS = STAR.layout.directions
STAR_OUTCOME = {"verdict": "accept", "verdict_explicit": True, "revisions": 0}


def star_frame(records):
    return records_frame(records, STAR.layout)


SPEC = {"task": "hotpotqa", "system": "freeform", "variant": "default", "seed": 1}


def _rec(i, pred, gold, error=None, counters=None, calls=(), system="freeform"):
    msgs = [{"sender": "M", "receiver": "W", "content": "x", "bytes": 1, "tokens_cl100k": 10,
             "tokens_o200k": 9, "tokens_model": 11}]  # fmt: skip
    ex = {"example_id": f"e{i}", "position": i, "question": "q", "gold": gold}
    return build_record(
        ex, {**SPEC, "system": system}, layout=STAR.layout, prediction=pred, raw_answer=pred,
        messages=[] if error else msgs, calls=list(calls),
        outcome=None if error else STAR_OUTCOME,
        counters=counters or {}, backend="b", model="m", spec_hash="h", error=error,
        elapsed_s=0.1, facts_checked=None if error else [],
    )  # fmt: skip


def test_error_rows_count_zero_in_official_averages():
    df = star_frame([
        _rec(0, "Paris", "Paris"),
        _rec(1, "the Paris city", "Paris"),  # F1 = 2*(1/2*1)/(1/2+1) = 2/3
        _rec(2, "", "London", error="ModelCallError: timeout"),
    ])  # fmt: skip
    m = run_metrics(df).iloc[0]
    assert m["n"] == 3 and m["n_errors"] == 1
    assert m["em"] == 1 / 3
    assert abs(m["f1"] - (1 + 2 / 3) / 3) < 1e-12
    assert m["tokens_total_cl100k_mean"] == 10  # tokens are averaged over answered examples


def test_protocol_rates_are_pooled_and_absent_counters_are_nan(tmp_path):
    df = star_frame([
        # rates are the ones the system declares: tersetalk pools overflow over lines
        _rec(0, "a", "a", counters={"overflow_total": 1, "lines_total": 4}, system="tersetalk"),
        _rec(1, "a", "a", counters={"overflow_total": 0, "lines_total": 6}, system="tersetalk"),
    ])  # fmt: skip
    # the rates come in as data: `tersetalk score` looks them up in the system registry
    rates = pooled_rates("tersetalk")
    m = run_metrics(df, rates=rates).iloc[0]
    assert m["overflow_rate"] == 0.1 and m["c_lines_total_mean"] == 5
    assert "overflow_rate" not in run_metrics(df).columns  # none given, none pooled
    plain = run_metrics(star_frame([_rec(0, "a", "a")]), rates=pooled_rates("freeform")).iloc[0]
    assert "overflow_rate" not in plain.index
    paths = []
    frames = [run_metrics(df, rates=rates), run_metrics(star_frame([_rec(0, "a", "b")]))]
    for i, frame in enumerate(frames):
        p = tmp_path / f"{i}.parquet"
        frame.to_parquet(p)
        paths.append(p)
    summary = aggregate(paths)
    assert len(summary) == 2 and pd.isna(summary["overflow_rate"]).sum() == 1
    assert json.loads(df["counters"].iloc[0]) == {"lines_total": 4, "overflow_total": 1}


def test_llmlingua_achieved_rate_distribution_in_the_summary():
    rates = [0.5, 0.58, 0.7, 0.41, 0.9]
    unreachable = [0, 0, 0, 0, 1]
    df = star_frame([
        _rec(i, "a", "a", counters={"lingua_target_rate": 0.5, "lingua_scope_rate": r,
                                    "lingua_target_unreachable": u})
        for i, (r, u) in enumerate(zip(rates, unreachable, strict=True))
    ] + [_rec(5, "", "a", error="ModelCallError: timeout")])  # fmt: skip
    m = run_metrics(df).iloc[0]
    assert m["lingua_n_messages"] == 5  # the error row has no message
    assert m["lingua_target_rate"] == 0.5
    assert m["lingua_achieved_rate_p50"] == 0.58
    assert abs(m["lingua_achieved_rate_mean"] - sum(rates) / 5) < 1e-12
    assert m["lingua_n_reachable"] == 4 and m["lingua_within_20pct_share"] == 0.75
    assert m["lingua_unreachable_n"] == 1 and m["lingua_unreachable_share"] == 0.2
    plain = run_metrics(star_frame([_rec(0, "a", "a")])).iloc[0]
    assert not any(c.startswith("lingua_") for c in plain.index)


def test_lingua_distribution_when_no_target_was_reachable():
    from tersetalk.metrics.summary import lingua_rate_distribution

    ok = pd.DataFrame({"c_lingua_target_rate": [0.33, 0.33], "c_lingua_scope_rate": [0.9, 1.0],
                       "c_lingua_target_unreachable": [1, 1]})  # fmt: skip
    d = lingua_rate_distribution(ok)
    assert d["lingua_unreachable_n"] == 2 and d["lingua_unreachable_share"] == 1.0
    assert d["lingua_n_reachable"] == 0 and pd.isna(d["lingua_within_20pct_share"])
    assert abs(d["lingua_achieved_rate_p10"] - 0.91) < 1e-12
    assert abs(d["lingua_achieved_rate_p90"] - 0.99) < 1e-12


def _call(prompt, completion, total_s, source="server"):
    return {"role": "worker", "prompt_tokens": prompt, "completion_tokens": completion,
            "ttft_s": 0.1, "itl_s": 0.01, "total_s": total_s, "attempts": 1,
            "cache_hit": False, "usage_source": source}  # fmt: skip


def test_unknown_usage_is_counted_not_silently_skipped():
    df = star_frame([
        _rec(0, "a", "a", calls=[_call(100, 20, 1.0), _call(50, 10, 1.0)]),
        _rec(1, "a", "a", calls=[_call(200, 40, 2.0)]),
        # usage unknown (-1 from the backend): its 8 s of model time must not dilute tokens/s
        _rec(2, "a", "a", calls=[_call(-1, -1, 8.0, "unavailable"), _call(10, 5, 1.0)]),
        _rec(3, "", "a", error="ModelCallError: timeout", calls=[_call(300, 60, 3.0)]),
    ])  # fmt: skip
    assert df["usage_prompt_tokens"].isna().tolist() == [False, False, True, False]
    m = run_metrics(df).iloc[0]
    assert m["n_usage_unknown"] == 1 and m["usage_unknown_calls"] == 1
    assert m["usage_mean_n"] == 2  # answered examples with known usage
    assert m["usage_prompt_tokens_mean"] == (150 + 200) / 2
    assert m["usage_completion_tokens_mean"] == (30 + 40) / 2
    # rows with known usage (error rows included, as before): (30+40+60) / (2+2+3)
    assert m["tokens_per_s"] == 130 / 7
    assert m["usage_source"] == "server; unavailable"
    known = run_metrics(star_frame([_rec(0, "a", "a", calls=[_call(10, 5, 0.5)])])).iloc[0]
    assert known["n_usage_unknown"] == 0 and known["tokens_per_s"] == 10.0
    none = star_frame([_rec(0, "a", "a", calls=[_call(-1, -1, 1.0, "unavailable")])])
    m = run_metrics(none).iloc[0]
    assert m["n_usage_unknown"] == 1 and m["usage_mean_n"] == 0
    assert pd.isna(m["usage_prompt_tokens_mean"]) and pd.isna(m["usage_completion_tokens_mean"])
    assert pd.isna(m["tokens_per_s"])  # not a made-up 0


# ---- per-example tokens per direction under every tokenizer ---------------------------


def _msg(sender, receiver, cl100k, o200k, model):
    return {"sender": sender, "receiver": receiver, "content": "Tom has 3 apples.", "bytes": 17,
            "tokens_cl100k": cl100k, "tokens_o200k": o200k, "tokens_model": model}  # fmt: skip


def _direction_run():
    # every direction once, M->W twice; distinct counts per tokenizer so no column aliases
    msgs = [_msg(*d.split("_"), 10 + i, 20 + i, 30 + i) for i, d in enumerate(DIRECTIONS)]
    msgs.append(_msg("M", "W", 1, 2, 3))
    spec = {**SPEC, "task": "gsm8k"}
    ex = {"example_id": "e0", "position": 0, "question": "Tom has 3 apples. How many?",
          "gold": "3"}  # fmt: skip
    rec = build_record(
        ex, spec, layout=STAR.layout, prediction="3", raw_answer="3", messages=msgs, calls=[],
        outcome=STAR_OUTCOME, counters={}, backend="b", model="m",
        spec_hash="h", error=None, elapsed_s=0.1, facts_checked=["Tom has 3 apples."],
    )  # fmt: skip
    return star_frame([rec])


def test_per_record_tokens_per_direction_under_every_tokenizer():
    from tersetalk.core.records import TOKENIZERS
    from tersetalk.metrics.per_record import per_record_metrics

    run = _direction_run()
    pr = per_record_metrics(run, None).iloc[0]
    expected = {"M_W": (11, 22, 33), "W_C": (11, 21, 31), "M_C": (12, 22, 32),
                "C_W": (13, 23, 33), "W_M": (14, 24, 34)}  # fmt: skip
    for d in DIRECTIONS:
        for t, value in zip(TOKENIZERS, expected[d], strict=True):
            assert pr[f"tokens_{d}_{t}"] == value, (d, t)
        # the record's own per-direction column is cl100k: the two must agree
        assert pr[f"tokens_{d}_cl100k"] == run[f"tokens_{d}_cl100k"].iloc[0]
    for t in TOKENIZERS:  # directions partition the messages, so they sum to the total
        assert sum(pr[f"tokens_{d}_{t}"] for d in DIRECTIONS) == pr[f"tokens_total_{t}"]
    # per role, for comparison: the Manager sends M->W and M->C
    assert pr["tokens_sent_manager_o200k"] == 22 + 22


def test_summary_means_tokens_per_direction_under_every_tokenizer():
    from tersetalk.core.records import TOKENIZERS
    from tersetalk.metrics.per_record import per_record_metrics

    run = _direction_run()
    pr = per_record_metrics(run, None)
    m = run_metrics(run, pr).iloc[0]
    for d in DIRECTIONS:
        for t in TOKENIZERS:
            assert m[f"tokens_{d}_{t}_mean"] == pr[f"tokens_{d}_{t}"].iloc[0]
        assert f"tokens_{d}_mean" not in m  # one name per direction and tokenizer
    assert m["tokens_M_W_model_mean"] == 33 and m["tokens_W_M_o200k_mean"] == 24


def test_score_command_pools_the_rates_the_runs_system_declares(tmp_path):
    """`tersetalk score` reads the registry (the CLI is the top floor) and passes the rates
    down, so metrics/summary never imports the systems."""
    from tersetalk.cli import main

    run = star_frame([
        _rec(0, "a", "a", counters={"overflow_total": 1, "lines_total": 4}, system="tersetalk"),
        _rec(1, "a", "a", counters={"overflow_total": 0, "lines_total": 6}, system="tersetalk"),
    ])  # fmt: skip
    run.to_parquet(tmp_path / "run.parquet")
    assert main(["score", "--run", str(tmp_path / "run.parquet"),
                 "--out", str(tmp_path / "score.parquet")]) == 0  # fmt: skip
    m = pd.read_parquet(tmp_path / "score.parquet").iloc[0]
    assert m["overflow_rate"] == 0.1


def test_per_record_carries_the_runs_counters_in_order_without_fragmenting():
    # a run with many c_ counters (the hybrid's has about 100): each is copied as it is,
    # in the run's order, and pandas has no reason to warn about a fragmented frame
    import warnings

    from tersetalk.metrics.per_record import per_record_metrics

    run = _direction_run()
    names = [f"c_counter_{i:03d}" for i in range(120)]
    run = pd.concat(
        [run, pd.DataFrame({c: [i] for i, c in enumerate(names)}, index=run.index)], axis=1
    )
    run["c_flag"] = True
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        pr = per_record_metrics(run, None)
    carried = [c for c in pr.columns if c.startswith("c_")]
    assert carried == [c for c in run.columns if c.startswith("c_")]
    assert pr["c_counter_007"].iloc[0] == 7 and pr["c_counter_007"].dtype == "int64"
    assert pr["c_flag"].dtype == bool and pr["c_flag"].iloc[0]


def test_correctness_is_computed_once_in_the_score_step_and_read_by_every_output(tmp_path):
    """A scorer that changed after the run (here: the run's own score columns say the
    opposite of the official scorer): rerunning only `tersetalk score` gives per-example
    metrics, the run's aggregate and the statistics' input that agree with each other
    and with the scorer, none with the run's stale columns."""
    from tersetalk.cli import main
    from tersetalk.metrics.summary import example_scores

    run = star_frame([
        _rec(0, "Paris", "Paris"),
        _rec(1, "the Paris city", "Paris"),  # EM 0, F1 2/3
        _rec(2, "Rome", "Paris"),
        _rec(3, "", "London", error="ModelCallError: timeout"),
    ])  # fmt: skip
    official = example_scores(run)
    assert [s["em"] for s in official] == [1.0, 0.0, 0.0, 0.0]
    for col in ("em", "f1", "precision", "recall", "correct"):
        run[col] = 1.0 - run[col]  # what an older scorer had written
    run.to_parquet(tmp_path / "run.parquet")
    assert main(["score", "--run", str(tmp_path / "run.parquet"),
                 "--out-records", str(tmp_path / "records.parquet"),
                 "--out", str(tmp_path / "score.parquet")]) == 0  # fmt: skip
    records = pd.read_parquet(tmp_path / "records.parquet")
    summary = pd.read_parquet(tmp_path / "score.parquet").iloc[0]
    assert records["em"].tolist() == [1.0, 0.0, 0.0, 0.0]  # the scorer's, not the run's
    assert records["correct"].tolist() == [s["correct"] for s in official]
    assert abs(records["f1"].iloc[1] - 2 / 3) < 1e-12
    assert summary["accuracy"] == summary["em"] == records["correct"].mean() == 0.25
    assert summary["f1"] == sum(records["f1"]) / 4
    assert (run["em"].tolist()) == [0.0, 1.0, 1.0, 1.0]  # the run file itself is left alone
