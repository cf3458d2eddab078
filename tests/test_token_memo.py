"""A run's tiktoken counts kept between processes (``tokens.count_memo``).

A rerun of a spec counts the same texts; with the memo it reads the counts back and never
builds the encodings. The counts must be exactly tiktoken's, whatever the memo holds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import tersetalk
from tersetalk.core import tokens
from tersetalk.core.tokens import count_memo, count_tokens

TEXTS = ["hello world", "Scott Derrickson directed Sinister.", "", "ünïcode → ok", "x" * 500]


def fresh_counts(name):
    enc = tokens.get_encoding(name)
    return [len(enc.encode(t, disallowed_special=())) for t in TEXTS]


def counted(name):
    return [count_tokens(t, name) for t in TEXTS]


@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_counts_through_the_memo_are_tiktokens(tmp_path, name):
    path = tmp_path / "memo.json"
    with count_memo(path):
        first = counted(name)
    with count_memo(path):
        again = counted(name)
    assert first == again == fresh_counts(name)
    body = json.loads(path.read_text())
    assert len(body["values"]) == len(TEXTS) and body["identity"]["tiktoken"]


def test_a_memo_hit_builds_no_encoding(tmp_path, monkeypatch):
    path = tmp_path / "memo.json"
    with count_memo(path):
        want = counted("cl100k_base") + counted("o200k_base")

    def no_encoding(name):
        raise AssertionError(f"built {name} although the memo holds every count")

    monkeypatch.setattr(tokens, "get_encoding", no_encoding)
    with count_memo(path):
        assert counted("cl100k_base") + counted("o200k_base") == want


def test_the_encodings_are_not_confused(tmp_path):
    text = "Résumé: the naïve café’s 12,345th customer — ¿qué?"
    with count_memo(tmp_path / "m.json"):
        a, b = count_tokens(text, "cl100k_base"), count_tokens(text, "o200k_base")
    assert (a, b) == (count_tokens(text, "cl100k_base"), count_tokens(text, "o200k_base"))
    assert a != b  # the text was chosen so that they differ: a shared key would show


@pytest.mark.parametrize(
    "damage",
    [
        "",
        "{broken",
        '{"format": 1, "identity": {"tiktoken": "0.0.0"}, "values": {}}',  # another tiktoken
        None,  # wrong counts under the right version: see below
    ],
)
def test_a_damaged_or_foreign_memo_is_not_believed(tmp_path, damage):
    path = tmp_path / "memo.json"
    with count_memo(path):
        want = counted("cl100k_base")
    if damage is None:
        body = json.loads(path.read_text())
        body["values"] = {k: "seven" for k in body["values"]}  # not counts: counted again
        path.write_text(json.dumps(body))
    else:
        path.write_text(damage)
    with count_memo(path):
        assert counted("cl100k_base") == want
    assert json.loads(path.read_text())["values"]  # rewritten whole


def test_nothing_added_writes_nothing_and_none_is_no_memo(tmp_path):
    path = tmp_path / "memo.json"
    with count_memo(path):
        pass
    assert not path.exists()
    with count_memo(None):
        assert count_tokens("hello world") == 2
    assert tokens._MEMO is None


def test_an_unknown_encoding_is_still_an_error_inside_the_memo(tmp_path):
    with count_memo(tmp_path / "m.json"), pytest.raises(tokens.TokenizerError):
        count_tokens("hello", "p50k_base")


RUN_AGAIN = """
import sys
import tersetalk.core.tokens as t
built = []
real = t.get_encoding
t.get_encoding = lambda name: built.append(name) or real(name)
from tersetalk.cli import main
code = main(sys.argv[1:])
print("BUILT", sorted(set(built)))
sys.exit(code)
"""


def test_a_rerun_of_a_spec_builds_no_encoding_and_writes_the_same_run(tmp_path, repo):
    """Two processes run one spec against the call cache (a fake server answers the
    first); the second reads every count back, and the run files are identical but
    for timing columns."""
    import pandas as pd
    import yaml
    from fake_openai_server import FakeServer

    from tersetalk.tasks.loading import load_records, sample

    ev, _ = sample("gsm8k", load_records("gsm8k", data_dir=repo / "data"), n=2,
                   calibration_n=0, seed=3)  # fmt: skip
    sample_path = tmp_path / "sample.parquet"
    ev.to_parquet(sample_path)
    srv = FakeServer(answer="#### 4").start()
    try:
        layer = tmp_path / "server.yaml"
        layer.write_text(yaml.safe_dump({
            "models": {"backend": "openai", "base_url": srv.base_url, "model": "fake",
                       "max_retries": 0, "timeout_s": 600},
            "cache_dir": str(tmp_path / "cache"),
        }))  # fmt: skip
        src = str(Path(tersetalk.__file__).resolve().parents[1])
        outs, built = [], []
        for i in range(2):
            out = tmp_path / f"run{i}.parquet"
            outs.append(out)
            argv = ["run", "--task", "gsm8k", "--system", "tersetalk", "--config", str(layer),
                    "--variant", "caps_very_relaxed", "--sample", str(sample_path),
                    "--out", str(out), "--no-progress"]  # fmt: skip
            proc = subprocess.run([sys.executable, "-c", RUN_AGAIN, *argv], cwd=repo,
                                  capture_output=True, text=True, check=True,
                                  env={"PYTHONPATH": src, "TERSETALK_EVENTS": "off",
                                       "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})  # fmt: skip
            built.append(proc.stdout.split("BUILT", 1)[1].strip())
    finally:
        srv.stop()
    assert built[0] == "['cl100k_base', 'o200k_base']" and built[1] == "[]"
    a, b = (pd.read_parquet(p) for p in outs)
    cols = [c for c in a.columns if c.startswith("tokens_") or c in ("messages", "correct")]
    assert len(cols) > 4
    pd.testing.assert_frame_equal(a[cols], b[cols])
    assert len(list((tmp_path / "cache" / "tokens").glob("*.json"))) == 1
