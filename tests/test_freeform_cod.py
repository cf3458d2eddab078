"""freeform/cod (Chain-of-Draft): prompts, answer reading, counters and scheduling.

The scripted model is for control flow only (which prompt the Worker got, how its
reply is read, what the record counts); one test runs the real embedded model on one
example (marked integration).
"""

from __future__ import annotations

import pandas as pd
import pytest

from tersetalk.core.io import message_list
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import ConfigError, load_config, run_spec, validate_config
from tersetalk.pipeline.runner import run
from tersetalk.pipeline.schedule import planned_runs, task_runs, variant_tasks
from tersetalk.systems import system, validate_variant
from tersetalk.systems.freeform import COD_INSTRUCTION, cod_worker_system, read_cod_answer
from tersetalk.tasks.loading import load_records, sample

CONFIG = "config/config.yaml"


# -- reading the answer -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "text", "want"),
    [
        ("gsm8k", "20-5=15\n15*2=30\n#### 30", ("30", True)),
        ("gsm8k", "3+4=7; ####  1,234 dollars", ("1234", True)),
        # two markers: the last one holds the answer
        ("gsm8k", "#### 5 wrong\nfix: 6\n#### 6", ("6", True)),
        # no marker: free-form's reading (the "Answer:" line), counted as a fallback
        ("gsm8k", "steps 2+2=4\nAnswer: 4", ("4", False)),
        # a marker with nothing usable after it: fallback too
        ("gsm8k", "2+2=4\n####", ("4", False)),
        ("hotpotqa", "Both bands: American?\n#### yes", ("yes", True)),
        ("hotpotqa", "Film by X.\n#### Answer: Steven Spielberg.", ("Steven Spielberg", True)),
        ("hotpotqa", "The answer is Paris", ("Paris", False)),
    ],
)
def test_read_cod_answer(task, text, want):
    assert read_cod_answer(task, text) == want


def test_cod_prompt_is_chain_of_draft_for_both_tasks():
    assert "5 words at most" in COD_INSTRUCTION and "####" in COD_INSTRUCTION
    offered = {t: cod_worker_system(t) for t in ("hotpotqa", "gsm8k", "boolq", "humaneval")}
    assert {t for t, p in offered.items() if p is not None} == {"hotpotqa", "gsm8k"}
    for prompt in filter(None, offered.values()):
        assert COD_INSTRUCTION in prompt and prompt.startswith("You are the Worker.")


# -- settings and scheduling ------------------------------------------------------------


def test_default_settings_serialise_to_nothing():
    # freeform/default's run spec (and spec_hash) did not change when `prompting` came
    assert validate_variant("freeform", "default", {}) == {}
    assert validate_variant("freeform", "x", {"prompting": "default"}) == {}
    assert validate_variant("freeform", "cod", {"prompting": "cod"}) == {"prompting": "cod"}
    with pytest.raises(ValueError, match="systems.freeform.variants.bad.prompting"):
        validate_variant("freeform", "bad", {"prompting": "tot"})
    parsed = system("freeform").parse({"prompting": "cod", "tasks": ["gsm8k"]})
    assert parsed.prompting == "cod"


def test_cod_runs_on_hotpotqa_and_gsm8k_not_toolqa():
    cfg = load_config(CONFIG)
    assert cfg["systems"]["freeform"]["variants"]["cod"]["tasks"] == ["hotpotqa", "gsm8k"]
    assert variant_tasks(cfg, "freeform", "cod") == ["hotpotqa", "gsm8k"]
    assert variant_tasks(cfg, "freeform", "default") == ["hotpotqa", "gsm8k", "toolqa"]
    runs = planned_runs(cfg)
    assert "freeform/cod" in runs["hotpotqa"] and "freeform/cod" in runs["gsm8k"]
    assert "freeform/cod" not in runs["toolqa"] and "freeform/default" in runs["toolqa"]
    assert ["tersetalk/default", "freeform/cod"] in cfg["evaluation"]["comparisons"]
    # the variant's tasks are within its system's: --config tasks=[gsm8k] narrows it too
    cfg["tasks"] = ["gsm8k"]
    assert variant_tasks(cfg, "freeform", "cod") == ["gsm8k"]
    assert task_runs(cfg, "gsm8k")[:2] == ["freeform/default", "freeform/cod"]


