import json

import pandas as pd

from tersetalk.metrics.summary import aggregate, run_metrics
from tersetalk.records import build_record, records_frame

SPEC = {"task": "hotpotqa", "system": "freeform", "variant": "default", "seed": 1}


def _rec(i, pred, gold, error=None, counters=None):
    msgs = [{"sender": "M", "receiver": "W", "content": "x", "bytes": 1, "tokens_cl100k": 10,
             "tokens_o200k": 9, "tokens_model": 11}]  # fmt: skip
    ex = {"example_id": f"e{i}", "position": i, "question": "q", "gold": gold}
    return build_record(
        ex, SPEC, prediction=pred, raw_answer=pred, messages=[] if error else msgs,
        calls=[], verdict="accept", verdict_explicit=True, revisions=0,
        counters=counters or {}, backend="b", model="m", spec_hash="h", error=error,
        elapsed_s=0.1,
    )  # fmt: skip


def test_error_rows_count_zero_in_official_averages():
    df = records_frame([
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
    df = records_frame([
        _rec(0, "a", "a", counters={"overflow_total": 1, "lines_total": 4}),
        _rec(1, "a", "a", counters={"overflow_total": 0, "lines_total": 6}),
    ])  # fmt: skip
    m = run_metrics(df).iloc[0]
    assert m["overflow_rate"] == 0.1 and m["c_lines_total_mean"] == 5
    plain = run_metrics(records_frame([_rec(0, "a", "a")])).iloc[0]
    assert "overflow_rate" not in plain.index
    paths = []
    for i, frame in enumerate([run_metrics(df), run_metrics(records_frame([_rec(0, "a", "b")]))]):
        p = tmp_path / f"{i}.parquet"
        frame.to_parquet(p)
        paths.append(p)
    summary = aggregate(paths)
    assert len(summary) == 2 and pd.isna(summary["overflow_rate"]).sum() == 1
    assert json.loads(df["counters"].iloc[0]) == {"lines_total": 4, "overflow_total": 1}


def test_llmlingua_achieved_rate_distribution_in_the_summary():
    rates = [0.5, 0.58, 0.7, 0.41, 0.9]
    unreachable = [0, 0, 0, 0, 1]
    df = records_frame([
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
    plain = run_metrics(records_frame([_rec(0, "a", "a")])).iloc[0]
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
