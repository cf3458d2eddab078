"""One YAML-to-Pydantic loader for the workflow, mediator and MSP configs.

The mediator must read a file in the exact layout of its design (the
"Mediated Minimal-Signaling", section "Configuration Schema"), and its values must
change what runs, not merely validate.
"""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel, ConfigDict, Field

from tersetalk.core.configio import describe_errors, load_model, read_yaml
from tersetalk.mediator import (
    MediatorConfigError,
    RuleBasedExtractor,
    build_mediator,
    load_mediator_config,
    load_mediator_file,
    parse_mediator_config,
    read_trace,
)
from tersetalk.mediator.compressors import CompressorUnavailableError, make_compressor
from tersetalk.msp import MSPConfigError, load_msp_config, parse_msp_config

#: verbatim from the mediator design (its two blank lines hold two spaces: \x20\x20)
DESIGN_YAML = """\
mediator:
  compression:
    enabled: true
    token_budget: 50
    max_recursion: 5
    model: "sshleifer/distilbart-cnn-12-6"
\x20\x20
  semantic_keys:
    enabled: true
    schema_version: "1.0"
    extractor: "placeholder"  # or "llm"
\x20\x20
  judge:
    enabled: false

logging:
  level: "INFO"
  trace_dir: "traces"

dashboard:
  enabled: true
  host: "localhost"
  port: 8080
  ws_port: 8081
"""

MESSAGE = (
    "Please compare the March sales of stores 12, 17 and 21 with February and say which grew "
    "most. The report must stay under one page and must not name customers. The February "
    "figures are in the shared folder already. Our goal is to place the extra April staff."
)


@pytest.fixture
def design_file(tmp_path):
    path = tmp_path / "mediator.yaml"
    path.write_text(DESIGN_YAML)
    return path


def test_the_design_documents_layout_loads(design_file):
    file = load_mediator_file(design_file)
    c = file.mediator.compression
    assert (c.enabled, c.token_budget, c.recursion_limit) == (True, 50, 5)
    assert c.compressor == "distilbart" and c.distilbart_model == "sshleifer/distilbart-cnn-12-6"
    k = file.mediator.semantic_keys
    assert (k.enabled, k.schema_version, k.extractor) == (True, "1.0", "rule")
    assert not file.mediator.judge.enabled
    assert file.mediator.trace.dir == "traces"  # logging.trace_dir
    assert (file.logging.level, file.logging.trace_dir) == ("INFO", "traces")
    d = file.dashboard
    assert (d.enabled, d.host, d.port, d.ws_port) == (True, "localhost", 8080, 8081)
    assert load_mediator_config(design_file) == file.mediator


def test_compression_model_picks_that_distilbart_checkpoint(design_file, monkeypatch):
    import tersetalk.mediator.compressors as compressors

    asked = []

    def resolve(path, model_name):
        asked.append((path, model_name))
        raise CompressorUnavailableError(f"not here: {model_name}")

    monkeypatch.setattr(compressors, "resolve_distilbart", resolve)
    cfg = load_mediator_config(design_file)
    with pytest.raises(CompressorUnavailableError, match="distilbart-cnn-12-6"):
        make_compressor(cfg.compression)
    assert asked == [(None, "sshleifer/distilbart-cnn-12-6")]


