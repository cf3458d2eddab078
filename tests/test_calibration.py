"""Calibration: which grid point each objective chooses, on rows with known answers."""

import copy

import pandas as pd
import pytest
import yaml

from tersetalk import calibration
from tersetalk.calibration import (
    OBJECTIVES,
    CalibrationError,
    calibrate,
    choose,
    chosen_settings,
    point_row,
    write,
)


def _row(point, accuracy, tokens):
    return {"point": point, "settings": {"x": point}, "accuracy": accuracy, "tokens_mean": tokens}


def _choose(rows, objective="fewest_tokens_within_margin", reference=0.60, margin=0.02):
    return choose(copy.deepcopy(rows), reference, margin, objective)


def test_qualified_point_with_fewest_tokens_wins():
    rows = [_row("g00", 0.62, 120.0), _row("g01", 0.58, 80.0), _row("g02", 0.55, 40.0)]
    best = _choose(rows)  # floor 0.58: g00 and g01 qualify, g02 has fewer tokens but does not
    assert best["point"] == "g01" and best["qualified"]
    assert best["objective"] == "fewest_tokens_within_margin"
    assert best["chosen_by"].startswith("fewest tokens")


def test_marks_every_row_qualified_or_not():
    rows = [_row("g00", 0.62, 120.0), _row("g01", 0.57, 80.0)]
    choose(rows, 0.60, 0.02)
    assert [r["qualified"] for r in rows] == [True, False]


def test_ties_on_tokens_go_to_accuracy_then_grid_order():
    rows = [_row("g00", 0.60, 50.0), _row("g01", 0.70, 50.0), _row("g02", 0.70, 50.0)]
    assert _choose(rows)["point"] == "g01"
    same = [_row("g00", 0.60, 50.0), _row("g01", 0.60, 50.0)]
    assert _choose(same)["point"] == "g00"
    assert _choose(same, "max_accuracy")["point"] == "g00"


def test_exactly_on_the_margin_qualifies():
    rows = [_row("g00", 0.58, 10.0), _row("g01", 0.90, 100.0)]
    assert _choose(rows, reference=0.60, margin=0.02)["point"] == "g00"


def test_no_qualifying_point_falls_back_to_the_most_accurate_and_says_so():
    rows = [_row("g00", 0.30, 100.0), _row("g01", 0.40, 90.0), _row("g02", 0.40, 70.0)]
    best = _choose(rows, reference=0.80)
    assert best["point"] == "g02"  # most accurate; tie on accuracy -> fewer tokens
    assert best["qualified"] is False
    assert "fallback" in best["chosen_by"] and "most accurate" in best["chosen_by"]
    doc = " ".join(calibration.__doc__.split())
    assert "If no point qualifies, fall back to the most accurate one" in doc


def test_max_accuracy_ignores_tokens_except_for_ties():
    rows = [_row("g00", 0.62, 40.0), _row("g01", 0.70, 300.0), _row("g02", 0.70, 200.0)]
    assert _choose(rows)["point"] == "g00"
    best = _choose(rows, "max_accuracy")
    assert best["point"] == "g02" and best["objective"] == "max_accuracy"
    assert best["qualified"]


@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
def test_every_objective_chooses_from_the_rows_and_keeps_them_unchanged(objective):
    rows = [_row("g00", 0.5, 10.0), _row("g01", 0.9, 20.0)]
    before = copy.deepcopy(rows)
    best = choose(rows, 0.6, 0.02, objective)
    assert best["point"] in {"g00", "g01"}
    assert [{k: r[k] for k in before[0]} for r in rows] == before  # only `qualified` added
    assert "chosen_by" not in rows[0] and "objective" not in rows[0]


def test_unknown_objective_and_empty_rows_are_errors():
    with pytest.raises(CalibrationError, match="unknown calibration objective 'cheapest'"):
        choose([_row("g00", 0.5, 1.0)], 0.5, 0.02, "cheapest")
    with pytest.raises(CalibrationError, match="no calibration runs"):
        choose([], 0.5, 0.02)


def test_schema_lists_exactly_the_implemented_objectives(repo):
    schema = yaml.safe_load((repo / "workflow/schemas/config.schema.yaml").read_text())
    prop = schema["properties"]["calibration"]["additionalProperties"]["properties"]["objective"]
    assert sorted(prop["enum"]) == sorted(OBJECTIVES)
    assert prop["default"] == calibration.DEFAULT_OBJECTIVE


def test_unknown_objective_in_config_names_the_key(base_config):
    from tersetalk.config import ConfigError, validate_config

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
    from tersetalk.config import validate_config

    assert validate_config(cfg)["calibration"]["hybrid"]["objective"] == "max_accuracy"


# ---- calibrate(): files in, document out ------------------------------------------------


