"""The simulation study of the statistics (tersetalk.stats.simulation, ``tersetalk stats-sim``)."""

from __future__ import annotations

import copy
import math
import re

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats as sps

from tersetalk.cli import main
from tersetalk.core.intervals import wilson
from tersetalk.pipeline.config import ConfigError, validate_config
from tersetalk.stats.simulation import (
    binary_cells,
    grid_points,
    run_simulation,
    settings_from_config,
    summarise,
    summary_markdown,
)

#: a grid small enough for a unit test, with every study in it
TINY = {
    "stats_sim": {
        "replicates": 8,
        "n_resamples": 50,
        "binary": {"base_rates": [0.01, 0.5], "n": [20, 200], "discordance": [0.4]},
        "continuous": {"means": [0.5], "n": [30], "correlations": [0.9]},
        "router": {"n_tasks": [3], "examples_per_task": [10], "agreement": [0.7],
                   "task_sd": [0.1]},
    },
    "evaluation": {"margin": 0.02, "alpha": 0.05},
}  # fmt: skip


def _settings(**section) -> object:
    config = copy.deepcopy(TINY)
    for key, value in section.items():
        if isinstance(value, dict):
            config["stats_sim"][key] = {**config["stats_sim"][key], **value}
        else:
            config["stats_sim"][key] = value
    return settings_from_config(config)


def _only(**section):
    """Settings running only the studies named in ``section`` (the others dropped)."""
    from dataclasses import replace

    s = _settings(**{k: v for k, v in section.items() if k != "studies"})
    return replace(s, studies=tuple(section.get("studies", ("binary", "continuous", "router"))))


# ---- the truth ---------------------------------------------------------------------------


@pytest.mark.parametrize("p_c", [0.05, 0.3, 0.5, 0.9])
@pytest.mark.parametrize("d", [-0.02, 0.0, 0.04])
@pytest.mark.parametrize("level", [0.0, 0.1, 0.4, 1.0])
def test_the_table_has_the_asked_accuracies_difference_and_discordance(p_c, d, level):
    probs, q = binary_cells(p_c, d, level)
    a, b, c, _ = probs
    assert np.all(probs >= 0) and math.isclose(probs.sum(), 1.0)
    assert math.isclose(a + c, p_c, abs_tol=1e-12)  # the control's accuracy
    assert math.isclose((a + b) - (a + c), d, abs_tol=1e-12)  # the true difference
    assert math.isclose(b + c, q, abs_tol=1e-12)
    p_t = p_c + d
    if level == 1.0:  # independent arms: every cell is a product of the margins
        assert np.allclose(probs, [p_t * p_c, p_t * (1 - p_c), (1 - p_t) * p_c,
                                   (1 - p_t) * (1 - p_c)])  # fmt: skip
    if level == 0.0:
        assert math.isclose(q, abs(d), abs_tol=1e-12)


def test_a_truth_that_cannot_exist_is_reported_not_simulated():
    assert binary_cells(0.01, -0.02, 0.5) is None
    table = run_simulation(_only(studies=("binary",)))
    at = table[(table["base_rate"] == 0.01) & (table["scenario"] == "at_margin")]
    assert len(at) and (at["trials"] == 0).all() and at["estimate"].isna().all()
    assert at["note"].str.startswith("infeasible").all()
    assert at["meets"].isna().all()  # no estimate: neither passes nor fails
    feasible = table[table["scenario"] == "no_difference"]
    assert (feasible["trials"] > 0).all() and (feasible["note"] == "").all()


# ---- determinism -------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_table_and_another_seed_another():
    s = _settings()
    first, again = run_simulation(s), run_simulation(s)
    pd.testing.assert_frame_equal(first, again)
    other = run_simulation(_settings(seed=1))
    assert not first["estimate"].equals(other["estimate"])


def test_worker_processes_do_not_change_the_table():
    s = _only(studies=("binary", "router"), binary={"base_rates": [0.5]})
    pd.testing.assert_frame_equal(run_simulation(s), run_simulation(s, workers=2))


def test_adding_a_grid_value_leaves_the_other_points_as_they_were():
    small = run_simulation(_only(studies=("binary",), binary={"n": [20]}))
    large = run_simulation(_only(studies=("binary",), binary={"n": [20, 50]}))
    pd.testing.assert_frame_equal(
        small.reset_index(drop=True), large[large["n"] == 20].reset_index(drop=True)
    )


# ---- known answers -----------------------------------------------------------------------


def _exact_wilson_coverage(p: float, n: int) -> float:
    """P(Wilson covers p) summed over the binomial distribution of k."""
    k = np.arange(n + 1)
    covers = np.array([lo <= p <= hi for lo, hi in (wilson(i / n, n) for i in k)])
    return float(sps.binom.pmf(k, n, p)[covers].sum())