def test_the_design_files_values_take_effect(design_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_mediator_config(design_file)
    data = cfg.model_dump()
    data["compression"]["compressor"] = "truncate"  # no DistilBART weights offline
    mediator = build_mediator(parse_mediator_config(data))
    assert isinstance(mediator.extractor, RuleBasedExtractor)  # extractor: placeholder
    assert mediator.judge is None  # judge.enabled: false
    res = mediator.process(MESSAGE, "m-1")
    assert res.ok and res.compression.final_tokens <= 50  # token_budget: 50
    assert res.compression.passes <= 5  # max_recursion: 5
    records = read_trace(tmp_path / "traces" / "mediator_trace.jsonl")  # logging.trace_dir
    assert [r["message_id"] for r in records] == ["m-1"]


def test_demo_applies_the_files_logging_level_and_trace_dir(tmp_path, monkeypatch, capsys):
    from tersetalk.cli import main

    path = tmp_path / "m.yaml"
    path.write_text(DESIGN_YAML.replace('level: "INFO"', 'level: "debug"'))
    monkeypatch.chdir(tmp_path)
    logger = logging.getLogger("tersetalk.mediator")
    before = logger.level
    try:
        rc = main(["mediator", "demo", "--mediator-config", str(path), "--compressor", "truncate"])
        assert rc == 0 and logger.level == logging.DEBUG
    finally:
        logger.setLevel(before)
    out = capsys.readouterr().out
    assert "budget 50" in out and "at most 5 passes" in out and "rule extractor" in out
    assert "== Judge" not in out
    assert len(read_trace(tmp_path / "traces" / "mediator_trace.jsonl")) == 1


def test_an_explicit_trace_dir_wins_over_logging_trace_dir():
    cfg = parse_mediator_config(
        {"mediator": {"trace": {"dir": "here"}}, "logging": {"trace_dir": "there"}}
    )
    assert cfg.trace.dir == "here"
    assert parse_mediator_config({"mediator": None, "logging": None}) == parse_mediator_config({})


@pytest.mark.parametrize(
    "data, words",
    [
        ({"compression": {"model": "x", "compressor": "model"}}, "set compressor: distilbart"),
        ({"compression": {"model": "x", "distilbart_model": "y"}}, "keep one"),
        ({"mediator": {}, "logging": {"level": "LOUD"}}, "'logging.level'"),
        ({"mediator": {}, "dashboard": {"port": 0}}, "fix: a TCP port number"),
        ({"mediator": {}, "dashbord": {}}, "'dashbord': Extra inputs are not permitted"),
        ({"mediator": {"compression": {"token_budget": 0}}}, "mediator.compression.token_budget"),
        ({"semantic_keys": {"extractor": "magic"}}, "fix: rule (the design's placeholder)"),
    ],
)
def test_design_layout_errors_name_the_key_and_the_fix(data, words):
    with pytest.raises(MediatorConfigError, match="invalid mediator configuration") as err:
        parse_mediator_config(data)
    assert words in str(err.value)


def test_mediator_file_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(MediatorConfigError, match="expected a mapping with a 'mediator:' block"):
        load_mediator_config(path)


# ---- MSP and the workflow config keep their words --------------------------------------


def test_msp_config_errors(tmp_path):
    path = tmp_path / "msp.yaml"
    with pytest.raises(MSPConfigError, match="MSP config file .* not found"):
        load_msp_config(path)
    path.write_text("msp: [1, 2\n")
    with pytest.raises(MSPConfigError, match="MSP config file .* is not valid YAML"):
        load_msp_config(path)
    path.write_text("just text\n")
    with pytest.raises(MSPConfigError, match="expected a mapping with an 'msp:' block, got str"):
        load_msp_config(path)
    path.write_text("msp:\n  wire: fancy\n  stlye: casual\n")
    with pytest.raises(MSPConfigError, match="invalid MSP configuration") as err:
        load_msp_config(path)
    msg = str(err.value)
    assert f"{path} key 'wire'" in msg and "(got 'fancy')" in msg
    assert "'stlye': Extra inputs" in msg and "(see config/msp.example.yaml)" in msg
    path.write_text("msp:\n  wire: traced\n")
    assert load_msp_config(path).wire == "traced" and parse_msp_config(None).wire == "core"


def test_workflow_config_file_errors(tmp_path):
    from tersetalk.pipeline.config import ConfigError, load_config

    path = tmp_path / "c.yaml"
    with pytest.raises(ConfigError, match="config file .* not found"):
        load_config(path)
    path.write_text("seed: [1\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_config(path)
    path.write_text("- seed\n")
    with pytest.raises(ConfigError, match="expected a mapping of settings, got list"):
        load_config(path)


# ---- the loader itself ----------------------------------------------------------------


class _Err(ValueError):
    pass


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")

    size: int = Field(1, gt=0)
    name: str = "x"


def test_read_yaml_empty_file_is_an_empty_mapping(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text("# nothing but a comment\n")
    assert read_yaml(path, what="thing file", error=_Err) == {}


def test_load_model_lists_every_problem_with_fixes():
    with pytest.raises(_Err) as err:
        load_model({"size": 0, "nmae": "y"}, _Model, where="f.yaml", error=_Err,
                   title="invalid thing", fixes={"size": "a positive number"},
                   example="thing.example.yaml")  # fmt: skip
    assert str(err.value).splitlines() == [
        "invalid thing:",
        "  f.yaml key 'size': Input should be greater than 0 (got 0); fix: a positive number",
        "  f.yaml key 'nmae': Extra inputs are not permitted (got 'y'); remove or rename it "
        "(see thing.example.yaml)",
    ]
    assert load_model(None, _Model, where="f", error=_Err, title="t") == _Model()


def test_describe_errors_of_a_missing_key():
    from pydantic import ValidationError

    class Needs(BaseModel):
        size: int

    with pytest.raises(ValidationError) as err:
        Needs.model_validate({})
    assert describe_errors(err.value, "w") == ["w key 'size': Field required"]
