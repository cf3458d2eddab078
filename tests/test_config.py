import copy

import pytest
import yaml

from tersetalk.config import ConfigError, load_config, run_spec, spec_hash, validate_config


def test_default_and_paper_configs_validate(repo):
    cfg = load_config(repo / "config" / "config.yaml")
    assert cfg["models"]["backend"] == "llamacpp"
    paper = load_config(repo / "config" / "config.yaml", repo / "config" / "paper.yaml")
    assert paper["models"]["backend"] == "ollama" and paper["n_eval"] == 500


@pytest.mark.parametrize(
    "path, value, key",
    [
        (("models", "backend"), "gpt5", "models.backend"),
        (("n_eval",), 0, "n_eval"),
        (("generation", "temperature"), -1, "generation.temperature"),
        (("hotpotqa", "facts"), "all", "hotpotqa.facts"),
        (("tasks",), ["hotpotqa", "mmlu"], "tasks.1"),
    ],
)
def test_wrong_value_names_the_key(base_config, path, value, key):
    cfg = copy.deepcopy(base_config)
    node = cfg
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=rf"config key '{key}'"):
        validate_config(cfg)


def test_unknown_key_and_unknown_system(base_config):
    cfg = copy.deepcopy(base_config)
    cfg["modles"] = {}
    with pytest.raises(ConfigError, match="modles"):
        validate_config(cfg)
    cfg = copy.deepcopy(base_config)
    cfg["systems"]["telepathy"] = {"variants": {"default": {}}}
    with pytest.raises(ConfigError, match="systems.telepathy"):
        validate_config(cfg)


def test_defaults_filled(repo, tmp_path):
    raw = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    del raw["generation"]["critic_max_tokens"]
    cfg = validate_config(raw)
    assert cfg["generation"]["critic_max_tokens"] == 64


def test_run_spec_changes_only_with_what_the_run_depends_on(base_config):
    spec = run_spec(base_config, "gsm8k", "freeform", "default")
    cfg = copy.deepcopy(base_config)
    cfg["n_eval"] = 999  # the sample changes, not the run's own settings
    assert spec_hash(run_spec(cfg, "gsm8k", "freeform", "default")) == spec_hash(spec)
    cfg["generation"]["max_tokens"] = 10
    assert spec_hash(run_spec(cfg, "gsm8k", "freeform", "default")) != spec_hash(spec)
    with pytest.raises(ConfigError, match="variants.nope"):
        run_spec(base_config, "gsm8k", "freeform", "nope")


def test_calibration_points_are_explicit_specs(base_config):
    from tersetalk.config import calibration_points, calibration_spec

    points = calibration_points(base_config, "tersetalk")
    assert len(points) == 8 and points["g00"] == {"caps": "aggressive", "deref": "conditional"}
    spec = calibration_spec(base_config, "hotpotqa", "tersetalk", "g05")
    assert spec["variant"] == "g05" and "calibration_file" not in spec
    assert spec["variant_settings"]["caps"] == "relaxed"
    calibrated = run_spec(base_config, "hotpotqa", "tersetalk", "default")
    assert calibrated["calibration_file"] == "results/calibration/hotpotqa.yaml"


def test_calibration_reference_defaults_to_the_evaluation_reference(base_config):
    from tersetalk.config import calibration_reference, calibration_reference_runs

    cfg = copy.deepcopy(base_config)
    for spec in cfg["calibration"].values():
        spec.pop("reference", None)
    assert calibration_reference(cfg, "hybrid") == "freeform/default"
    assert calibration_reference_runs(cfg) == {}
    cfg["calibration"]["hybrid"]["reference"] = "llmlingua/rate_05"
    validate_config(cfg)
    assert calibration_reference(cfg, "hybrid") == "llmlingua/rate_05"
    assert calibration_reference(cfg, "tersetalk") == "freeform/default"
    assert calibration_reference_runs(cfg) == {"hybrid": "llmlingua/rate_05"}


@pytest.mark.parametrize(
    "reference, message",
    [
        ("llmlingua", r"does not match"),  # not system/variant (schema)
        ("llmlingua/nope", r"'llmlingua/nope' is not an enabled system/variant"),
        ("telepathy/default", r"'telepathy/default' is not an enabled system/variant"),
        ("tersetalk/default", r"takes calibrated settings"),
        ("llmlingua/default", r"takes calibrated settings"),
        ("llmlingua/g00", r"has the name of one of its calibration grid points"),
    ],
)
def test_calibration_reference_must_be_a_runnable_system_variant(base_config, reference, message):
    cfg = copy.deepcopy(base_config)
    cfg["systems"]["llmlingua"]["variants"]["g00"] = {"rate": 0.4}
    cfg["calibration"]["hybrid"]["reference"] = reference
    with pytest.raises(ConfigError, match=r"config key 'calibration\.hybrid\.reference'(.|\n)*"
                       + message):  # fmt: skip
        validate_config(cfg)


def test_calibration_reference_of_a_disabled_system_is_rejected(base_config):
    cfg = copy.deepcopy(base_config)
    cfg["systems"]["msp"]["enabled"] = False
    cfg["calibration"]["hybrid"]["reference"] = "msp/default"
    with pytest.raises(ConfigError, match="not an enabled system/variant"):
        validate_config(cfg)