def test_reference_variant_must_run_everywhere():
    cfg = load_config(CONFIG)
    cfg["systems"]["freeform"]["variants"]["default"] = {"tasks": ["gsm8k"]}
    with pytest.raises(ConfigError, match="systems.freeform.variants.default.tasks"):
        validate_config(cfg)


def test_unknown_variant_task_is_refused():
    cfg = load_config(CONFIG)
    cfg["systems"]["freeform"]["variants"]["cod"]["tasks"] = ["mmlu"]
    with pytest.raises(ConfigError, match="systems.freeform.variants.cod.tasks"):
        validate_config(cfg)


# -- a run with the scripted model (control flow) ---------------------------------------


def _sample(tmp_path, task):
    ev, _ = sample(task, load_records(task, data_dir="data"), n=2, calibration_n=0, seed=5)
    path = tmp_path / f"{task}.parquet"
    ev.to_parquet(path)
    return path


def _run(tmp_path, task, variant, worker_replies):
    cfg = load_config(CONFIG)
    cfg["cache_dir"] = str(tmp_path / "cache")
    spec = run_spec(cfg, task, "freeform", variant)
    prompts = []
    replies = iter(worker_replies)

    def model(messages):
        prompts.append(messages[0]["content"])
        if messages[0]["content"].startswith("You are the Critic"):
            return "ACCEPT. Fine."
        return next(replies)

    out = tmp_path / f"{variant}.parquet"
    df = run(spec, _sample(tmp_path, task), out, client=ScriptedClient(model), progress=False)
    return df, prompts


def test_cod_run_reads_marker_and_counts_fallback(tmp_path):
    df, prompts = _run(tmp_path, "gsm8k", "cod", ["x=3*4\n#### 12", "no marker, Answer: 7"])
    assert df["error"].isna().all()
    assert cod_worker_system("gsm8k") in prompts
    assert list(df["prediction"]) == ["12", "7"]
    assert list(df["c_cod_marker"]) == [1, 0]
    assert list(df["c_cod_fallback"]) == [0, 1]


def test_default_run_keeps_free_form_prompt_and_no_cod_counters(tmp_path):
    df, prompts = _run(tmp_path, "gsm8k", "default", ["Answer: 12", "Answer: 7"])
    assert not any(COD_INSTRUCTION in p for p in prompts)
    assert list(df["prediction"]) == ["12", "7"]
    assert not [c for c in df.columns if c.startswith("c_cod")]


def test_cod_without_a_prompt_for_the_task_is_an_error_row(tmp_path):
    cfg = load_config(CONFIG)
    cfg["cache_dir"] = str(tmp_path / "cache")
    spec = run_spec(cfg, "toolqa", "freeform", "cod")  # forced past the schedule
    spec["pipeline"]["max_error_share"] = 1.0  # every row is an error row here
    sample_path = _sample(tmp_path, "toolqa")
    df = run(spec, sample_path, tmp_path / "t.parquet", client=ScriptedClient(lambda m: "x"),
             progress=False)  # fmt: skip
    assert df["error"].notna().all()
    assert "no Worker prompt for task 'toolqa'" in df["error"].iloc[0]


# -- the real embedded model, one example -------------------------------------------------


@pytest.mark.integration
def test_cod_with_the_real_model(tmp_path):
    cfg = load_config(CONFIG)
    cfg["cache_dir"] = str(tmp_path / "cache")
    spec = run_spec(cfg, "gsm8k", "freeform", "cod")
    ev, _ = sample("gsm8k", load_records("gsm8k", data_dir="data"), n=1, calibration_n=0, seed=5)
    ev.to_parquet(tmp_path / "s.parquet")
    df = run(spec, tmp_path / "s.parquet", tmp_path / "cod.parquet", progress=False)
    row = df.iloc[0]
    assert pd.isna(row["error"]), row["error"]
    messages = message_list(row["messages"])
    assert messages and row["c_cod_marker"] + row["c_cod_fallback"] == 1
    # whichever way it was read, the prediction is what read_cod_answer makes of the reply
    assert row["prediction"] == read_cod_answer("gsm8k", row["raw_answer"])[0]
    print("cod reply:", repr(row["raw_answer"]), "->", row["prediction"], "gold", row["gold"])
