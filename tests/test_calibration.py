"""Calibration: which grid point each objective chooses, and which criterion decided.

Rows with known answers pin the rule (accuracy and preservation margins, the
uninformative-accuracy switch, fallbacks, ties); run files made from a real scripted
run exercise the files-in, YAML-out path; and a scripted-model calibration whose
accuracy is all zeros checks that answer preservation decides.
"""

import copy
import json
import math
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tersetalk.core.io import message_list
from tersetalk.models import ScriptedClient
from tersetalk.pipeline import calibration
from tersetalk.pipeline.calibration import (
    OBJECTIVES,
    CalibrationError,
    accuracy_evidence,
    calibrate,
    choose,
    chosen_settings,
    point_row,
    read_samples,
    schema_defaults,
    write,
)
from tersetalk.pipeline.config import calibration_points, calibration_spec, load_config, run_spec
from tersetalk.pipeline.runner import run
from tersetalk.tasks.loading import load_records, sample

#: a reference so large that its accuracy interval is narrower than a 0.02 margin
INFORMATIVE_N = 100_000


def _row(point, accuracy, tokens, gold=1.0, facts=1.0):
    return {
        "point": point,
        "settings": {"x": point},
        "accuracy": accuracy,
        "tokens_mean": tokens,
        "gold_reaches_worker": gold,
        "facts_reaching_worker": facts,
    }


def _ref(accuracy=0.60, n=INFORMATIVE_N, gold=1.0, facts=1.0, run="freeform/default"):
    return {
        "run": run,
        "accuracy": accuracy,
        "n": n,
        "gold_reaches_worker": gold,
        "facts_reaching_worker": facts,
    }


def _choose(rows, objective="fewest_tokens_within_margin", reference=0.60, margin=0.02, **ref):
    pm = ref.pop("preservation_margin", 0.05)
    return choose(copy.deepcopy(rows), _ref(reference, **ref), margin, objective, pm)


# ---- the accuracy evidence ----------------------------------------------------------------


