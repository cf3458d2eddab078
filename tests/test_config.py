import copy
import math
import re

import pytest
import yaml

from tersetalk.pipeline.config import (
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
    from tersetalk.pipeline.config import calibration_points, calibration_spec

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
    from tersetalk.pipeline.config import calibration_reference, calibration_reference_runs

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
    from tersetalk.pipeline.config import topology_config

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
    from tersetalk.pipeline.config import topology_config

    cfg = copy.deepcopy(base_config)
    del cfg["topology"]
    validate_config(cfg)  # the main study does not need the section
    with pytest.raises(ConfigError, match="topology.systems"):
        topology_config(cfg)


def test_schema_default_reads_the_one_place_defaults_are_written(base_config):
    from tersetalk.pipeline.config import schema_default

    cfg = copy.deepcopy(base_config)
    del cfg["bench"]["repeats"]
    assert validate_config(cfg)["bench"]["repeats"] == schema_default("bench", "repeats")
    assert schema_default("calibration", "*", "objective") == "fewest_tokens_within_margin"
    with pytest.raises(KeyError):
        schema_default("bench", "no_such_key")


def test_a_fitted_variant_reads_its_own_models_router(base_config):
    """``{results}`` in weights_from is the configured model's folder, so switching models
    never reads another model's fitted router."""
    from tersetalk.pipeline.config import topology_config

    cfg = merge(base_config, {"models": {"key": "other-model"}})
    study = topology_config(validate_config(cfg))
    fitted = study["systems"]["topology_tersetalk"]["variants"]["fitted"]
    assert fitted["weights_from"] == "results/other-model/topology/router.yaml"
    assert (
        "{results}"
        in cfg["topology"]["systems"]["topology_tersetalk"]["variants"]["fitted"]["weights_from"]
    )  # the config itself is left as written


# -- non-finite numbers and hostile YAML ---------------------------------------------------
@pytest.mark.parametrize(
    "overlay, key",
    [
        ("generation:\n  temperature: .nan\n", "generation.temperature"),
        ("models:\n  timeout_s: .inf\n", "models.timeout_s"),
        ("evaluation:\n  margin: -.inf\n", "evaluation.margin"),
        ("calibration_n: .NaN\n", "calibration_n"),
        ("evaluation:\n  comparisons: [[a, .inf]]\n", "evaluation.comparisons.0.1"),
    ],
)
def test_a_non_finite_number_anywhere_is_refused_naming_its_key(repo, tmp_path, overlay, key):
    layer = tmp_path / "layer.yaml"
    layer.write_text(overlay)
    with pytest.raises(ConfigError, match=rf"config key '{re.escape(key)}': not a finite number"):
        load_config(repo / "config" / "config.yaml", layer)


def test_non_finite_keys_walks_lists_and_survives_a_value_that_contains_itself():
    from tersetalk.pipeline.config import non_finite_keys

    loop: list = [1.0]
    loop.append(loop)
    value = {"a": {"b": [0.5, math.inf]}, "c": math.nan, "d": loop, "e": "nan", "f": 1e308}
    assert non_finite_keys(value) == ["a.b.1", "c"]
    assert non_finite_keys(-math.inf) == ["<top level>"]


def billion_laughs(levels: int = 9) -> str:
    """Each alias level repeats the previous one nine times: 9**levels values from ~1 KB."""
    lines = ["l0: &l0 [ha, ha, ha, ha, ha, ha, ha, ha, ha]"]
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def chained_depth(links: int = 30, each: int = 90) -> str:
    """Each anchor nests ``each`` levels around an alias of the one before: no line is
    deeper than 91, but the values nest ``links * each`` levels deep once read."""
    lines = []
    for i in range(links):
        inner = f"*a{i - 1}" if i else "x"
        lines.append(f"a{i}: &a{i} " + "[" * each + inner + "]" * each)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "text, said",
    [
        (billion_laughs(), "aliases (*name) expand to more than 100000 values"),
        ("n_eval: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested deeper than 100 levels"),
        ("a: " + "{b: " * 20_000 + "1" + "}" * 20_000 + "\n", "nested deeper than 100 levels"),
        ("a: &x [1, *x]\n", "alias *x (line 1) is inside the value it names"),
        (chained_depth(), "nested deeper than 100 levels"),
    ],
    ids=["billion-laughs", "deep-list", "deep-map", "self-containing", "deep-by-aliases"],
)
def test_a_hostile_config_file_is_refused_naming_the_file(repo, tmp_path, text, said):
    layer = tmp_path / "hostile.yaml"
    layer.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(repo / "config" / "config.yaml", layer)
    assert str(info.value).startswith(f"config file {layer}: ") and said in str(info.value)


def test_aliases_and_merge_keys_of_a_hand_written_config_still_load(repo, tmp_path):
    layer = tmp_path / "aliases.yaml"
    layer.write_text(
        "generation:\n  max_tokens: 128\nevaluation:\n  margin: &m 0.05\n  alpha: *m\n"
    )
    cfg = load_config(repo / "config" / "config.yaml", layer)
    assert cfg["generation"]["max_tokens"] == 128 and cfg["evaluation"]["alpha"] == 0.05
    from tersetalk.core.io import load_yaml_text

    doc = load_yaml_text("a: &a {x: 1}\nb: {<<: *a, y: 2}\nc: [*a, *a]\n", "test")
    assert doc == {"a": {"x": 1}, "b": {"x": 1, "y": 2}, "c": [{"x": 1}, {"x": 1}]}
    big = load_yaml_text(billion_laughs(4), "test")  # 9**5 = 59,049 values: under the bound
    assert big["l4"][0][0][0][0] == ["ha"] * 9


def test_a_config_file_that_is_not_utf8_is_refused_naming_the_file(repo, tmp_path):
    layer = tmp_path / "latin1.yaml"
    layer.write_bytes("n_eval: 3 # caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=rf"config file {re.escape(str(layer))} is not UTF-8"):
        load_config(repo / "config" / "config.yaml", layer)
