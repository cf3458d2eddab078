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
    assert len(points) == 6 and points["g00"] == {"caps": "aggressive", "deref": "conditional"}
    spec = calibration_spec(base_config, "hotpotqa", "tersetalk", "g05")
    assert spec["variant"] == "g05" and "calibration_file" not in spec
    assert spec["variant_settings"]["caps"] == "relaxed"
    calibrated = run_spec(base_config, "hotpotqa", "tersetalk", "default")
    assert calibrated["calibration_file"] == "results/calibration/hotpotqa.yaml"