def test_the_reference_interval_is_the_wilson_interval_of_its_accuracy():
    from tersetalk.core.intervals import wilson

    # 0 of 10 correct: not certain, and exactly the interval the file records
    informative, why = accuracy_evidence(_ref(0.0, n=10), 0.02)
    low, high = wilson(0.0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    assert f"interval {low:.3f}-{high:.3f}" in why and not informative


def test_accuracy_is_uninformative_at_zero_or_when_its_interval_is_wider_than_the_margin():
    informative, why = accuracy_evidence(_ref(0.0, n=INFORMATIVE_N), 0.02)
    assert not informative and "accuracy 0.000" in why and "no calibration example" in why
    informative, why = accuracy_evidence(_ref(0.5, n=10), 0.02)  # the default shard
    assert not informative and "width 0.5" in why and "> margin 0.02" in why
    informative, why = accuracy_evidence(_ref(0.6, n=INFORMATIVE_N), 0.02)
    assert informative and "<= margin 0.02" in why
    # the same n is informative against a wider margin
    assert accuracy_evidence(_ref(0.6, n=400), 0.1)[0]
    assert not accuracy_evidence(_ref(0.6, n=400), 0.05)[0]


# ---- choose(): informative accuracy (both criteria) --------------------------------------


def test_qualified_point_with_fewest_tokens_wins():
    rows = [_row("g00", 0.62, 120.0), _row("g01", 0.58, 80.0), _row("g02", 0.55, 40.0)]
    best = _choose(rows)  # floor 0.58: g00 and g01 qualify, g02 has fewer tokens but does not
    assert best["point"] == "g01" and best["qualified"]
    assert best["objective"] == "fewest_tokens_within_margin"
    assert best["chosen_by"].startswith("fewest tokens")
    assert best["decided_by"] == "accuracy_and_preservation" and best["accuracy_informative"]


def test_with_informative_accuracy_both_criteria_must_hold():
    rows = [
        _row("g00", 0.62, 40.0, gold=0.90, facts=0.50),  # accurate and cheap, loses facts
        _row("g01", 0.50, 60.0),  # keeps everything, below the accuracy floor
        _row("g02", 0.59, 90.0, gold=0.96, facts=0.95),  # both within their margins
        _row("g03", 0.65, 120.0),
    ]
    best = _choose(rows, reference=0.60, gold=1.0, facts=1.0)
    # accuracy alone would take g00, preservation alone g01
    assert best["point"] == "g02" and best["qualified"]
    assert best["decided_by"] == "accuracy_and_preservation"
    assert "accuracy informative" in best["why"]
    assert "gold-reaches-worker 1.000" in best["why"] and "preservation margin 0.05" in best["why"]


def test_marks_every_row_against_each_criterion():
    rows = [
        _row("g00", 0.62, 120.0),
        _row("g01", 0.57, 80.0),
        _row("g02", 0.62, 60.0, facts=0.9),
        _row("g03", 0.50, 50.0, gold=0.5),
    ]
    choose(rows, _ref(0.60), 0.02)
    assert [r["accuracy_within_margin"] for r in rows] == [True, False, True, False]
    assert [r["preservation_within_margin"] for r in rows] == [True, True, False, False]
    assert [r["qualified"] for r in rows] == [True, False, False, False]


def test_ties_on_tokens_go_to_accuracy_then_grid_order():
    rows = [_row("g00", 0.60, 50.0), _row("g01", 0.70, 50.0), _row("g02", 0.70, 50.0)]
    assert _choose(rows)["point"] == "g01"
    same = [_row("g00", 0.60, 50.0), _row("g01", 0.60, 50.0)]
    assert _choose(same)["point"] == "g00"
    assert _choose(same, "max_accuracy")["point"] == "g00"


def test_exactly_on_the_margins_qualifies():
    rows = [_row("g00", 0.58, 10.0, gold=0.85, facts=0.95), _row("g01", 0.90, 100.0)]
    best = _choose(rows, reference=0.60, margin=0.02, gold=0.90, facts=1.0)
    assert best["point"] == "g00"


def test_no_qualifying_point_falls_back_to_the_most_accurate_and_says_so():
    rows = [_row("g00", 0.30, 100.0), _row("g01", 0.40, 90.0), _row("g02", 0.40, 70.0)]
    best = _choose(rows, reference=0.80)
    assert best["point"] == "g02"  # most accurate; tie on accuracy -> fewer tokens
    assert best["qualified"] is False
    assert "fallback" in best["chosen_by"] and "most accurate" in best["chosen_by"]
    assert best["decided_by"] == "accuracy_fallback"
    doc = " ".join(calibration.__doc__.split())
    assert "If no point qualifies, fall back to the most accurate one" in doc


# ---- choose(): uninformative accuracy (preservation decides) -----------------------------


def test_with_all_accuracy_zero_preservation_decides_not_the_fewest_tokens():
    rows = [
        _row("g00", 0.0, 40.0, gold=0.5, facts=0.10),  # the cheapest: drops the facts
        _row("g01", 0.0, 60.0, gold=0.9, facts=0.40),
        _row("g02", 0.0, 80.0, gold=0.9, facts=0.97),  # the cheapest that keeps them
        _row("g03", 0.0, 120.0, gold=0.9, facts=1.00),
    ]
    best = _choose(rows, reference=0.0, n=10, gold=0.9, facts=1.0)
    assert best["point"] == "g02" and best["qualified"]
    assert best["decided_by"] == "preservation" and not best["accuracy_informative"]
    assert best["why"].startswith("accuracy uninformative: reference freeform/default accuracy")
    assert "0.000 on n=10" in best["why"] and "falls to answer preservation" in best["why"]
    # every point is "within the accuracy margin" of 0: that alone would take g00
    marked = copy.deepcopy(rows)
    choose(marked, _ref(0.0, n=10, gold=0.9, facts=1.0), 0.02)
    assert [r["accuracy_within_margin"] for r in marked] == [True] * 4
    assert [r["qualified"] for r in marked] == [False, False, True, True]


def test_a_wide_interval_also_hands_the_choice_to_preservation():
    rows = [_row("g00", 0.6, 40.0, facts=0.5), _row("g01", 0.1, 60.0, facts=1.0)]
    best = _choose(rows, reference=0.6, n=10)  # 6 of 10: interval far wider than 0.02
    assert best["point"] == "g01" and best["decided_by"] == "preservation"
    assert "> margin 0.02" in best["why"]
    # the same rows with an informative reference: g01's accuracy fails, g00's facts fail
    assert _choose(rows, reference=0.6)["decided_by"] == "accuracy_fallback"


def test_uninformative_ties_on_tokens_go_to_preservation_then_grid_order():
    rows = [
        _row("g00", 0.2, 50.0, facts=0.96),
        _row("g01", 0.0, 50.0, facts=1.0),
        _row("g02", 0.0, 50.0, facts=1.0),
    ]
    assert _choose(rows, reference=0.1, n=10)["point"] == "g01"


def test_no_point_preserving_falls_back_to_the_best_preserving_and_says_so():
    rows = [
        _row("g00", 0.0, 40.0, gold=0.5, facts=0.9),
        _row("g01", 0.0, 60.0, gold=0.7, facts=0.2),
        _row("g02", 0.0, 50.0, gold=0.7, facts=0.2),
    ]
    best = _choose(rows, reference=0.0, n=10, gold=0.9, facts=1.0)
    assert best["point"] == "g02"  # best gold rate, tie on facts -> fewer tokens
    assert best["qualified"] is False and best["decided_by"] == "preservation_fallback"
    assert "best-preserving" in best["chosen_by"]
    doc = " ".join(calibration.__doc__.split())
    assert "or to the best-preserving one (uninformative" in doc


def test_preservation_margin_is_its_own_setting():
    rows = [_row("g00", 0.0, 40.0, facts=0.85), _row("g01", 0.0, 90.0, facts=1.0)]
    assert _choose(rows, reference=0.0, n=10)["point"] == "g01"  # default 0.05
    assert _choose(rows, reference=0.0, n=10, preservation_margin=0.2)["point"] == "g00"
    with pytest.raises(CalibrationError, match="preservation margin 1.5"):
        _choose(rows, reference=0.0, preservation_margin=1.5)


def test_a_rate_the_reference_did_not_measure_constrains_nothing():
    rows = [_row("g00", 0.0, 40.0, facts=float("nan")), _row("g01", 0.0, 90.0)]
    assert _choose(rows, reference=0.0, facts=float("nan"))["point"] == "g00"
    # measured by the reference but not by the point: not preserved
    assert _choose(rows, reference=0.0, facts=1.0)["point"] == "g01"


def test_max_accuracy_ignores_tokens_except_for_ties():
    rows = [_row("g00", 0.62, 40.0), _row("g01", 0.70, 300.0), _row("g02", 0.70, 200.0)]
    assert _choose(rows)["point"] == "g00"
    best = _choose(rows, "max_accuracy")
    assert best["point"] == "g02" and best["objective"] == "max_accuracy"
    assert best["qualified"] and best["decided_by"] == "accuracy"
    assert "rests on noise" not in best["why"]


def test_max_accuracy_with_uninformative_accuracy_says_the_choice_rests_on_noise():
    rows = [_row("g00", 0.1, 40.0), _row("g01", 0.2, 300.0, facts=0.1)]
    best = _choose(rows, "max_accuracy", reference=0.1, n=10)
    assert best["point"] == "g01" and best["decided_by"] == "accuracy"
    assert best["qualified"] is False  # reported against preservation, not used
    assert "rests on noise" in best["why"] and "accuracy uninformative" in best["why"]


@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
def test_every_objective_chooses_from_the_rows_and_keeps_them_unchanged(objective):
    rows = [_row("g00", 0.5, 10.0), _row("g01", 0.9, 20.0)]
    before = copy.deepcopy(rows)
    best = choose(rows, _ref(0.6), 0.02, objective)
    assert best["point"] in {"g00", "g01"}
    assert best["decided_by"] in calibration.DECIDED_BY
    assert [{k: r[k] for k in before[0]} for r in rows] == before
    marks = {"accuracy_within_margin", "preservation_within_margin", "qualified"}
    assert all(set(r) - set(before[0]) == marks for r in rows)  # only the marks added
    assert not {"chosen_by", "objective", "decided_by", "why"} & set(rows[0])


def test_unknown_objective_and_empty_rows_are_errors():
    with pytest.raises(CalibrationError, match="unknown calibration objective 'cheapest'"):
        choose([_row("g00", 0.5, 1.0)], _ref(0.5), 0.02, "cheapest")
    with pytest.raises(CalibrationError, match="no calibration runs"):
        choose([], _ref(0.5), 0.02)


# ---- config -------------------------------------------------------------------------------


def _calibration_schema(repo):
    schema = yaml.safe_load((repo / "workflow/schemas/config.schema.yaml").read_text())
    return schema["properties"]["calibration"]["additionalProperties"]["properties"]


def test_schema_lists_exactly_the_implemented_objectives(repo):
    prop = _calibration_schema(repo)["objective"]
    assert sorted(prop["enum"]) == sorted(OBJECTIVES)
    assert prop["default"] == schema_defaults()["objective"]


def test_schema_documents_the_preservation_margin_and_its_default(repo, base_config):
    prop = _calibration_schema(repo)["preservation_margin"]
    assert prop["default"] == schema_defaults()["preservation_margin"] == 0.05
    assert "gold-reaches-Worker" in prop["description"]
    assert all(spec["preservation_margin"] == 0.05 for spec in base_config["calibration"].values())
    from tersetalk.pipeline.config import ConfigError, validate_config

    cfg = copy.deepcopy(base_config)
    cfg["calibration"]["tersetalk"]["preservation_margin"] = 0.1
    assert validate_config(cfg)["calibration"]["tersetalk"]["preservation_margin"] == 0.1
    cfg["calibration"]["tersetalk"]["preservation_margin"] = 2
    with pytest.raises(ConfigError, match=r"calibration\.tersetalk\.preservation_margin"):
        validate_config(cfg)


def test_unknown_objective_in_config_names_the_key(base_config):
    from tersetalk.pipeline.config import ConfigError, validate_config

    cfg = copy.deepcopy(base_config)
    cfg["calibration"]["tersetalk"]["objective"] = "cheapest"
    with pytest.raises(ConfigError, match=r"config key 'calibration\.tersetalk\.objective'"):
        validate_config(cfg)


def test_objective_defaults_when_absent(base_config):
    assert all(
        spec["objective"] == "fewest_tokens_within_margin"
        for spec in base_config["calibration"].values()
    )
    cfg = copy.deepcopy(base_config)
    cfg["calibration"]["hybrid"]["objective"] = "max_accuracy"
    from tersetalk.pipeline.config import validate_config

    assert validate_config(cfg)["calibration"]["hybrid"]["objective"] == "max_accuracy"


# ---- calibrate(): files in, document out ------------------------------------------------
#
# Run files are a real scripted free-form run on a GSM8K calibration sample, with the
# accuracy and token columns set per test; ``kept`` blanks the Manager's brief of the
# examples marked 0, so what reaches the Worker (answer preservation) is set too.

REPO = Path(__file__).resolve().parents[1]
N = 400  # 80 repeats of 5 examples: accuracy 0.6 has a Wilson interval narrower than 0.1
MARGIN = 0.1  # informative at N; the default 0.02 is not (see the preservation tests)


def _scripted_config(tmp):
    cfg = load_config(REPO / "config" / "config.yaml")
    cfg["cache_dir"] = str(tmp / "cache")
    return cfg


def _calibration_sample(task, n, tmp):
    records = load_records(task, data_dir=REPO / "data")
    _, shard = sample(task, records, n=1, calibration_n=n, seed=0)
    path = tmp / f"{task}.calibration.parquet"
    shard.to_parquet(path)
    return path


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A scripted free-form run on a 6-example GSM8K calibration shard, and that shard."""
    tmp = tmp_path_factory.mktemp("template")
    path = _calibration_sample("gsm8k", 6, tmp)
    frame = run(
        run_spec(_scripted_config(tmp), "gsm8k", "freeform", "default"),
        path,
        tmp / "run.parquet",
        client=ScriptedClient(lambda messages: "Answer: 0"),
        progress=False,
    )
    return frame, read_samples(path), path


@pytest.fixture(scope="module")
def samples(template):
    return template[1]


def _without_brief(raw):
    messages = message_list(raw)
    for m in messages:
        if (m["sender"], m["receiver"]) == ("M", "W"):
            m["content"] = ""
    return messages


@pytest.fixture(scope="module")
def make_run(template):
    frame = template[0]

    def _run(path, correct, tokens, errors=None, lingua=None, kept=None, repeat=1):
        n = len(correct)
        df = frame.iloc[:n].copy().reset_index(drop=True)
        df["correct"] = [float(c) for c in correct]
        # a prediction the task's scorer agrees with: calibration scores the runs itself
        df["prediction"] = [
            g if c else "not the answer" for g, c in zip(df["gold"], correct, strict=True)
        ]
        df["tokens_total_cl100k"] = [float(t) for t in tokens]
        df["error"] = errors or [None] * n
        if kept is not None:
            df["messages"] = [
                m if k else _without_brief(m) for m, k in zip(df["messages"], kept, strict=True)
            ]
        for col, values in (lingua or {}).items():
            df[col] = values
        pd.concat([df] * repeat, ignore_index=True).to_parquet(path)
        return path

    return _run


@pytest.fixture
def runs(tmp_path, make_run):
    ref = make_run(tmp_path / "ref.parquet", [1, 1, 0, 1, 0], [200] * 5, repeat=80)  # 0.6
    tt = {
        "g00": ({"caps": "aggressive"},
                make_run(tmp_path / "t0.parquet", [1, 0, 0, 1, 0], [50] * 5, repeat=80)),
        "g01": ({"caps": "baseline"},
                make_run(tmp_path / "t1.parquet", [1, 1, 0, 1, 0], [90] * 5, repeat=80)),
        "g02": ({"caps": "relaxed"},
                make_run(tmp_path / "t2.parquet", [1, 1, 1, 1, 0], [150] * 5, repeat=80)),
    }  # fmt: skip
    return ref, {"tersetalk": tt}


def test_calibrate_per_system_objectives(runs, samples):
    ref, system_runs = runs
    doc = calibrate("gsm8k", system_runs, ref, "freeform/default", MARGIN, samples=samples)
    reference = doc["reference"]
    assert {k: reference[k] for k in ("run", "accuracy", "n", "n_answered")} == {
        "run": "freeform/default", "accuracy": 0.6, "n": N, "n_answered": N,
    }  # fmt: skip
    assert reference["accuracy_informative"] is True
    assert reference["accuracy_ci_high"] - reference["accuracy_ci_low"] < MARGIN
    assert reference["facts_reaching_worker"] == 1.0  # the prose brief carries every sentence
    assert doc["objectives"] == {"tersetalk": "fewest_tokens_within_margin"}
    assert doc["preservation_margins"] == {"tersetalk": 0.05}
    assert doc["accuracy_interval"] == "Wilson score interval, 95%"
    assert doc["chosen"]["tersetalk"]["point"] == "g01"
    assert doc["chosen"]["tersetalk"]["decided_by"] == "accuracy_and_preservation"
    assert [r["point"] for r in doc["table"]["tersetalk"]] == ["g00", "g01", "g02"]
    assert all(r["facts_reaching_worker"] == 1.0 for r in doc["table"]["tersetalk"])
    doc = calibrate("gsm8k", system_runs, ref, "freeform/default", MARGIN,
                    {"tersetalk": "max_accuracy"}, samples=samples)  # fmt: skip
    assert doc["chosen"]["tersetalk"]["point"] == "g02"
    assert doc["chosen"]["tersetalk"]["objective"] == "max_accuracy"
    assert doc["chosen"]["tersetalk"]["decided_by"] == "accuracy"


def test_at_the_default_margin_the_same_runs_are_decided_by_preservation(runs, samples):
    ref, system_runs = runs
    doc = calibrate("gsm8k", system_runs, ref, "freeform/default", 0.02, samples=samples)
    best = doc["chosen"]["tersetalk"]
    assert doc["reference"]["accuracy_informative"] is False
    assert best["decided_by"] == "preservation" and "> margin 0.02" in best["why"]
    assert best["point"] == "g00"  # all keep every fact: the fewest tokens


def test_preservation_is_measured_on_what_reaches_the_worker(tmp_path, make_run, samples):
    ref = make_run(tmp_path / "ref.parquet", [0] * 5, [200] * 5)
    two, four = [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]  # briefs that reach the Worker, of 5
    points = {
        "g00": ({"c": 0}, make_run(tmp_path / "a.parquet", [0] * 5, [50] * 5, kept=two)),
        "g01": ({"c": 1}, make_run(tmp_path / "b.parquet", [0] * 5, [90] * 5, kept=four)),
        "g02": ({"c": 2}, make_run(tmp_path / "c.parquet", [0] * 5, [120] * 5)),
        "g03": ({"c": 3}, make_run(tmp_path / "d.parquet", [0] * 5, [150] * 5)),
    }  # fmt: skip
    doc = calibrate("gsm8k", {"tersetalk": points}, ref, "freeform/default", 0.02, samples=samples)
    facts = [r["facts_reaching_worker"] for r in doc["table"]["tersetalk"]]
    assert facts == [pytest.approx(0.4), pytest.approx(0.8), 1.0, 1.0]
    assert doc["chosen"]["tersetalk"]["point"] == "g02"
    assert doc["chosen"]["tersetalk"]["decided_by"] == "preservation"
    doc = calibrate("gsm8k", {"tersetalk": points}, ref, "freeform/default", 0.02,
                    samples=samples, preservation_margin=0.25)  # fmt: skip
    assert doc["chosen"]["tersetalk"]["point"] == "g01"
    assert doc["preservation_margins"] == {"tersetalk": 0.25}


def test_same_inputs_give_byte_identical_yaml(runs, samples, tmp_path):
    ref, system_runs = runs
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    write(calibrate("gsm8k", system_runs, ref, "freeform/default", MARGIN, samples=samples), a)
    shuffled = {"tersetalk": dict(reversed(list(system_runs["tersetalk"].items())))}
    write(calibrate("gsm8k", shuffled, ref, "freeform/default", MARGIN, samples=samples), b)
    assert a.read_bytes() == b.read_bytes()
    assert b"&id" not in a.read_bytes() and b"*id" not in a.read_bytes()  # no YAML aliases
    assert chosen_settings(a, "tersetalk") == {"caps": "baseline"}


def test_grid_order_is_natural_past_a_hundred_points(tmp_path, make_run, samples):
    ref = make_run(tmp_path / "ref.parquet", [1, 0], [10, 10])
    points = {
        name: ({"i": name}, make_run(tmp_path / f"{name}.parquet", [1, 0], [10, 10]))
        for name in ("g100", "g99", "g09")
    }
    doc = calibrate("gsm8k", {"hybrid": points}, ref, "freeform/default", 0.02, samples=samples)
    assert [r["point"] for r in doc["table"]["hybrid"]] == ["g09", "g99", "g100"]
    assert doc["chosen"]["hybrid"]["point"] == "g09"  # all tie: grid order


def test_error_rows_count_in_accuracy_not_in_tokens_or_preservation(tmp_path, make_run, samples):
    path = make_run(tmp_path / "r.parquet", [1, 0, 0], [10, 30, 0], errors=[None, None, "boom"],
                    kept=[1, 0, 0])  # fmt: skip
    row = point_row("g00", {}, pd.read_parquet(path), samples)
    assert row["n"] == 3 and row["n_errors"] == 1
    assert row["accuracy"] == pytest.approx(1 / 3) and row["tokens_mean"] == 20.0
    assert row["n_answered"] == 2 and row["facts_reaching_worker"] == 0.5
    assert "lingua_n_messages" not in row  # no achieved-rate columns: no distribution


def test_runs_of_another_sample_and_a_reference_without_answers_are_errors(
    tmp_path, make_run, samples
):
    ref = make_run(tmp_path / "ref.parquet", [1, 0], [10, 10])
    point = make_run(tmp_path / "p.parquet", [1, 0], [10, 10])
    other = {k: v for k, v in samples.items() if k != pd.read_parquet(point)["example_id"][0]}
    with pytest.raises(CalibrationError, match=r"not in the calibration sample \(--sample\)"):
        calibrate("gsm8k", {"tersetalk": {"g00": ({}, point)}}, ref, "freeform/default", 0.02,
                  samples=other)  # fmt: skip
    broken = make_run(tmp_path / "broken.parquet", [0, 0], [0, 0], errors=["boom", "boom"])
    with pytest.raises(CalibrationError, match="has no answered example"):
        calibrate("gsm8k", {"tersetalk": {"g00": ({}, point)}}, broken, "freeform/default", 0.02,
                  samples=samples)  # fmt: skip


def test_llmlingua_rows_carry_the_achieved_rate_distribution(tmp_path, make_run, samples):
    lingua = {
        "c_lingua_target_rate": [0.5] * 6,
        # within 20% of 0.5 means 0.4..0.6: e0, e1, e3 yes; e2 no; e4 and e5 unreachable
        "c_lingua_scope_rate": [0.5, 0.58, 0.7, 0.41, 0.9, 1.0],
        "c_lingua_target_unreachable": [0, 0, 0, 0, 1, 1],
    }
    path = make_run(tmp_path / "l.parquet", [1] * 6, [100] * 6, lingua=lingua)
    row = point_row("g00", {"rate": 0.5}, pd.read_parquet(path), samples)
    assert row["lingua_n_messages"] == 6 and row["lingua_target_rate"] == 0.5
    assert row["lingua_n_reachable"] == 4
    assert row["lingua_within_20pct_share"] == 0.75
    assert row["lingua_unreachable_n"] == 2
    assert row["lingua_unreachable_share"] == pytest.approx(1 / 3)
    assert row["lingua_achieved_rate_p50"] == pytest.approx(0.64)
    assert row["lingua_achieved_rate_mean"] == pytest.approx(4.09 / 6)
    assert row["lingua_achieved_rate_p10"] <= row["lingua_achieved_rate_p50"]
    assert row["lingua_achieved_rate_p50"] <= row["lingua_achieved_rate_p90"]
    doc = calibrate(
        "hotpotqa",
        {"llmlingua": {"g00": ({"rate": 0.5}, path)}},
        make_run(tmp_path / "ref.parquet", [1] * 6, [200] * 6),
        "freeform/default",
        0.02,
        samples=samples,
    )
    text = yaml.safe_dump(doc, sort_keys=False)
    assert "lingua_within_20pct_share: 0.75" in text
    assert "decided_by: preservation" in text  # LLMLingua's rates are calibrated the same way


def _with_spec(path, system, variant, settings=None, task="gsm8k"):
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    spec = {"task": task, "system": system, "variant": variant,
            "variant_settings": settings or {}}  # fmt: skip
    meta = {**(table.schema.metadata or {}), b"tersetalk": json.dumps({"spec": spec})}
    pq.write_table(table.replace_schema_metadata(meta), path)
    return str(path)


def _cli_base(paths, ref, sample_path, out, *more_refs):
    ref = _with_spec(ref, "freeform", "default")
    return ["calibrate", *paths, "--task", "gsm8k", "--reference-run", str(ref), *more_refs,
            "--sample", str(sample_path), "--out", str(out)]  # fmt: skip


def _spec(margin=None, **systems):
    spec = {"systems": systems} if systems else {}
    if margin is not None:
        spec["margin"] = margin
    return ["--spec-json", json.dumps(spec)]


def test_cli_passes_the_objective(runs, template, tmp_path):
    from tersetalk.cli import main

    ref, system_runs = runs
    paths = [
        _with_spec(p, "tersetalk", point, s) for point, (s, p) in system_runs["tersetalk"].items()
    ]
    out = tmp_path / "cal.yaml"
    base = _cli_base(paths, ref, template[2], out)
    assert main([*base, *_spec(MARGIN, tersetalk={"objective": "max_accuracy"})]) == 0
    assert chosen_settings(out, "tersetalk") == {"caps": "relaxed"}
    assert main([*base, *_spec(MARGIN)]) == 0
    assert chosen_settings(out, "tersetalk") == {"caps": "baseline"}
    assert main([*base, *_spec(MARGIN, tersetalk={"objective": "cheapest"})]) == 2
    assert main([*base, *_spec(MARGIN, hybrid={"objective": "max_accuracy"})]) == 2


@pytest.mark.parametrize(
    "spec, said",
    [
        ("{", "--spec-json is not valid JSON"),
        ("[]", "--spec-json must be a JSON object"),
        ('{"margins": 0.1}', "--spec-json key 'margins': unknown"),
        ('{"margin": "0.1"}', "--spec-json key 'margin': expected a non-negative number"),
        ('{"margin": true}', "--spec-json key 'margin': expected a non-negative number"),
        ('{"systems": []}', "--spec-json key 'systems': expected an object"),
        ('{"systems": {"tersetalk": {"cap": 1}}}', "key 'systems.tersetalk.cap': unknown"),
        ('{"systems": {"tersetalk": {"reference": "freeform"}}}', "a system/variant label"),
        ('{"reference": "llmlingua/default"}', "no --reference-run is a run of it"),
    ],
)
def test_cli_options_are_checked_strictly(runs, template, tmp_path, capsys, spec, said):
    from tersetalk.cli import main

    ref, system_runs = runs
    paths = [
        _with_spec(p, "tersetalk", point, s) for point, (s, p) in system_runs["tersetalk"].items()
    ]
    out = tmp_path / "cal.yaml"
    assert main([*_cli_base(paths, ref, template[2], out), "--spec-json", spec]) == 2
    assert said in capsys.readouterr().err
    assert not out.exists()


def test_the_workflow_options_are_the_configs(base_config):
    opts = calibration.options(base_config, "gsm8k")
    ev = base_config["evaluation"]
    assert (opts["reference"], opts["margin"]) == (ev["reference"], ev["margin"])
    assert set(opts["systems"]) == set(base_config["calibration"])
    for system, entry in opts["systems"].items():
        spec = base_config["calibration"][system]
        assert entry["objective"] == spec["objective"]
        assert entry["preservation_margin"] == spec["preservation_margin"]
        assert entry.get("reference") == spec.get("reference")
    # what the CLI reads back is what the config says
    checked = calibration.check_options(json.loads(json.dumps(opts)), opts["systems"])
    assert checked["margin"] == ev["margin"]


def test_cli_needs_the_sample_and_passes_the_preservation_margin(tmp_path, make_run, template):
    from tersetalk.cli import main

    ref = make_run(tmp_path / "ref.parquet", [0] * 5, [200] * 5)
    paths = [
        _with_spec(make_run(tmp_path / "a.parquet", [0] * 5, [50] * 5, kept=[1, 1, 1, 1, 0]),
                   "tersetalk", "g00", {"caps": "aggressive"}),
        _with_spec(make_run(tmp_path / "b.parquet", [0] * 5, [90] * 5),
                   "tersetalk", "g01", {"caps": "relaxed"}),
    ]  # fmt: skip
    out = tmp_path / "cal.yaml"
    base = _cli_base(paths, ref, template[2], out)
    assert main(base) == 0
    assert chosen_settings(out, "tersetalk") == {"caps": "relaxed"}
    doc = yaml.safe_load(out.read_text())
    assert doc["chosen"]["tersetalk"]["decided_by"] == "preservation"
    assert doc["preservation_margins"] == {"tersetalk": 0.05}
    assert main([*base, *_spec(tersetalk={"preservation_margin": 0.25})]) == 0
    assert chosen_settings(out, "tersetalk") == {"caps": "aggressive"}
    assert main([*base, *_spec(tersetalk={"preservation_margin": "lots"})]) == 2
    assert main([*base, *_spec(tersetalk={"preservation_margin": 1.5})]) == 2
    assert main([*base, *_spec(hybrid={"preservation_margin": 0.1})]) == 2
    without = [a for a in base if a not in ("--sample", str(template[2]))]
    with pytest.raises(SystemExit) as exc:
        main(without)
    assert exc.value.code == 2


# ---- a reference per system (calibration.<system>.reference) ---------------------------


def test_each_system_is_judged_against_its_own_reference(runs, make_run, samples, tmp_path):
    ref, system_runs = runs  # freeform reference: accuracy 0.6, floor 0.5
    lingua = make_run(tmp_path / "lingua.parquet", [1, 1, 1, 1, 0], [120] * 5, repeat=80)  # 0.8
    both = {
        "tersetalk": system_runs["tersetalk"],
        "hybrid": copy.deepcopy(system_runs["tersetalk"]),
    }
    doc = calibrate(
        "gsm8k", both, ref, "freeform/default", MARGIN,
        references={"hybrid": ("llmlingua/default", lingua)}, samples=samples,
    )  # fmt: skip
    assert doc["reference"]["run"] == "freeform/default" and doc["reference"]["accuracy"] == 0.6
    assert {s: (r["run"], r["accuracy"], r["n"]) for s, r in doc["references"].items()} == {
        "hybrid": ("llmlingua/default", 0.8, N),
        "tersetalk": ("freeform/default", 0.6, N),
    }
    # same grid, different floors: only g02 (0.8) is within the margin of LLMLingua
    assert doc["chosen"]["tersetalk"]["point"] == "g01"
    assert doc["chosen"]["tersetalk"]["reference"] == "freeform/default"
    assert doc["chosen"]["hybrid"]["point"] == "g02"
    assert doc["chosen"]["hybrid"]["reference"] == "llmlingua/default"
    assert [r["qualified"] for r in doc["table"]["hybrid"]] == [False, False, True]
    assert "reference" not in doc["table"]["hybrid"][0]  # rows are the points, unchanged
    text = yaml.safe_dump(doc, sort_keys=False)
    assert "&id" not in text and "*id" not in text


def test_a_systems_own_reference_sets_its_preservation_bar(tmp_path, make_run, samples):
    ref = make_run(tmp_path / "ref.parquet", [0] * 5, [200] * 5)  # every fact arrives
    lossy = make_run(tmp_path / "lossy.parquet", [0] * 5, [100] * 5, kept=[1, 0, 0, 0, 0])
    grid = {
        "g00": ({"budget": 60}, make_run(tmp_path / "a.parquet", [0] * 5, [50] * 5,
                                         kept=[1, 0, 0, 0, 0])),
        "g01": ({"budget": 100}, make_run(tmp_path / "b.parquet", [0] * 5, [90] * 5)),
    }  # fmt: skip
    doc = calibrate(
        "gsm8k", {"tersetalk": grid, "hybrid": copy.deepcopy(grid)}, ref, "freeform/default",
        0.02, references={"hybrid": ("llmlingua/default", lossy)}, samples=samples,
    )  # fmt: skip
    assert doc["references"]["hybrid"]["facts_reaching_worker"] == pytest.approx(0.2)
    assert doc["chosen"]["tersetalk"]["point"] == "g01"  # free-form keeps every fact
    assert doc["chosen"]["hybrid"]["point"] == "g00"  # as much as LLMLingua keeps
    assert "reference llmlingua/default accuracy 0.000" in doc["chosen"]["hybrid"]["why"]


def test_without_system_references_the_choice_is_unchanged(runs, samples):
    ref, system_runs = runs
    doc = calibrate("gsm8k", system_runs, ref, "freeform/default", MARGIN, samples=samples)
    same = calibrate("gsm8k", system_runs, ref, "freeform/default", MARGIN, references={},
                     samples=samples)  # fmt: skip
    assert doc == same
    assert doc["references"] == {"tersetalk": doc["reference"]}
    assert doc["chosen"]["tersetalk"]["reference"] == "freeform/default"


def test_a_reference_for_a_system_without_runs_is_an_error(runs, samples):
    ref, system_runs = runs
    with pytest.raises(CalibrationError, match=r"\['hybrid'\], which have no calibration runs"):
        calibrate("gsm8k", system_runs, ref, "freeform/default", 0.02,
                  references={"hybrid": ("llmlingua/default", ref)}, samples=samples)  # fmt: skip


def test_cli_passes_system_references_labelled_from_the_run(runs, make_run, template, tmp_path):
    from tersetalk.cli import main

    ref, system_runs = runs
    paths = [
        _with_spec(p, "hybrid", point, s) for point, (s, p) in system_runs["tersetalk"].items()
    ]
    lingua = _with_spec(
        make_run(tmp_path / "lingua.parquet", [1, 1, 1, 1, 0], [120] * 5, repeat=80),
        "llmlingua",
        "default",
    )
    out = tmp_path / "cal.yaml"
    base = _cli_base(paths, ref, template[2], out, lingua)  # a second --reference-run
    own = _spec(MARGIN, hybrid={"reference": "llmlingua/default"})
    assert main([*base, *own]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["references"]["hybrid"]["run"] == "llmlingua/default"
    assert doc["chosen"]["hybrid"]["reference"] == "llmlingua/default"
    assert chosen_settings(out, "hybrid") == {"caps": "relaxed"}
    assert main([*base, *_spec(MARGIN)]) == 0  # without it: the default reference
    assert yaml.safe_load(out.read_text())["chosen"]["hybrid"]["reference"] == "freeform/default"
    assert chosen_settings(out, "hybrid") == {"caps": "baseline"}
    without = _cli_base(paths, ref, template[2], out)
    assert main([*without, *own]) == 2  # its run is not among the --reference-run files
    not_run = _spec(MARGIN, tersetalk={"reference": "llmlingua/default"})
    assert main([*base, *not_run]) == 2  # no such runs
    other_task = _with_spec(tmp_path / "lingua.parquet", "llmlingua", "default", task="hotpotqa")
    assert main([*_cli_base(paths, ref, template[2], out, other_task), *own]) == 2


# ---- a scripted model whose accuracy is all zeros ----------------------------------------
#
# Real runs of the free-form reference and of TerseTalk's caps on a HotpotQA calibration
# shard, with a scripted model that never answers right: accuracy is 0 everywhere, so
# the old rule ("fewest tokens within the accuracy margin") took the most aggressive caps
# and lost supporting facts. The expected point is derived below from the table (the
# exact rates move with the brief), but every condition is checked independently.

CAPS = ["aggressive", "baseline", "relaxed", "very_relaxed"]


@pytest.fixture(scope="module")
def zero_accuracy_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scripted")
    cfg = _scripted_config(tmp)
    cfg["calibration"] = {"tersetalk": {"grid": {"caps": CAPS}}}
    shard = _calibration_sample("hotpotqa", 4, tmp)
    client = ScriptedClient(lambda messages: "Answer: no idea")
    ref = tmp / "freeform" / "default.parquet"
    ref.parent.mkdir()
    run(run_spec(cfg, "hotpotqa", "freeform", "default"), shard, ref, client=client,
        progress=False)  # fmt: skip
    points = {}
    for point, settings in calibration_points(cfg, "tersetalk").items():
        out = tmp / "tersetalk" / f"{point}.parquet"
        out.parent.mkdir(exist_ok=True)
        run(calibration_spec(cfg, "hotpotqa", "tersetalk", point), shard, out, client=client,
            progress=False)  # fmt: skip
        points[point] = (settings, out)
    return shard, ref, points


def _preserving(row, ref, pm):
    return all(
        row[c] >= ref[c] - pm - 1e-9 for c in ("gold_reaches_worker", "facts_reaching_worker")
    )


@pytest.mark.parametrize("pm", [0.05, 0.2])
def test_scripted_zero_accuracy_calibration_is_decided_by_preservation(zero_accuracy_runs, pm):
    shard, ref, points = zero_accuracy_runs
    doc = calibrate("hotpotqa", {"tersetalk": points}, ref, "freeform/default", 0.02,
                    samples=read_samples(shard), preservation_margin=pm)  # fmt: skip
    reference, table, best = doc["reference"], doc["table"]["tersetalk"], doc["chosen"]["tersetalk"]
    # the situation of the issue: nothing is ever correct, the points differ in what arrives
    assert reference["accuracy"] == 0.0 and all(r["accuracy"] == 0.0 for r in table)
    assert len({r["facts_reaching_worker"] for r in table}) > 1
    cheapest = min(table, key=lambda r: r["tokens_mean"])
    assert cheapest["settings"] == {"caps": "aggressive"}
    assert not _preserving(cheapest, reference, pm)  # the cheapest point drops facts
    # preservation decided, and the file says so and why
    assert reference["accuracy_informative"] is False
    assert best["decided_by"] == "preservation" and best["accuracy_informative"] is False
    assert "accuracy uninformative: reference freeform/default accuracy 0.000 on n=4" in best["why"]
    assert f"preservation margin {pm:g}" in best["why"]
    # the choice: preserving, and every cheaper point is not -- so not the cheapest point
    assert best["qualified"] and _preserving(best, reference, pm)
    assert best["point"] != cheapest["point"]
    cheaper = [r for r in table if r["tokens_mean"] < best["tokens_mean"]]
    assert cheaper and not any(_preserving(r, reference, pm) for r in cheaper)


def test_scripted_zero_accuracy_calibration_through_the_cli(zero_accuracy_runs, tmp_path):
    from tersetalk.cli import main

    shard, ref, points = zero_accuracy_runs
    out = tmp_path / "hotpotqa.yaml"
    args = ["calibrate", *(str(p) for _, p in points.values()), "--task", "hotpotqa",
            "--sample", str(shard), "--reference-run", str(ref), "--out", str(out)]  # fmt: skip
    # the runs were made by `tersetalk run`: the reference is known by its run spec
    assert main(args) == 0
    text = out.read_text()
    assert "decided_by: preservation\n" in text and "accuracy_interval: Wilson score" in text
    doc = yaml.safe_load(text)
    chosen = doc["chosen"]["tersetalk"]
    assert chosen["settings"] != {"caps": "aggressive"}
    assert not math.isnan(doc["references"]["tersetalk"]["gold_reaches_worker"])


# ---- the workflow hands the calibration sample to the rule -------------------------------


def test_calibrate_rule_passes_the_sample_and_the_options_as_one_json(repo):
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-p", "-F", "--cores", "1",
         "results/smollm2-135m-instruct/calibration/gsm8k.yaml"],
        cwd=repo, capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    command = next(line for line in res.stdout.splitlines() if "tersetalk calibrate " in line)
    assert "--sample results/samples/gsm8k.calibration.parquet" in command
    assert (
        "--reference-run results/smollm2-135m-instruct/calibration/runs/gsm8k/freeform/"
        "default.parquet" in command
    )
    spec = json.loads(shlex.split(command.partition("--spec-json ")[2])[0])
    cfg = load_config(repo / "config" / "config.yaml")
    assert spec == calibration.options(cfg, "gsm8k")
    assert {s: e["preservation_margin"] for s, e in spec["systems"].items()} == {
        system: 0.05 for system in cfg["calibration"]
    }