def _run(path, correct, tokens, errors=None, lingua=None):
    n = len(correct)
    df = pd.DataFrame(
        {
            "example_id": [f"e{i}" for i in range(n)],
            "correct": [float(c) for c in correct],
            "tokens_total_cl100k": [float(t) for t in tokens],
            "error": errors or [None] * n,
        }
    )
    for col, values in (lingua or {}).items():
        df[col] = values
    df.to_parquet(path)
    return path


@pytest.fixture
def runs(tmp_path):
    ref = _run(tmp_path / "ref.parquet", [1, 1, 0, 1, 0], [200] * 5)  # accuracy 0.6
    tt = {
        "g00": ({"caps": "aggressive"}, _run(tmp_path / "t0.parquet", [1, 0, 0, 1, 0], [50] * 5)),
        "g01": ({"caps": "baseline"}, _run(tmp_path / "t1.parquet", [1, 1, 0, 1, 0], [90] * 5)),
        "g02": ({"caps": "relaxed"}, _run(tmp_path / "t2.parquet", [1, 1, 1, 1, 0], [150] * 5)),
    }
    return ref, {"tersetalk": tt}


def test_calibrate_per_system_objectives(runs):
    ref, system_runs = runs
    doc = calibrate("gsm8k", system_runs, ref, "freeform/default", 0.02)
    assert doc["reference"] == {"run": "freeform/default", "accuracy": 0.6, "n": 5}
    assert doc["objectives"] == {"tersetalk": "fewest_tokens_within_margin"}
    assert doc["chosen"]["tersetalk"]["point"] == "g01"
    assert [r["point"] for r in doc["table"]["tersetalk"]] == ["g00", "g01", "g02"]
    doc = calibrate(
        "gsm8k", system_runs, ref, "freeform/default", 0.02, {"tersetalk": "max_accuracy"}
    )
    assert doc["chosen"]["tersetalk"]["point"] == "g02"
    assert doc["chosen"]["tersetalk"]["objective"] == "max_accuracy"


def test_same_inputs_give_byte_identical_yaml(runs, tmp_path):
    ref, system_runs = runs
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    write(calibrate("gsm8k", system_runs, ref, "freeform/default", 0.02), a)
    shuffled = {"tersetalk": dict(reversed(list(system_runs["tersetalk"].items())))}
    write(calibrate("gsm8k", shuffled, ref, "freeform/default", 0.02), b)
    assert a.read_bytes() == b.read_bytes()
    assert b"&id" not in a.read_bytes() and b"*id" not in a.read_bytes()  # no YAML aliases
    assert chosen_settings(a, "tersetalk") == {"caps": "baseline"}


def test_grid_order_is_natural_past_a_hundred_points(tmp_path):
    ref = _run(tmp_path / "ref.parquet", [1, 0], [10, 10])
    points = {
        name: ({"i": name}, _run(tmp_path / f"{name}.parquet", [1, 0], [10, 10]))
        for name in ("g100", "g99", "g09")
    }
    doc = calibrate("gsm8k", {"hybrid": points}, ref, "freeform/default", 0.02)
    assert [r["point"] for r in doc["table"]["hybrid"]] == ["g09", "g99", "g100"]
    assert doc["chosen"]["hybrid"]["point"] == "g09"  # all tie: grid order


def test_error_rows_count_in_accuracy_not_in_tokens(tmp_path):
    path = _run(tmp_path / "r.parquet", [1, 0, 0], [10, 30, 0], errors=[None, None, "boom"])
    row = point_row("g00", {}, pd.read_parquet(path))
    assert row["n"] == 3 and row["n_errors"] == 1
    assert row["accuracy"] == pytest.approx(1 / 3) and row["tokens_mean"] == 20.0
    assert "lingua_n_messages" not in row  # no achieved-rate columns: no distribution


def test_llmlingua_rows_carry_the_achieved_rate_distribution(tmp_path):
    lingua = {
        "c_lingua_target_rate": [0.5] * 6,
        # within 20% of 0.5 means 0.4..0.6: e0, e1, e3 yes; e2 no; e4 and e5 unreachable
        "c_lingua_scope_rate": [0.5, 0.58, 0.7, 0.41, 0.9, 1.0],
        "c_lingua_target_unreachable": [0, 0, 0, 0, 1, 1],
    }
    path = _run(tmp_path / "l.parquet", [1] * 6, [100] * 6, lingua=lingua)
    row = point_row("g00", {"rate": 0.5}, pd.read_parquet(path))
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
        _run(tmp_path / "ref.parquet", [1] * 6, [200] * 6),
        "freeform/default",
        0.02,
    )
    text = yaml.safe_dump(doc, sort_keys=False)
    assert "lingua_within_20pct_share: 0.75" in text


