"""Control flow of the ``llmlingua`` system with the scripted model and compressor doubles."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import pytest

from tersetalk.core.io import message_list
from tersetalk.encoders import lingua
from tersetalk.encoders.scripted import ScriptedCompressor
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import ConfigError, run_spec, validate_config
from tersetalk.pipeline.runner import run
from tersetalk.tasks.loading import load_records, sample

VARIANTS = {
    # names may be cut: forcing is then for GSM8K's digits only (the system default
    # keeps capitalised words whole for both tasks, see the next test)
    "r05": {"rate": 0.5, "force_entities": False},
    "r05_entities": {"rate": 0.5},
    "r033": {"rate": 0.33},
    "longllmlingua": {
        "rate": 0.5,
        "rank_method": "longllmlingua",
        "condition_compare": True,
        "reorder_context": "sort",
        "dynamic_context_compression_ratio": 0.3,
    },
    "t60": {"target_tokens": 60},
    "t20": {"target_tokens": 20},
}


@pytest.fixture
def scripted_compressor(monkeypatch):
    comp = ScriptedCompressor()
    loads = []

    def load(settings):
        loads.append(settings)
        return comp

    monkeypatch.setattr(lingua, "load_compressor", load)
    comp.loads = loads
    return comp


@functools.cache
def _records(task):
    return load_records(task, data_dir=Path(__file__).resolve().parents[1] / "data")


def samples(tmp_path, repo, task, n=2):
    ev, _ = sample(task, _records(task), n=n, calibration_n=0, seed=11)
    path = tmp_path / f"{task}.parquet"
    ev.to_parquet(path)
    return path


def spec_for(base_config, tmp_path, task, variant):
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    cfg["systems"].setdefault("llmlingua", {"variants": {}})["variants"].update(
        copy.deepcopy(VARIANTS)
    )
    validate_config(cfg)
    return run_spec(cfg, task, "llmlingua", variant)


def answer(messages):
    return (
        "ACCEPT: fine." if messages[0]["content"].startswith("You are the Critic") else "Answer: 7"
    )


def test_variants_validate_and_a_wrong_one_names_its_key(base_config):
    cfg = copy.deepcopy(base_config)
    cfg["evaluation"]["comparisons"] = []
    cfg["systems"]["llmlingua"] = {"variants": copy.deepcopy(VARIANTS)}
    cfg["calibration"]["hybrid"].pop("reference", None)  # llmlingua/default is gone here
    cfg["ablations"] = {k: v for k, v in cfg["ablations"].items() if v["system"] != "llmlingua"}
    validate_config(cfg)
    assert cfg["systems"]["llmlingua"]["variants"]["r033"]["rate"] == 0.33
    cfg = copy.deepcopy(base_config)
    cfg["evaluation"]["comparisons"] = []
    cfg["systems"]["llmlingua"] = {"variants": {"bad": {"rate": 2.0}}}
    cfg["calibration"]["hybrid"].pop("reference", None)
    cfg["ablations"] = {k: v for k, v in cfg["ablations"].items() if v["system"] != "llmlingua"}
    with pytest.raises(ConfigError, match=r"systems\.llmlingua\.variants\.bad\.rate"):
        validate_config(cfg)


def test_the_system_default_forces_entities_on_hotpotqa(
    base_config, tmp_path, repo, scripted_compressor
):
    spec = spec_for(base_config, tmp_path, "hotpotqa", "r05_entities")
    df = run(
        spec,
        samples(tmp_path, repo, "hotpotqa"),
        tmp_path / "o.parquet",
        client=ScriptedClient(answer),
        progress=False,
    )
    assert df["error"].isna().all()
    assert scripted_compressor.calls and all(c["force"] for c in scripted_compressor.calls)


@pytest.mark.parametrize("task", ["hotpotqa", "gsm8k"])
def test_the_brief_is_compressed_once_and_the_achieved_rate_recorded(
    base_config, tmp_path, repo, scripted_compressor, task
):
    spec = spec_for(base_config, tmp_path, task, "r05")
    df = run(
        spec,
        samples(tmp_path, repo, task),
        tmp_path / "o.parquet",
        client=ScriptedClient(answer),
        progress=False,
    )
    assert df["error"].isna().all()
    assert len(scripted_compressor.loads) == 1  # one compressor per run, not per example
    for row in df.itertuples():
        msgs = message_list(row.messages)
        brief = msgs[0]
        assert brief["kind"] == "brief" and brief["content"].startswith("Goal: ")
        # the Critic sees the same compressed brief the Worker got
        assert [m["content"] for m in msgs if m["kind"] == "brief"] == [brief["content"]] * 2
        c = json.loads(row.counters)
        assert c["lingua_tokens"] == brief["tokens_cl100k"]
        assert c["lingua_rate"] == pytest.approx(c["lingua_tokens"] / c["lingua_origin_tokens"])
        assert c["lingua_target_rate"] == 0.5
    for col in (
        "c_lingua_rate",
        "c_lingua_ctx_rate",
        "c_lingua_origin_tokens",
        "c_lingua_tokens",
        "c_lingua_target_unreachable",
        "c_t_lingua_s",
    ):
        assert col in df.columns
    # half of the facts is well above the compressor's minimum: the target is reachable
    assert (df["c_lingua_target_ctx_tokens"] >= 4).all()
    assert (df["c_lingua_target_unreachable"] == 0).all()
    assert (df["c_lingua_compressor_mismatch"] == 0).all()
    assert (df["c_lingua_tokens"] <= df["c_lingua_origin_tokens"]).all()
    calls = scripted_compressor.calls
    assert all(call["force"] == (task == "gsm8k") for call in calls)
    assert all(call["question"] for call in calls)  # question-aware


def test_a_token_budget_below_the_kept_text_is_flagged(
    base_config, tmp_path, repo, scripted_compressor
):
    def run_variant(variant):
        spec = spec_for(base_config, tmp_path, "hotpotqa", variant)
        df = run(
            spec,
            samples(tmp_path, repo, "hotpotqa"),
            tmp_path / f"{variant}.parquet",
            client=ScriptedClient(answer),
            progress=False,
        )
        assert df["error"].isna().all() and len(df) == 2
        return df

    # 20 tokens: the goal and the question alone (kept verbatim) exceed the budget
    tight = run_variant("t20")
    assert (tight["c_lingua_kept_tokens"] > 20).all()  # the case really occurs
    assert (tight["c_lingua_target_unreachable"] == 1).all()
    # 60 tokens: the kept text plus the compressor's minimum context fits
    loose = run_variant("t60")
    assert (loose["c_lingua_kept_tokens"] + 4 <= 60).all()  # the case really occurs
    assert (loose["c_lingua_target_unreachable"] == 0).all()
    assert (loose["c_lingua_tokens"] < loose["c_lingua_origin_tokens"]).all()


def test_a_compressor_mismatch_is_recorded_on_every_row(
    base_config, tmp_path, repo, scripted_compressor
):
    scripted_compressor.mismatch = True  # as LLMLinguaCompressor on a stale prepared folder
    spec = spec_for(base_config, tmp_path, "hotpotqa", "r05")
    df = run(
        spec,
        samples(tmp_path, repo, "hotpotqa"),
        tmp_path / "o.parquet",
        client=ScriptedClient(answer),
        progress=False,
    )
    assert df["error"].isna().all() and len(df) == 2
    assert (df["c_lingua_compressor_mismatch"] == 1).all()
    assert all(json.loads(c)["lingua_compressor_mismatch"] == 1 for c in df["counters"])


def test_a_missing_compressor_stops_the_run_naming_the_fix(base_config, tmp_path, repo):
    """Not an example's failure: every example would fail alike, so no row records it;
    the run stops as a setup error (exit 2), saying what to run."""
    from tersetalk.pipeline.config import ConfigError

    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    cfg["systems"].setdefault("llmlingua", {"variants": {}})["variants"]["v"] = {
        "model": str(tmp_path / "no-model")
    }
    validate_config(cfg)
    spec = run_spec(cfg, "hotpotqa", "llmlingua", "v")
    with pytest.raises(ConfigError, match="prepare-compressor"):
        run(
            spec,
            samples(tmp_path, repo, "hotpotqa", n=1),
            tmp_path / "o.parquet",
            client=ScriptedClient(answer),
            progress=False,
        )
    assert not (tmp_path / "o.parquet").exists()
