"""Model sensitivity: config/models/ files, sensitivity.models resolution, the comparison,
and the multi-model DAG on two aliases of the embedded model (real Snakemake, real model)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_support import MODEL_THREADS, copy_workflow

from tersetalk.core.paths import model_key
from tersetalk.pipeline.config import (
    ConfigError,
    merge,
    run_spec,
    sensitivity_models,
    validate_config,
)
from tersetalk.pipeline.sensitivity import comparison_table

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
REPO = Path(__file__).resolve().parents[1]
MODEL_FILES = sorted((REPO / "config" / "models").glob("*.yaml"))

#: what the design names, and where each is served
EXPECTED = {
    "llama3.1-8b": ("ollama", "llama3.1:8b"),
    "qwen2.5-14b": ("ollama", "qwen2.5:14b"),
    "mistral-7b": ("ollama", "mistral:7b-instruct"),
    "openai_compat": ("openai", None),
    "smollm2-135m": ("llamacpp", "smollm2-135m-instruct"),
    # hosted and served models (tested against loopback servers in test_hosted_api.py)
    "openai": ("openai", "gpt-4o-mini"),
    "llamacpp-server": ("openai", "local-gguf"),
    "vllm": ("openai", "Qwen/Qwen2.5-7B-Instruct"),
}


def test_every_seed_model_has_a_file():
    assert sorted(p.stem for p in MODEL_FILES) == sorted(EXPECTED)


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_a_model_file_holds_only_a_models_section_that_validates(path, base_config):
    doc = yaml.safe_load(path.read_text())
    assert list(doc) == ["models"]
    cfg = validate_config(merge(base_config, doc))
    backend, model = EXPECTED[path.stem]
    assert cfg["models"]["backend"] == backend
    if model is not None:
        assert cfg["models"]["model"] == model
    if backend != "llamacpp":
        assert cfg["models"]["base_url"].startswith("http")


#: one model file per backend: the DAG a dry run lists depends on the backend, not on the
#: model (.ci/run dry-runs every file)
ONE_PER_BACKEND = sorted(
    {EXPECTED[p.stem][0]: p for p in reversed(MODEL_FILES)}.values(), key=lambda p: p.stem
)


@pytest.mark.parametrize("path", ONE_PER_BACKEND, ids=lambda p: p.stem)
def test_dry_run_with_a_model_file_of_each_backend(repo, path):
    res = subprocess.run(
        SNAKEMAKE + ["-n", "--cores", "2", "--configfile", str(path.relative_to(repo))],
        cwd=repo, capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "run_system" in res.stdout + res.stderr
    assert "model_run_system" not in res.stdout + res.stderr  # no study unless listed


def test_dry_run_with_every_model_listed(repo, tmp_path):
    cfg = tmp_path / "sensitivity.yaml"
    cfg.write_text(yaml.safe_dump({"sensitivity": {"models": sorted(EXPECTED)}}))
    res = subprocess.run(
        SNAKEMAKE + ["-n", "--cores", "2", "sensitivity", "--configfile", str(cfg)],
        cwd=repo, capture_output=True, text=True,
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    # each model file names its folder (models.key), else its model's name does; the
    # configured model (smollm2-135m's) is compared too, and run once
    keys = {model_key(yaml.safe_load(path.read_text())["models"]) for path in MODEL_FILES}
    assert {"llama3.1-8b", "Qwen-Qwen2.5-7B-Instruct", "smollm2-135m-instruct"} <= keys
    for key in keys:
        assert f"results/{key}/summary.parquet" in out
    assert "figures/compare/models.png" in out


# --- resolving sensitivity.models -----------------------------------------------------


def _with_models(base: dict, entries: list) -> dict:
    return merge(base, {"sensitivity": {"models": entries, "dir": str(REPO / "config/models")}})


def test_a_listed_file_and_the_same_file_as_configfile_give_the_same_settings(base_config):
    doc = yaml.safe_load((REPO / "config/models/qwen2.5-14b.yaml").read_text())
    alone = validate_config(merge(base_config, doc))["models"]
    listed = sensitivity_models(_with_models(base_config, ["qwen2.5-14b"]))
    assert listed == {"qwen2.5-14b": alone}


def test_inline_entries_override_the_default_model(base_config):
    models = sensitivity_models(
        _with_models(base_config, [{"name": "a"}, {"name": "b", "models": {"n_ctx": 2048}}])
    )
    # an inline entry keeps its results under its name
    assert models["a"] == {**base_config["models"], "key": "a"}
    assert models["b"] == {**base_config["models"], "n_ctx": 2048, "key": "b"}


def test_results_keys_are_readable_and_path_safe():
    assert model_key({"model": "smollm2-135m-instruct"}) == "smollm2-135m-instruct"
    assert model_key({"model": "llama3.1:8b"}) == "llama3.1-8b"
    assert model_key({"model": "Qwen/Qwen2.5-7B-Instruct"}) == "Qwen-Qwen2.5-7B-Instruct"
    assert model_key({"model": None, "model_path": "/m/tiny-q4.gguf"}) == "tiny-q4"
    assert model_key({"model": "m", "key": "run-2"}) == "run-2"
    with pytest.raises(ValueError, match="shared results folder"):
        model_key({"model": "cache"})
    with pytest.raises(ValueError, match="models.key"):
        model_key({"model": "m", "key": "../up"})
    with pytest.raises(ValueError, match="no letter or digit"):
        model_key({"model": ".."})
    assert len(model_key({"model": "a" * 300})) == 80  # a folder name, not a file-system error
    with pytest.raises(ValueError, match="at most 80"):
        model_key({"model": "m", "key": "k" * 81})


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([{"name": "smollm2-135m-instruct", "models": {"n_ctx": 2048}}],
         "the configured model's folder"),
        ([{"name": "a", "models": {"key": "k"}}, {"name": "b", "models": {"key": "k"}}],
         "both keep their results in results/k/"),
    ],
)  # fmt: skip
def test_two_models_never_share_a_results_folder(base_config, entries, message):
    with pytest.raises(ConfigError, match=message):
        sensitivity_models(_with_models(base_config, entries))


def test_listing_the_configured_model_runs_it_once(base_config):
    models = sensitivity_models(_with_models(base_config, ["smollm2-135m", "llama3.1-8b"]))
    assert list(models) == ["llama3.1-8b"]


def test_a_results_key_naming_a_shared_folder_is_a_config_error(base_config):
    with pytest.raises(ConfigError, match="config key 'models'.*shared results folder"):
        validate_config(merge(base_config, {"models": {"key": "samples"}}))


def test_a_model_run_spec_names_its_model_and_its_own_calibration(base_config):
    cfg = _with_models(base_config, ["llama3.1-8b"])
    spec = run_spec(cfg, "gsm8k", "tersetalk", "default", "llama3.1-8b")
    assert spec["models"]["model"] == "llama3.1:8b"
    assert spec["sensitivity_model"] == "llama3.1-8b"
    assert spec["calibration_file"] == "results/llama3.1-8b/calibration/gsm8k.yaml"
    default = run_spec(cfg, "gsm8k", "tersetalk", "default")
    assert "sensitivity_model" not in default
    assert default["calibration_file"] == "results/smollm2-135m-instruct/calibration/gsm8k.yaml"


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["no-such-model"], "has no file"),
        ([{"name": "a"}, {"name": "a"}], "listed twice"),
        ([{"name": "a", "models": {"backend": "gpt5"}}], "(?s)model 'a'.*models.backend"),
    ],
)
def test_a_wrong_entry_is_a_config_error_naming_it(base_config, entries, message):
    with pytest.raises(ConfigError, match=message):
        sensitivity_models(_with_models(base_config, entries))


def test_a_model_file_with_other_sections_is_refused(base_config, tmp_path):
    (tmp_path / "m.yaml").write_text("models: {backend: llamacpp}\nn_eval: 5\n")
    cfg = merge(base_config, {"sensitivity": {"models": ["m"], "dir": str(tmp_path)}})
    with pytest.raises(ConfigError, match="must hold only a 'models:' mapping"):
        sensitivity_models(cfg)


def test_an_entry_that_is_neither_name_nor_mapping_is_refused(base_config):
    with pytest.raises(ConfigError, match="sensitivity.models"):
        validate_config(merge(base_config, {"sensitivity": {"models": ["../etc/passwd"]}}))


# --- the comparison table -------------------------------------------------------------


def _summary(acc: float, red: float) -> pd.DataFrame:
    return pd.DataFrame(
        {"task": ["gsm8k", "gsm8k"], "system": ["freeform", "tersetalk"],
         "variant": ["default", "default"], "accuracy": [0.5, acc],
         "token_reduction_mean": [0.0, red], "n": [4, 4], "n_errors": [0, 0],
         "backend": ["ollama", "ollama"], "model": ["m", "m"]}
    )  # fmt: skip


def test_comparison_table_has_one_row_per_model_and_run_in_model_order():
    table = comparison_table(
        {"z": _summary(0.25, 0.3), "a": _summary(0.5, 0.1)}, "freeform/default"
    )
    assert table["model_name"].tolist() == ["z", "a", "z", "a"]
    assert table["run"].tolist() == ["freeform/default"] * 2 + ["tersetalk/default"] * 2
    assert table["token_reduction"].tolist() == [0.0, 0.0, 0.3, 0.1]
    assert table["is_reference"].tolist() == [True, True, False, False]


def test_comparison_refuses_a_summary_without_token_reduction():
    with pytest.raises(ValueError, match="token_reduction_mean"):
        comparison_table({"a": _summary(0.5, 0.1).drop(columns="token_reduction_mean")}, "x")


def test_compare_reads_the_other_models_summaries_found_when_it_runs(tmp_path):
    from tersetalk.cli import main

    results = tmp_path / "results"
    for key, acc in (("mine", 0.5), ("earlier", 0.25), ("no-summary-yet", 0.0)):
        (results / key / "runs").mkdir(parents=True)
        if key != "no-summary-yet":
            _summary(acc, 0.2).to_parquet(results / key / "summary.parquet")
    (results / "samples").mkdir()  # a shared folder: never a model
    table = tmp_path / "models.csv"
    assert main(["models", "compare", "--summary", f"mine={results / 'mine/summary.parquet'}",
                 "--others-in", str(results), "--reference", "freeform/default",
                 "--table", str(table), "--out-stem", str(tmp_path / "fig")]) == 0  # fmt: skip
    # the named model first, then the one found; a folder without a summary is left out
    assert pd.read_csv(table)["model_name"].unique().tolist() == ["mine", "earlier"]


# --- the multi-model DAG, for real ----------------------------------------------------


@pytest.mark.integration
def test_two_embedded_aliases_through_the_sensitivity_target(repo, tmp_path):
    work = copy_workflow(repo, tmp_path / "work")
    path = work / "config" / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg.update(n_eval=1, calibration_n=0, tasks=["gsm8k"], calibration={}, ablations={})
    cfg["systems"] = {
        "freeform": {"variants": {"default": {}}},
        "tersetalk": {"variants": {"caps_aggressive": {"caps": "aggressive"}}},
    }
    cfg["evaluation"]["comparisons"] = []
    cfg["models"]["threads"] = MODEL_THREADS
    cfg["generation"].update(max_tokens=32, critic_max_tokens=16)  # short: a DAG test
    cfg["sensitivity"] = {"models": [{"name": "smollm2-a"}, {"name": "smollm2-b"}]}
    path.write_text(yaml.safe_dump(cfg))

    res = subprocess.run(
        SNAKEMAKE + ["--cores", "1", "sensitivity"], cwd=work, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    for model in ("smollm2-a", "smollm2-b"):
        for run in ("freeform/default", "tersetalk/caps_aggressive"):
            df = pd.read_parquet(work / f"results/{model}/runs/gsm8k/{run}.parquet")
            assert len(df) == 1 and df["backend"].iloc[0] == "llamacpp"
    table = pd.read_csv(work / "results/compare/models.csv")
    # the configured model is compared with the listed ones
    assert sorted(set(table["model_name"])) == ["smollm2-135m-instruct", "smollm2-a", "smollm2-b"]
    assert len(table) == 6
    tt = table[table["run"] == "tersetalk/caps_aggressive"].set_index("model_name")
    # the same model under two names: the same answers and the same token counts
    assert tt.loc["smollm2-a", "token_reduction"] == tt.loc["smollm2-b", "token_reduction"]
    assert tt.loc["smollm2-a", "token_reduction"] != 0
    assert (work / "figures/compare/models.png").stat().st_size > 10_000
    assert (work / "figures/compare/models.pdf").exists()


@pytest.mark.integration
def test_switching_models_keeps_both_results(repo, tmp_path):
    """A user runs a target, changes `models:` (here: another results key for the same
    embedded weights, so the second run is served from the call cache) and runs it again:
    the first model's files stay as they were, and `compare` reads both."""
    work = copy_workflow(repo, tmp_path / "work")
    path = work / "config" / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg.update(n_eval=1, calibration_n=0, tasks=["gsm8k"], calibration={}, ablations={})
    cfg["systems"] = {"freeform": {"variants": {"default": {}}}}
    cfg["evaluation"]["comparisons"] = []
    cfg["generation"].update(max_tokens=32, critic_max_tokens=16)  # short: a DAG test
    path.write_text(yaml.safe_dump(cfg))
    (work / "other.yaml").write_text("models:\n  key: smollm2-other\n")

    def snakemake(*args):
        res = subprocess.run(
            SNAKEMAKE + ["--cores", "1", *args], cwd=work, capture_output=True, text=True
        )
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]

    first = work / "results/smollm2-135m-instruct"
    snakemake("aggregate")
    before = {p: p.read_bytes() for p in first.rglob("*.parquet")}
    assert first / "runs/gsm8k/freeform/default.parquet" in before
    snakemake("aggregate", "--configfile", "other.yaml")
    second = work / "results/smollm2-other"
    assert (second / "runs/gsm8k/freeform/default.parquet").exists()
    assert {p: p.read_bytes() for p in first.rglob("*.parquet")} == before  # untouched
    snakemake("compare", "--configfile", "other.yaml")
    table = pd.read_csv(work / "results/compare/models.csv")
    assert sorted(set(table["model_name"])) == ["smollm2-135m-instruct", "smollm2-other"]
