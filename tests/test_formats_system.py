"""The ``formats`` system on a scripted model double: control flow and counters only.

What is checked: the Manager's brief carries the payload in the variant's encoding
(and only that changes against free-form), the encoding is the study's own (a lossless
one decodes back to the payload; a budget is kept), the counters reach the record, a
format that cannot carry the payload falls back to compact JSON and says so, and a
wrong setting stops at config validation naming the key. No number here is a result.
"""

from __future__ import annotations

import json

import pytest

from tersetalk.core.io import message_list
from tersetalk.core.tokens import count_tokens
from tersetalk.formats.solver import decode
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import ConfigError, load_config, run_spec, validate_config
from tersetalk.pipeline.runner import run
from tersetalk.systems.formats_system import FormatsSettings, encode_payload
from tersetalk.tasks.loading import load_records, sample

VARIANTS = ("json_pretty", "json_compact", "toon", "mckp", "mckp_budget_200")


@pytest.fixture(scope="module")
def cfg(request):
    return load_config(request.config.rootpath / "config" / "config.yaml")


@pytest.fixture(scope="module")
def toolqa_sample(request, tmp_path_factory):
    recs = load_records("toolqa", data_dir=request.config.rootpath / "data")
    ev, _ = sample("toolqa", recs, n=3, calibration_n=0, seed=11)
    path = tmp_path_factory.mktemp("toolqa") / "sample.parquet"
    ev.to_parquet(path)
    return path, ev


def _model(messages):
    """The Critic accepts; the Worker always answers 42."""
    if messages[0]["content"].startswith("You are the Critic"):
        return "ACCEPT. Fine."
    return "42"


def _run(cfg, variant, sample_path, out, system="formats", task="toolqa"):
    spec = run_spec(cfg, task, system, variant)
    return run(spec, sample_path, out, client=ScriptedClient(_model), progress=False)


def _brief(df, i=0):
    msgs = message_list(df["messages"].iloc[i])
    return next(m["content"] for m in msgs if m["kind"] == "brief" and m["receiver"] == "W")


def _payload_of(brief: str) -> str:
    body = brief.split("Tool response:\n", 1)[1]
    return body.rsplit("\nQuestion: ", 1)[0]


def test_each_variant_sends_its_encoding_and_only_that_changes(cfg, toolqa_sample, tmp_path):
    path, ev = toolqa_sample
    ref = _run(cfg, "default", path, tmp_path / "ff.parquet", system="freeform")
    for variant in VARIANTS:
        df = _run(cfg, variant, path, tmp_path / f"{variant}.parquet")
        assert df["error"].isna().all(), df["error"].tolist()
        assert list(df["example_id"]) == list(ref["example_id"])  # paired with free-form
        for i, row in enumerate(ev.itertuples()):
            record = json.loads(row.record)
            original = json.loads(record["payload"])
            brief, ref_brief = _brief(df, i), _brief(ref, i)
            assert _payload_of(ref_brief) == record["payload"]  # free-form: as returned
            # goal and question as in free-form: the payload's encoding is the difference
            assert brief.split("Tool response:")[0] == ref_brief.split("Tool response:")[0]
            assert brief.endswith(f"Question: {record['question']}")
            sent = _payload_of(brief)
            counters = json.loads(df["counters"].iloc[i])
            assert counters["format_payload_tokens"] == count_tokens(sent, "o200k_base")
            assert counters["format_payload_tokens_pretty"] == count_tokens(
                record["payload"], "o200k_base"
            )
            if variant == "json_compact":
                assert sent == json.dumps(original, ensure_ascii=False, separators=(",", ":"))
            if variant == "mckp_budget_200":
                assert counters["format_payload_tokens"] <= 200
            elif counters["format_fallback"] == 0:
                assert counters["format_lossless"] == 1
                assert decode(sent) == original  # the study's lossless encoding
        # numeric counters are columns too, so the summary averages them
        assert "c_format_payload_tokens" in df.columns


def test_mckp_is_never_dearer_than_compact_json(cfg, toolqa_sample, tmp_path):
    path, _ = toolqa_sample
    mckp = _run(cfg, "mckp", path, tmp_path / "m.parquet")
    compact = _run(cfg, "json_compact", path, tmp_path / "c.parquet")
    assert (mckp["c_format_payload_tokens"] <= compact["c_format_payload_tokens"]).all()


def test_an_ineligible_format_falls_back_to_compact_json_and_says_so():
    nested = json.dumps({"a": {"b": [1, {"c": None}]}, "d": "x"}, indent=2)
    text, counters = encode_payload(nested, FormatsSettings(encoder="csv"))
    assert counters["format_fallback"] == 1
    assert "csv" in counters["format_fallback_reason"]
    assert json.loads(text) == json.loads(nested)
    text, counters = encode_payload(nested, FormatsSettings(encoder="json_compact"))
    assert counters["format_fallback"] == 0 and counters["format_fallback_reason"] == ""


def test_an_unreachable_budget_is_an_error_row(cfg, toolqa_sample, tmp_path):
    path, _ = toolqa_sample
    cfg = json.loads(json.dumps(cfg))
    cfg["systems"]["formats"]["variants"]["tiny"] = {"encoder": "mckp", "budget": 1}
    cfg["pipeline"]["max_error_share"] = 1.0  # every row is an error row here
    df = _run(validate_config(cfg), "tiny", path, tmp_path / "t.parquet")
    assert df["error"].str.contains("BudgetError").all()
    assert (df["correct"] == 0).all()


def test_outside_toolqa_it_fails_clearly(cfg, repo, tmp_path):
    recs = load_records("gsm8k", data_dir=repo / "data")
    ev, _ = sample("gsm8k", recs, n=1, calibration_n=0, seed=0)
    ev.to_parquet(tmp_path / "g.parquet")
    cfg = {**cfg, "pipeline": {**cfg["pipeline"], "max_error_share": 1.0}}  # an error row
    df = _run(cfg, "mckp", tmp_path / "g.parquet", tmp_path / "g_out.parquet", task="gsm8k")
    assert "systems.formats.tasks" in df["error"].iloc[0]


@pytest.mark.parametrize(
    ("settings", "key", "words"),
    [
        ({"encoder": "yaml"}, "systems.formats.variants.bad.encoder", "unknown encoder 'yaml'"),
        ({"encoder": "toon", "budget": 100}, "systems.formats.variants.bad.budget", "mckp only"),
        ({"encoder": "mckp", "budget": 0}, "systems.formats.variants.bad.budget", "greater than"),
        ({"tokenizer": "gpt2"}, "systems.formats.variants.bad.tokenizer", "unknown tokenizer"),
        ({"encoding": "toon"}, "systems.formats.variants.bad.encoding", "Extra inputs"),
    ],
)
def test_wrong_settings_are_config_errors_naming_the_key(cfg, settings, key, words):
    bad = json.loads(json.dumps(cfg))
    bad["systems"]["formats"]["variants"]["bad"] = settings
    with pytest.raises(ConfigError) as info:
        validate_config(bad)
    assert f"config key '{key}'" in str(info.value) and words in str(info.value)