def test_cli_passes_the_objective(runs, tmp_path):
    import json

    import pyarrow.parquet as pq

    from tersetalk.cli import main

    ref, system_runs = runs
    paths = []
    for point, (settings, path) in system_runs["tersetalk"].items():
        table = pq.read_table(path)
        spec = {"task": "gsm8k", "system": "tersetalk", "variant": point,
                "variant_settings": settings}  # fmt: skip
        meta = {**(table.schema.metadata or {}), b"tersetalk": json.dumps({"spec": spec})}
        pq.write_table(table.replace_schema_metadata(meta), path)
        paths.append(str(path))
    out = tmp_path / "cal.yaml"
    base = ["calibrate", *paths, "--task", "gsm8k", "--reference-run", str(ref), "--out", str(out)]
    assert main([*base, "--objective", "tersetalk=max_accuracy"]) == 0
    assert chosen_settings(out, "tersetalk") == {"caps": "relaxed"}
    assert main(base) == 0
    assert chosen_settings(out, "tersetalk") == {"caps": "baseline"}
    assert main([*base, "--objective", "cheapest"]) == 2
    assert main([*base, "--objective", "hybrid=max_accuracy"]) == 2


# ---- a reference per system (calibration.<system>.reference) ---------------------------


def test_each_system_is_judged_against_its_own_reference(runs, tmp_path):
    ref, system_runs = runs  # freeform reference: accuracy 0.6, floor 0.58
    lingua = _run(tmp_path / "lingua.parquet", [1, 1, 1, 1, 0], [120] * 5)  # 0.8, floor 0.78
    both = {
        "tersetalk": system_runs["tersetalk"],
        "hybrid": copy.deepcopy(system_runs["tersetalk"]),
    }
    doc = calibrate(
        "gsm8k", both, ref, "freeform/default", 0.02,
        references={"hybrid": ("llmlingua/default", lingua)},
    )  # fmt: skip
    assert doc["reference"] == {"run": "freeform/default", "accuracy": 0.6, "n": 5}
    assert doc["references"] == {
        "hybrid": {"run": "llmlingua/default", "accuracy": 0.8, "n": 5},
        "tersetalk": {"run": "freeform/default", "accuracy": 0.6, "n": 5},
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


def test_without_system_references_the_choice_is_unchanged(runs):
    ref, system_runs = runs
    doc = calibrate("gsm8k", system_runs, ref, "freeform/default", 0.02)
    same = calibrate("gsm8k", system_runs, ref, "freeform/default", 0.02, references={})
    assert doc == same
    assert doc["references"] == {"tersetalk": doc["reference"]}
    assert doc["chosen"]["tersetalk"]["reference"] == "freeform/default"


def test_a_reference_for_a_system_without_runs_is_an_error(runs, tmp_path):
    ref, system_runs = runs
    with pytest.raises(CalibrationError, match=r"\['hybrid'\], which have no calibration runs"):
        calibrate("gsm8k", system_runs, ref, "freeform/default", 0.02,
                  references={"hybrid": ("llmlingua/default", ref)})  # fmt: skip


def _with_spec(path, system, variant, settings=None, task="gsm8k"):
    import json

    import pyarrow.parquet as pq

    table = pq.read_table(path)
    spec = {"task": task, "system": system, "variant": variant,
            "variant_settings": settings or {}}  # fmt: skip
    meta = {**(table.schema.metadata or {}), b"tersetalk": json.dumps({"spec": spec})}
    pq.write_table(table.replace_schema_metadata(meta), path)
    return str(path)


def test_cli_passes_system_references_labelled_from_the_run(runs, tmp_path):
    from tersetalk.cli import main

    ref, system_runs = runs
    paths = [
        _with_spec(p, "hybrid", point, s) for point, (s, p) in system_runs["tersetalk"].items()
    ]
    lingua = _with_spec(
        _run(tmp_path / "lingua.parquet", [1, 1, 1, 1, 0], [120] * 5), "llmlingua", "default"
    )
    out = tmp_path / "cal.yaml"
    base = ["calibrate", *paths, "--task", "gsm8k", "--reference-run", str(ref), "--out", str(out)]
    assert main([*base, "--system-reference", f"hybrid={lingua}"]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["references"]["hybrid"]["run"] == "llmlingua/default"
    assert doc["chosen"]["hybrid"]["reference"] == "llmlingua/default"
    assert chosen_settings(out, "hybrid") == {"caps": "relaxed"}
    assert main(base) == 0  # without it: the default reference, as before
    assert yaml.safe_load(out.read_text())["chosen"]["hybrid"]["reference"] == "freeform/default"
    assert chosen_settings(out, "hybrid") == {"caps": "baseline"}
    assert main([*base, "--system-reference", "hybrid"]) == 2
    assert main([*base, "--system-reference", f"tersetalk={lingua}"]) == 2  # no such runs
    other_task = _with_spec(tmp_path / "lingua.parquet", "llmlingua", "default", task="hotpotqa")
    assert main([*base, "--system-reference", f"hybrid={other_task}"]) == 2
