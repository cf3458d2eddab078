"""Same config and seed, real embedded model, the call cache emptied between the runs: identical
deterministic columns. The scripted double in test_runner.py checks the bookkeeping;
this checks that the model stack itself (llama.cpp at temperature 0 with a seed,
grammar-constrained decoding for TerseTalk) reproduces, with no cache to lean on."""

import shutil

import pandas as pd
import pytest

from tersetalk.core.records import deterministic_columns
from tersetalk.pipeline.config import run_spec
from tersetalk.pipeline.runner import run
from tersetalk.tasks.loading import load_records, sample


def _deterministic(df: pd.DataFrame) -> pd.DataFrame:
    return df[deterministic_columns(df)]  # the counters' c_* columns included


@pytest.mark.integration
@pytest.mark.parametrize(
    "system,variant", [("freeform", "default"), ("tersetalk", "caps_baseline")]
)
def test_real_model_reproduces_deterministic_columns(tmp_path, base_config, repo, system, variant):
    records = load_records("gsm8k", data_dir=repo / "data")
    ev, _ = sample("gsm8k", records, n=2, calibration_n=0, seed=11)
    sample_path = tmp_path / "sample.parquet"
    ev.to_parquet(sample_path)
    base_config["cache_dir"] = str(tmp_path / "cache")
    spec = run_spec(base_config, "gsm8k", system, variant)
    runs = []
    for name in ("a", "b"):
        shutil.rmtree(tmp_path / "cache", ignore_errors=True)  # no call may come from a cache
        runs.append(run(spec, sample_path, tmp_path / f"{name}.parquet", progress=False))
    a, b = runs
    assert a["error"].isna().all(), a["error"].tolist()
    assert (a["cache_hits"] == 0).all() and (b["cache_hits"] == 0).all()  # both really called
    assert (a["n_model_calls"] >= 2).all()
    pd.testing.assert_frame_equal(_deterministic(a), _deterministic(b))
