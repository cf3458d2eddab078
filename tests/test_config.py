import copy

import pytest
import yaml

from tersetalk.config import (
    ConfigError,
    load_config,
    merge,
    run_spec,
    spec_hash,
    validate_config,
)


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
        (("tasks",), ["hotpotqa", "mmlu"], "tasks"),
        (("topology", "tasks"), ["boolq", "mmlu"], "topology.tasks"),
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


def test_an_unknown_task_names_the_registered_ones(base_config):
    cfg = copy.deepcopy(base_config)
    cfg["systems"]["freeform"]["tasks"] = ["gsm8k", "mmlu"]
    with pytest.raises(ConfigError, match=r"systems.freeform.tasks': unknown task\(s\) \['mmlu'\]"):
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
    assert (
        calibrated["calibration_file"] == "results/smollm2-135m-instruct/calibration/hotpotqa.yaml"
    )


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


def test_the_topology_study_has_its_own_tasks_examples_and_systems(repo):
    from tersetalk.config import topology_config

    cfg = load_config(repo / "config" / "config.yaml")
    study = topology_config(cfg)
    assert study["tasks"] == ["boolq", "commonsenseqa", "socialiqa", "hotpotqa", "gsm8k",
                              "humaneval"]  # fmt: skip
    assert study["n_eval"] == 5 and set(study["systems"]) == {
        "topology_tersetalk",
        "topology_freeform",
    }
    # the main study is untouched, and a topology run's spec is the study's
    assert cfg["tasks"] == ["hotpotqa", "gsm8k", "toolqa"] and cfg["n_eval"] == 10
    assert "topology_tersetalk" not in cfg["systems"]
    spec = run_spec(study, "boolq", "topology_tersetalk", "theta_5")
    assert spec["variant_settings"]["theta"] == 5 and spec["seed"] == cfg["seed"]
    paper = load_config(repo / "config" / "config.yaml", repo / "config" / "paper.yaml")
    assert topology_config(paper)["n_eval"] == 100
    assert set(topology_config(paper)["systems"]) == set(study["systems"])


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t["systems"].update(tersetalk={"variants": {"d": {}}}), "not a routed system"),
        (lambda t: t["systems"].update(nosuch={"variants": {"d": {}}}), "unknown system"),
        (lambda t: t.update(tasks=["toolqa"]), "no topology label"),
        (lambda t: t["systems"]["topology_tersetalk"]["variants"].update(x={"thetaa": 3}),
         "topology_tersetalk"),
        (lambda t: t.update(n_eval=0), "topology.n_eval"),
    ],
)  # fmt: skip
def test_a_wrong_topology_section_names_the_key(base_config, edit, message):
    cfg = copy.deepcopy(base_config)
    edit(cfg["topology"])
    with pytest.raises(ConfigError, match=message):
        validate_config(cfg)


def test_no_topology_systems_is_a_clear_error_only_when_the_study_is_asked_for(base_config):
    from tersetalk.config import topology_config

    cfg = copy.deepcopy(base_config)
    del cfg["topology"]
    validate_config(cfg)  # the main study does not need the section
    with pytest.raises(ConfigError, match="topology.systems"):
        topology_config(cfg)


def test_schema_default_reads_the_one_place_defaults_are_written(base_config):
    from tersetalk.config import schema_default

    cfg = copy.deepcopy(base_config)
    del cfg["bench"]["repeats"]
    assert validate_config(cfg)["bench"]["repeats"] == schema_default("bench", "repeats")
    assert schema_default("calibration", "*", "objective") == "fewest_tokens_within_margin"
    with pytest.raises(KeyError):
        schema_default("bench", "no_such_key")


def test_a_fitted_variant_reads_its_own_models_router(base_config):
    """``{results}`` in weights_from is the configured model's folder, so switching models
    never reads another model's fitted router."""
    from tersetalk.config import topology_config

    cfg = merge(base_config, {"models": {"key": "other-model"}})
    study = topology_config(validate_config(cfg))
    fitted = study["systems"]["topology_tersetalk"]["variants"]["fitted"]
    assert fitted["weights_from"] == "results/other-model/topology/router.yaml"
    assert (
        "{results}"
        in cfg["topology"]["systems"]["topology_tersetalk"]["variants"]["fitted"]["weights_from"]
    )  # the config itself is left as written
