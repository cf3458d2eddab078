"""``tersetalk score`` scores several runs of a task in one process.

Repeated ``--run``, ``--out-records`` and ``--out`` are paired in order; the sentence
encoder is loaded once for all of them, and their BERTScore is one call of it. What a
batch writes must be what scoring each run alone (each in its own process, as the
workflow used to) writes: every column exactly, but BERTScore F1, whose texts share
batches with the other runs' texts, within float32 rounding.
"""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from tersetalk.cli import main
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import run_spec
from tersetalk.pipeline.runner import run
from tersetalk.tasks.loading import load_records, sample


def scripted(messages):
    """Control flow only: the Critic revises once, the Worker then answers 42."""
    if messages[0]["content"].startswith("You are the Critic"):
        return "REVISE: check the number" if "13" in messages[-1]["content"] else "ACCEPT."
    if "Critic asked you to revise" in messages[-1]["content"]:
        return "Answer: 42"
    return "Answer: 13"


@pytest.fixture
def runs(tmp_path, base_config, repo):
    """A GSM8K sample of 3 and two runs of it (freeform default, the reference, and cod)."""
    ev, _ = sample("gsm8k", load_records("gsm8k", data_dir=repo / "data"), n=3,
                   calibration_n=0, seed=5)  # fmt: skip
    sample_path = tmp_path / "sample.parquet"
    ev.to_parquet(sample_path)
    base_config["cache_dir"] = str(tmp_path / "cache")
    paths = []
    for variant in ("default", "cod"):
        out = tmp_path / f"run_{variant}.parquet"
        spec = run_spec(base_config, "gsm8k", "freeform", variant)
        run(spec, sample_path, out, client=ScriptedClient(scripted), progress=False)
        paths.append(out)
    return sample_path, paths


def test_a_batch_writes_what_scoring_each_run_alone_writes(tmp_path, repo, runs):
    _, paths = runs
    common = ["--reference", str(paths[0])]
    for i, path in enumerate(paths):  # one process per run, as 82 score jobs did
        subprocess.run([sys.executable, "-m", "tersetalk", "score", "--run", str(path),
                        "--out-records", str(tmp_path / f"alone_m{i}.parquet"),
                        "--out", str(tmp_path / f"alone_s{i}.parquet"), *common],
                       cwd=repo, check=True, capture_output=True)  # fmt: skip
    triples = []
    for i, path in enumerate(paths):
        triples += ["--run", str(path), "--out-records", str(tmp_path / f"batch_m{i}.parquet"),
                    "--out", str(tmp_path / f"batch_s{i}.parquet")]  # fmt: skip
    assert main(["score", *common, *triples]) == 0
    bert = ["semantic_bertscore_f1", "semantic_bertscore_f1_mean"]
    for i in range(len(paths)):
        for kind in ("m", "s"):
            alone = pd.read_parquet(tmp_path / f"alone_{kind}{i}.parquet")
            batch = pd.read_parquet(tmp_path / f"batch_{kind}{i}.parquet")
            exact = [c for c in alone.columns if c not in bert]
            pd.testing.assert_frame_equal(batch[exact], alone[exact], check_exact=True)
            for c in set(bert) & set(alone.columns):
                assert (batch[c] - alone[c]).abs().max() <= 1e-6, (kind, i, c)
    records = pd.read_parquet(tmp_path / "batch_m1.parquet")
    assert records["variant"].eq("cod").all()  # the second run went to the second file
    assert records["semantic_bertscore_f1"].notna().all()  # the encoder really scored
    assert records["semantic_method"].str.startswith("bertscore-f1").all()


def test_one_run_still_scores_as_before(tmp_path, runs):
    _, paths = runs
    out = tmp_path / "s.parquet"
    assert main(["score", "--run", str(paths[1]), "--out", str(out)]) == 0
    row = pd.read_parquet(out)
    assert len(row) == 1 and row["variant"].iloc[0] == "cod" and row["n"].iloc[0] == 3


@pytest.mark.parametrize(
    ("outs", "records", "said"),
    [(1, 0, "2 --run and 1 --out"), (2, 1, "2 --run and 2 --out and 1 --out-records")],
)
def test_unpaired_outputs_are_a_clear_error(tmp_path, runs, capsys, outs, records, said):
    _, paths = runs
    argv = ["score", "--run", str(paths[0]), "--run", str(paths[1])]
    for i in range(outs):
        argv += ["--out", str(tmp_path / f"s{i}.parquet")]
    for i in range(records):
        argv += ["--out-records", str(tmp_path / f"m{i}.parquet")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"tersetalk score: error: got {said}" in err and "paired in the order" in err
    assert not list(tmp_path.glob("[sm][0-9].parquet"))  # nothing written before the check
