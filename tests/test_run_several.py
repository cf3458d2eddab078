"""`tersetalk run` with several specs: one process, each run as if run alone.

The control-flow tests use the scripted model double; the last test runs the embedded
model and compares the runs of one process with the same runs in separate processes.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from tersetalk.cli import main
from tersetalk.core.records import deterministic_columns
from tersetalk.encoders import lingua
from tersetalk.models import ScriptedClient
from tersetalk.pipeline import runner
from tersetalk.pipeline.config import run_spec
from tersetalk.tasks.loading import load_records, sample


def answer(messages):
    system = messages[0]["content"]
    if system.startswith("You are the Critic"):
        return "ACCEPT."
    return "Answer: 42"


@pytest.fixture
def specs(tmp_path, base_config, repo):
    records = load_records("gsm8k", data_dir=repo / "data")
    ev, _ = sample("gsm8k", records, n=3, calibration_n=0, seed=5)
    ev.to_parquet(tmp_path / "sample.parquet")
    base_config["cache_dir"] = str(tmp_path / "cache")
    # short replies: these runs check that a process gives what separate ones give, not
    # what the model answers (the mediator and MSP test reads this same config)
    base_config["generation"].update(max_tokens=32, critic_max_tokens=16)
    first = run_spec(base_config, "gsm8k", "freeform", "default")
    second = dict(first, seed=first["seed"] + 1)
    return [first, second], tmp_path / "sample.parquet"


@pytest.fixture
def scripted(monkeypatch):
    """Every client the runner builds is the scripted double; ``made`` counts them."""
    made = []

    def client(spec):
        made.append(spec["seed"])
        if spec.get("fail"):
            raise RuntimeError("this run's model is broken")
        return ScriptedClient(answer)

    monkeypatch.setattr(runner, "client_from_spec", client)
    return made


def args(specs, sample_path, outs):
    out = ["run", "--sample", str(sample_path), "--no-progress", "--no-events"]
    for spec, path in zip(specs, outs, strict=True):
        out += ["--spec-json", json.dumps(spec), "--out", str(path)]
    return out


def same_deterministic(a: pd.DataFrame, b: pd.DataFrame) -> None:
    cols = [c for c in deterministic_columns(a) if c != "calls"]
    pd.testing.assert_frame_equal(a[cols].reset_index(drop=True), b[cols].reset_index(drop=True))


def test_several_specs_write_what_each_alone_writes(specs, scripted, tmp_path):
    runs, sample_path = specs
    alone = [tmp_path / "alone0.parquet", tmp_path / "alone1.parquet"]
    for spec, out in zip(runs, alone, strict=True):
        assert main(args([spec], sample_path, [out])) == 0
    together = [tmp_path / "together0.parquet", tmp_path / "together1.parquet"]
    assert main(args(runs, sample_path, together)) == 0
    assert scripted == [runs[0]["seed"], runs[1]["seed"]] * 2  # a client per run, in order
    for a, b in zip(alone, together, strict=True):
        same_deterministic(pd.read_parquet(a), pd.read_parquet(b))
    seeds = [pd.read_parquet(p)["spec_hash"].iloc[0] for p in together]
    assert seeds[0] != seeds[1]  # each file holds its own spec's rows


def test_a_failed_run_does_not_stop_the_next_and_the_exit_says_it_failed(
    specs, scripted, tmp_path, caplog
):
    runs, sample_path = specs
    broken = dict(runs[0], fail=True)  # an extra key: the scripted factory raises on it
    outs = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    with pytest.raises(RuntimeError, match="this run's model is broken"):
        main(args([broken, runs[1]], sample_path, outs))  # raised as a single run raises it
    assert not outs[0].exists() and outs[1].exists()  # the second ran to the end
    assert f"1 of 2 runs failed: {outs[0]}" in caplog.text


@pytest.mark.parametrize(
    ("n_specs", "outs", "said"),
    [
        (2, ["a.parquet"], "got 2 run spec(s) and 1 --out"),
        (1, ["a.parquet", "b.parquet"], "got 1 run spec(s) and 2 --out"),
        (2, ["a.parquet", "a.parquet"], "names the same file twice"),
    ],
)
def test_specs_and_outs_must_pair(specs, tmp_path, capsys, n_specs, outs, said):
    runs, sample_path = specs
    argv = ["run", "--sample", str(sample_path)]
    argv += [x for spec in runs[:n_specs] for x in ("--spec-json", json.dumps(spec))]
    argv += [x for out in outs for x in ("--out", str(tmp_path / out))]
    assert main(argv) == 2
    assert said in capsys.readouterr().err
    assert not any((tmp_path / out).exists() for out in outs)


def test_a_compressor_is_loaded_once_per_process(monkeypatch, tmp_path):
    """Two runs' compressors with the same model and threads share one loaded model;
    another thread count is another load. Each keeps its own cache and counters."""
    folder = tmp_path / "model"
    folder.mkdir()
    builds = []
    monkeypatch.setattr(lingua, "_LOADED", {})
    monkeypatch.setattr(
        lingua.LLMLinguaCompressor, "_build", lambda self: builds.append(self.threads) or object()
    )
    settings = lingua.CompressorSettings(model=str(folder), threads=1)
    a = lingua.load_compressor(settings).load()
    b = lingua.load_compressor(settings).load()
    assert builds == [1] and a._loaded is b._loaded and a is not b
    c = lingua.load_compressor(settings.model_copy(update={"threads": 2})).load()
    assert builds == [1, 2] and c._loaded is not a._loaded


def alone_and_together(runs, sample_path, tmp_path):
    """The real model: ``runs`` each in its own process, then all in one, every
    deterministic column equal. Each process runs in its own folder with the relative
    cache_dir "cache" (one spec hash, separate call caches), so all really call the model."""
    runs = [dict(s, cache_dir="cache") for s in runs]

    def cli(specs_, outs, folder):
        (tmp_path / folder).mkdir()
        argv = [sys.executable, "-m", "tersetalk", *args(specs_, sample_path, outs), "--limit", "1"]
        subprocess.run(argv, check=True, capture_output=True, cwd=tmp_path / folder)

    alone = [tmp_path / f"alone{i}.parquet" for i in range(len(runs))]
    for i, (spec, out) in enumerate(zip(runs, alone, strict=True)):
        cli([spec], [out], f"cache-alone{i}")
    together = [tmp_path / f"together{i}.parquet" for i in range(len(runs))]
    cli(runs, together, "cache-together")
    for a, b in zip(alone, together, strict=True):
        a, b = pd.read_parquet(a), pd.read_parquet(b)
        assert (a["n_model_calls"] > a["cache_hits"]).all()  # the model really answered
        same_deterministic(a, b)


def test_the_embedded_model_gives_the_same_runs_in_one_process(specs, tmp_path):
    alone_and_together(specs[0], specs[1], tmp_path)


def test_the_mediator_and_msp_give_the_same_runs_in_one_process(specs, base_config, tmp_path):
    """Their headline batch (rule run_batch, batch mediator_msp): both judge with the
    MiniLM encoder, which the process loads once; each run's judge verdicts unchanged."""
    cfg = dict(base_config, cache_dir=specs[0][0]["cache_dir"])
    runs = [run_spec(cfg, "gsm8k", "mediator", "default"), run_spec(cfg, "gsm8k", "msp", "default")]
    alone_and_together(runs, specs[1], tmp_path)