def test_wilson_coverage_at_one_half_and_100_examples_is_the_exact_one():
    s = _only(studies=("binary",), replicates=400,
              binary={"base_rates": [0.5], "n": [100], "discordance": [1.0]})  # fmt: skip
    table = run_simulation(s)
    rows = table[table["quantity"] == "coverage_wilson_control"]
    exact = _exact_wilson_coverage(0.5, 100)
    assert abs(exact - 0.95) < 0.015  # the interval itself is near nominal there
    for _, r in rows.iterrows():
        assert r["trials"] == 400
        assert abs(r["estimate"] - exact) <= 3 * math.sqrt(exact * (1 - exact) / 400), r
        assert math.isclose(r["mcse"], math.sqrt(r["estimate"] * (1 - r["estimate"]) / 400))


def test_twenty_examples_never_show_non_inferiority_at_a_margin_of_two_points():
    # no interval from 20 paired examples is narrow enough to put its lower end above
    # -0.02 (one discordant pair alone moves the difference by 0.05): always inconclusive
    table = run_simulation(_only(studies=("binary",), binary={"base_rates": [0.5], "n": [20]}))
    shares = table.set_index(["scenario", "quantity"])["estimate"]
    assert shares[("at_margin", "type1_error")] == 0.0
    assert shares[("no_difference", "power")] == 0.0
    assert shares[("at_margin", "inconclusive")] == 1.0


def test_pooling_examples_of_different_tasks_under_covers_and_the_cluster_bootstrap_less():
    s = _only(studies=("router",), replicates=60, n_resamples=200,
              router={"n_tasks": [12], "examples_per_task": [100], "task_sd": [0.15]})  # fmt: skip
    cov = run_simulation(s).set_index("quantity")["estimate"]
    assert cov["coverage_wilson_pooled"] < 0.75  # examples are not independent draws
    assert cov["coverage_cluster_bootstrap"] > cov["coverage_wilson_pooled"] + 0.2
    assert cov["coverage_wilson_task"] > 0.9  # each task's own interval is fine


# ---- the table, the summary ----------------------------------------------------------------


def test_rows_per_point_and_the_acceptance_columns():
    s = _settings()
    table = run_simulation(s)
    pts = grid_points(s)
    assert len(pts) == 2 * 2 * 1 * 2 + 1 * 1 * 1 * 2 + 1
    assert set(table["study"]) == {"binary", "continuous", "router"}
    t1 = table[table["quantity"] == "type1_error"]
    assert (t1["scenario"] == "at_margin").all()
    feasible = t1[t1["trials"] > 0]
    assert np.allclose(feasible["threshold"], 0.05 + 2 * math.sqrt(0.05 * 0.95 / 8))
    assert (feasible["meets"] == (feasible["estimate"] <= feasible["threshold"])).all()
    cov = table[table["quantity"].str.startswith("coverage") & (table["trials"] > 0)]
    assert (cov["threshold"] == 0.94).all()
    assert (cov["meets"] == (cov["estimate"] >= 0.94)).all()
    summary = summarise(table)
    worst = summary.set_index(["study", "quantity"])
    binary_cov = cov[(cov["study"] == "binary") & (cov["quantity"] == "coverage_tango")]
    assert worst.loc[("binary", "coverage_tango"), "worst_estimate"] == binary_cov["estimate"].min()
    text = summary_markdown(summary, s)
    assert "| binary | type1_error |" in text and "8 replicates" in text


# ---- config and CLI ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"binary": {"n": [1]}}, "stats_sim.binary.n[0]"),
        ({"binary": {"discordance": [1.5]}}, "stats_sim.binary.discordance[0]"),
        ({"binary": {"base_rates": [0.5, 0.5]}}, "stats_sim.binary.base_rates"),
        ({"replicates": 0}, "stats_sim.replicates"),
        ({"continuous": {"correlations": [1.0]}}, "stats_sim.continuous.correlations[0]"),
        ({"router": {"agreement": [0.1]}}, "stats_sim.router.agreement"),
        ({"router": {"task_sd": [0.45]}}, "stats_sim.router.task_sd"),
        ({"bogus": 1}, "stats_sim.bogus"),
    ],
)
def test_a_bad_value_names_its_key(section, key):
    config = copy.deepcopy(TINY)
    for k, v in section.items():
        config["stats_sim"][k] = {**config["stats_sim"][k], **v} if isinstance(v, dict) else v
    with pytest.raises(ConfigError, match=re.escape(f"'{key}")):
        settings_from_config(config)


def test_the_workflow_schema_checks_the_section(repo, monkeypatch):
    monkeypatch.chdir(repo)  # the config names data/ relative to the repository
    with open("config/config.yaml") as f:
        config = yaml.safe_load(f)
    validate_config(copy.deepcopy(config))  # the shipped section is valid
    assert settings_from_config(config).replicates >= 1
    config["stats_sim"]["binary"]["n"] = [0]
    with pytest.raises(ConfigError, match="stats_sim.binary.n"):
        validate_config(config)


