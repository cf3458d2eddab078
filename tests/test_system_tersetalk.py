"""Control flow of the ``tersetalk`` system with the scripted double (no reported numbers)."""

import copy
import json

import pytest

from tersetalk.config import ConfigError, run_spec, validate_config
from tersetalk.models import ScriptedClient
from tersetalk.protocol import parse_strict
from tersetalk.runner import run
from tersetalk.tasks.loading import load_records, sample


@pytest.fixture
def hotpot(tmp_path, repo):
    records = load_records("hotpotqa", data_dir=repo / "data")
    ev, _ = sample("hotpotqa", records, n=2, calibration_n=0, seed=11)
    path = tmp_path / "sample.parquet"
    ev.to_parquet(path)
    return path


def spec_for(base_config, tmp_path, **settings):
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    cfg["systems"]["tersetalk"] = {"variants": {"v": settings}}
    cfg.update(ablations={}, calibration={})
    cfg["evaluation"]["comparisons"] = []
    validate_config(cfg)
    return run_spec(cfg, "hotpotqa", "tersetalk", "v")


def structured_model(need=()):
    """Worker's first reply asks for ``need``; then it answers. The Critic asks for a revision."""

    def respond(messages, gen, schema):
        if schema is None:
            raise AssertionError("schema mode must not make free calls here")
        if schema.__name__ == "CriticReply":
            return json.dumps({"verdict": "R", "note": "check the year"})
        if need and len(messages) == 2:  # system prompt + the brief: the first reply
            return json.dumps({"plan": [], "need": list(need), "answer": "unsure"})
        return json.dumps({"plan": ["look up"], "need": [], "answer": "Paris"})

    return respond


def test_schema_mode_messages_are_canonical_lines_and_compliance_counted(base_config, tmp_path,
                                                                          hotpot):  # fmt: skip
    spec = spec_for(base_config, tmp_path, caps="aggressive", deref="conditional")
    df = run(spec, hotpot, tmp_path / "o.parquet", client=ScriptedClient(structured_model()),
             progress=False)  # fmt: skip
    assert df["error"].isna().all()
    for raw in df["messages"]:
        for m in json.loads(raw):
            lines = parse_strict(m["content"])  # every message is valid strict JSONL
            assert lines
    assert (df["prediction"] == "Paris").all()
    assert (df["revisions"] == 1).all() and (df["verdict"] == "revise").all()
    # worker, critic, revised worker: three schema calls, all valid at first try
    assert (df["c_compliance_calls"] == 3).all() and (df["c_compliance_first_try"] == 3).all()
    assert (df["c_deref_derefs"] == 0).all()


def test_conditional_deref_only_when_asked(base_config, tmp_path, hotpot):
    spec = spec_for(base_config, tmp_path, caps={"f": 3, "q": 200}, deref="conditional")
    df = run(spec, hotpot, tmp_path / "o.parquet",
             client=ScriptedClient(structured_model(need=["M#1"])), progress=False)  # fmt: skip
    assert (df["c_overflow_f"] > 0).all()
    assert (df["c_deref_derefs"] == 1).all() and (df["c_deref_reinjected_tokens"] > 0).all()
    kinds = [m["kind"] for m in json.loads(df["messages"].iloc[0])]
    assert kinds.count("deref") == 1
    never = spec_for(base_config, tmp_path, caps={"f": 3, "q": 200}, deref="never")
    df = run(never, hotpot, tmp_path / "n.parquet",
             client=ScriptedClient(structured_model(need=["M#1"])), progress=False)  # fmt: skip
    assert (df["c_deref_derefs"] == 0).all()


def test_always_deref_reinjects_every_overflow(base_config, tmp_path, hotpot):
    spec = spec_for(base_config, tmp_path, caps={"f": 3, "q": 200}, deref="always")
    df = run(spec, hotpot, tmp_path / "o.parquet", client=ScriptedClient(structured_model()),
             progress=False)  # fmt: skip
    assert (df["c_deref_derefs"] == df["c_overflow_total"]).all()


def test_posthoc_mode_repairs_and_falls_back(base_config, tmp_path, hotpot):
    def messy(messages):
        if messages[0]["content"].startswith("You are the Critic"):
            return 'Sure!\n```\n["r","C"]\n{"verdict": "accept"}\n```'
        return "I think the answer is Paris."  # no structure at all

    spec = spec_for(base_config, tmp_path, enforcement="posthoc")
    df = run(spec, hotpot, tmp_path / "o.parquet", client=ScriptedClient(messy), progress=False)
    assert df["error"].isna().all()
    assert (df["c_compliance_fallback"] == 1).all()  # the worker's prose
    assert (df["c_compliance_repaired"] == 1).all()  # the critic's fenced, mixed reply
    assert (df["c_repairs"] > 0).all()
    assert (df["verdict"] == "accept").all()


def test_schema_failure_falls_back_to_lenient_free_generation(base_config, tmp_path, hotpot):
    def never_valid(messages, gen, schema):
        if schema is not None:
            return "not json"
        return '["r","W"]\n["x","answer","Paris"]'

    spec = spec_for(base_config, tmp_path)
    cfg_client = ScriptedClient(never_valid, max_retries=1)
    df = run(spec, hotpot, tmp_path / "o.parquet", client=cfg_client, progress=False)
    assert df["error"].isna().all() and (df["prediction"] == "Paris").all()
    assert (df["c_compliance_first_try"] == 0).all()
    assert (df["c_compliance_fallback"] == df["c_compliance_calls"]).all()


def test_bad_variant_setting_names_the_key(base_config):
    cfg = copy.deepcopy(base_config)
    cfg.update(ablations={}, calibration={})
    cfg["evaluation"]["comparisons"] = []
    cfg["systems"]["tersetalk"] = {"variants": {"x": {"deref": "sometimes"}}}
    with pytest.raises(ConfigError, match=r"systems\.tersetalk\.variants\.x\.deref"):
        validate_config(cfg)
    cfg["systems"]["tersetalk"] = {"variants": {"x": {}}}
    cfg["systems"]["freeform"] = {"variants": {"y": {"caps": "baseline"}}}
    with pytest.raises(ConfigError, match=r"systems\.freeform\.variants\.y"):
        validate_config(cfg)
