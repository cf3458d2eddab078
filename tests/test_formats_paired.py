"""The paired comparison of two encoders on the comprehension questions."""

from __future__ import annotations

import pandas as pd
import pytest

from tersetalk.cli import main as cli_main
from tersetalk.core.io import write_parquet_atomic
from tersetalk.formats.paired import by_kind, discordant, mcnemar_exact, paired_accuracy


def _frame(pairs, kinds=None):
    """Rows of a comprehension run: pairs[i] = (mckp correct, json_compact correct)."""
    rows = []
    for i, (t, c) in enumerate(pairs):
        kind = kinds[i] if kinds else "count"
        for enc, ok in (("mckp", t), ("json_compact", c)):
            rows.append(
                {
                    "qid": f"p:{kind}:{i:03d}",
                    "kind": kind,
                    "encoder": enc,
                    "gold": str(i),
                    "prediction": str(i) if ok else "x",
                    "correct": ok,
                }
            )
    return pd.DataFrame(rows)


def test_counts_the_discordant_pairs_and_the_difference():
    pairs = [(1, 1)] * 5 + [(1, 0)] * 2 + [(0, 1)] * 6 + [(0, 0)] * 7
    r = paired_accuracy(_frame(pairs), n_resamples=2000)
    assert (r.n, r.correct_treatment, r.correct_control) == (20, 7, 11)
    assert (r.only_treatment, r.only_control) == (2, 6)
    assert r.diff == pytest.approx(-0.2)
    assert r.ci_low < r.diff < r.ci_high
    # exact McNemar: 2 of 8 discordant pairs, two-sided binomial p = 2 * P(X <= 2)
    assert r.mcnemar_p == pytest.approx(2 * (1 + 8 + 28) / 256)


def test_the_interval_is_paired_not_two_independent_samples():
    # identical answers: every paired difference is 0, so the interval is the point 0,
    # although each accuracy alone (0.5 over 40 questions) is far from certain
    r = paired_accuracy(_frame([(1, 1)] * 20 + [(0, 0)] * 20), n_resamples=500)
    assert (r.diff, r.ci_low, r.ci_high, r.mcnemar_p) == (0.0, 0.0, 0.0, 1.0)


def test_mcnemar_is_symmetric_and_small_for_one_sided_discord():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 9) == mcnemar_exact(9, 3)
    assert mcnemar_exact(0, 10) == pytest.approx(2 / 1024)


def test_discordant_lists_both_answers_and_by_kind_splits_them():
    df = _frame([(1, 0), (0, 1), (1, 1)], kinds=["count", "kth_field", "count"])
    d = discordant(df, "mckp", "json_compact")
    assert list(d["right"]) == ["json_compact", "mckp"]
    assert list(d["answer_mckp"]) == ["x", "0"]
    k = by_kind(df, "mckp", "json_compact").set_index("kind")
    assert k.loc["count", "only_treatment"] == 1 and k.loc["kth_field", "only_control"] == 1
    assert k.loc["count", "n"] == 2


def test_no_discordant_question_is_an_empty_list_not_an_error():
    df = _frame([(1, 1), (0, 0)])
    d = discordant(df, "mckp", "json_compact")
    assert d.empty and "answer_mckp" in d.columns


def test_refuses_an_encoder_the_run_does_not_have():
    with pytest.raises(ValueError, match="toon"):
        paired_accuracy(_frame([(1, 0)]), "toon", "json_compact")


def test_cli_prints_the_comparison(tmp_path, capsys):
    path = tmp_path / "comprehension.parquet"
    write_parquet_atomic(_frame([(1, 0)] * 3 + [(0, 0)] * 3), path)
    with pytest.raises(SystemExit) as exc:
        cli_main(["formats", "paired", str(path), "--n-resamples", "200"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "mckp: 0.500 (3/6)" in out and "json_compact: 0.000 (0/6)" in out
    assert "3 only mckp, 0 only json_compact" in out


def test_the_payload_interval_resamples_whole_payloads():
    """Four questions per payload that always agree are one observation, not four: the
    payload-clustered interval is wider than the per-question one; with one question per
    payload the two describe the same resampling."""
    pairs = [(1, 0)] * 12 + [(0, 1)] * 4 + [(1, 1)] * 8 + [(0, 0)] * 16
    df = _frame(pairs).assign(payload_id=lambda d: [f"p{int(q[-3:]) // 4}" for q in d["qid"]])
    r = paired_accuracy(df, n_resamples=4000)
    assert r.payloads == 10 and r.diff == pytest.approx(0.2)
    assert r.cluster_ci_low < r.diff < r.cluster_ci_high
    assert r.cluster_ci_high - r.cluster_ci_low > 1.5 * (r.ci_high - r.ci_low)
    one = paired_accuracy(_frame(pairs).assign(payload_id=lambda d: d["qid"]), n_resamples=4000)
    assert one.payloads == 40
    width, cluster_width = one.ci_high - one.ci_low, one.cluster_ci_high - one.cluster_ci_low
    assert cluster_width == pytest.approx(width, abs=0.05)
    assert paired_accuracy(_frame(pairs), n_resamples=500).payloads == 0  # no payload_id