def test_cli_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["stats-sim", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "type I error" in out and "--replicates" in out and "--figure" in out


def test_cli_bad_config_is_one_line_and_exit_code_2(capsys):
    code = main(["stats-sim", "--config-json", '{"stats_sim": {"replicates": -3}}'])
    assert code == 2
    err = capsys.readouterr().err
    assert "stats_sim.replicates" in err and "Traceback" not in err


def test_cli_writes_the_table_summary_and_figures(tmp_path, capsys):
    import json

    config = copy.deepcopy(TINY)
    config["stats_sim"]["binary"]["n"] = [200]
    out = tmp_path / "stats" / "sim"
    code = main([
        "stats-sim", "--config-json", json.dumps(config), "--out", str(out / "table.parquet"),
        "--csv", str(out / "table.csv"), "--summary", str(out / "summary.csv"),
        "--markdown", str(out / "summary.md"), "--figure", str(tmp_path / "fig" / "stats_sim"),
        "--no-progress",
    ])  # fmt: skip
    assert code in (0, None)
    table = pd.read_parquet(out / "table.parquet")
    pd.testing.assert_frame_equal(table, run_simulation(settings_from_config(config)))
    assert len(pd.read_csv(out / "table.csv")) == len(table)
    summary = pd.read_csv(out / "summary.csv")
    assert {"type1_error", "coverage_tango", "coverage_cluster_bootstrap"} <= set(
        summary["quantity"]
    )
    assert (out / "summary.md").read_text() in capsys.readouterr().out
    for stem in ("stats_sim", "stats_sim_more"):
        for ext in ("png", "pdf"):
            assert (tmp_path / "fig" / f"{stem}.{ext}").stat().st_size > 1000


# ---- the intervals that decide, and their contrasts ---------------------------------------


def test_corrected_intervals_cover_at_least_as_often_as_the_uncorrected_ones():
    # a corrected interval contains the uncorrected one on every table, so per point its
    # coverage is at least as high (Wilson, method 4 vs 3; Tango with 1/2 pair vs none)
    s = _only(studies=("binary",), replicates=60,
              binary={"base_rates": [0.01, 0.9], "n": [10, 300], "discordance": [0.1]})  # fmt: skip
    table = run_simulation(s)
    table = table[table["trials"] > 0].set_index(["base_rate", "n", "scenario", "quantity"])
    est = table["estimate"].unstack("quantity")
    assert (est["coverage_wilson_cc_control"] >= est["coverage_wilson_control"]).all()
    assert (est["coverage_wilson_cc_treatment"] >= est["coverage_wilson_treatment"]).all()
    assert (est["coverage_tango_cc"] >= est["coverage_tango"]).all()
    # the plain Wilson interval under-covers at p = 0.01, n = 10 (exact: 0.904)
    assert est.loc[(0.01, 10, "no_difference"), "coverage_wilson_control"] < 0.94


def test_the_jackknife_t_over_three_tasks_covers_where_the_cluster_bootstrap_does_not():
    s = _only(studies=("router",), replicates=150, n_resamples=200,
              router={"n_tasks": [3], "examples_per_task": [30], "agreement": [0.85],
                      "task_sd": [0.1]})  # fmt: skip
    cov = run_simulation(s).set_index("quantity")["estimate"]
    assert cov["coverage_cluster_bootstrap"] < 0.85
    assert cov["coverage_cluster_t"] >= 0.94


def test_the_continuous_study_reports_the_verdicts_interval():
    s = _only(studies=("continuous",), replicates=30, n_resamples=100,
              continuous={"means": [0.5], "n": [30], "correlations": [0.5]})  # fmt: skip
    table = run_simulation(s)
    q = set(table["quantity"])
    assert {"coverage_t_studentized", "coverage_bootstrap"} <= q
    rows = table[table["quantity"] == "coverage_t_studentized"]
    boot = table[table["quantity"] == "coverage_bootstrap"]
    # the verdict's interval is never narrower than the t interval, which is wider than
    # the percentile bootstrap's at n = 30
    assert (rows["mean_width"].to_numpy() > boot["mean_width"].to_numpy()).all()


def test_the_summary_names_each_intervals_role_and_whether_it_passes():
    s = _settings()
    summary = summarise(run_simulation(s))
    roles = summary.set_index(["study", "quantity"])["role"]
    assert roles[("binary", "coverage_tango_cc")].startswith("decides")
    assert roles[("binary", "coverage_wilson_cc_control")].startswith("decides")
    assert roles[("continuous", "coverage_t_studentized")].startswith("decides")
    assert roles[("binary", "coverage_bootstrap")].endswith("never decides")
    judged = summary[summary["quantity"] != "power"]
    assert (judged["passes"] == (judged["points_failing"] == 0)).all()
    assert summary.loc[summary["quantity"] == "power", "passes"].isna().all()
    text = summary_markdown(summary, s)
    assert "| role |" in text and "| result |" in text
    assert ("| pass |" in text) or ("| FAIL |" in text)
