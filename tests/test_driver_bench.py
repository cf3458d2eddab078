"""The driver benchmark end to end, at its smallest: the loopback server, the real
``tersetalk run`` against it and the plain OpenAI SDK beside it, the table and the
figure. What it measures (times) is not checked; what it counted is."""

from __future__ import annotations

import json

import pandas as pd

from tersetalk.bench import driver


def test_both_sides_make_the_same_calls_and_the_table_says_how_tokens_were_counted(tmp_path, repo):
    out = tmp_path / "driver.parquet"
    df = driver.measure([0.0], [2], 3, out, data_dir=str(repo / "data"),
                        model_path=driver.embedded_model_file())  # fmt: skip
    assert list(df.columns) == driver.COLUMNS
    assert df["ok"].all()
    by_side = df.set_index("side")
    # freeform on GSM8K: the Worker and the Critic (which accepts), per example
    assert by_side.loc["tersetalk", "calls"] == 6 == by_side.loc["openai-sdk", "calls"]
    # the server names a model file readable here: the driver counts with it
    assert by_side.loc["tersetalk", "tokenize_requests"] == 0
    assert "from /props" in by_side.loc["tersetalk", "tokens_model_source"]
    assert (df["cpu_ms_per_call"] > 0).all() and df["wall_over_floor"].isna().all()
    assert pd.read_parquet(out).equals(df)
    assert out.with_suffix(".csv").exists()
    driver.plot(out, tmp_path / "driver.png")
    assert (tmp_path / "driver.png").stat().st_size > 0
    assert (tmp_path / "driver.pdf").stat().st_size > 0
    # drawn through the house's save_figure: checked as drawn, nothing found
    meta = json.loads((tmp_path / "driver.png.meta.json").read_text())
    assert meta["layout_problems"] == []


def test_a_server_model_file_not_here_is_counted_by_the_server_once_per_text(tmp_path, repo):
    out = tmp_path / "driver.parquet"
    df = driver.measure([20.0], [1], 2, out, data_dir=str(repo / "data"), model_path=None)
    row = df.set_index("side").loc["tersetalk"]
    assert row["tokens_model_source"] == "server tokenize endpoint (/extras/tokenize)"
    # every text counted is asked once: fewer requests than counts (5 messages an example)
    assert 0 < row["tokenize_requests"] < 2 * 5
    assert row["server_floor_s"] == row["calls"] * 0.020
