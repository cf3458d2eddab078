"""End to end: a model whose HumanEval answer hunts for the API key.

``tersetalk run --task humaneval`` against a loopback OpenAI-compatible server whose every
answer is code that reads ``/proc/*/environ`` (the runner's environment, where the key
is) and raises with whatever it found, so that on the earlier sandbox the key landed in
the run Parquet's ``sandbox_detail``. The canary must appear nowhere: not under the
results, the cache, the logs or the command's output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from fake_openai_server import FakeServer

from tersetalk.tasks.humaneval.sandbox import bubblewrap_status

CANARY = "sk-canary-" + "5d1e0c7b9a"

HOSTILE = """```python
def {entry}(*args, **kwargs):
    import os
    found = [str(dict(os.environ))]
    try:
        pids = [pid for pid in os.listdir("/proc") if pid.isdigit()]
    except OSError as exc:  # the sandbox has no /proc
        pids = []
        found.append(str(exc))
    for pid in pids:
        try:
            found.append(open("/proc/%s/environ" % pid, "rb").read().decode("latin-1"))
        except OSError as exc:
            found.append(str(exc))
    for path in ("/proc/self/environ", "/proc/%d/environ" % os.getppid()):
        try:
            found.append(open(path, "rb").read().decode("latin-1"))
        except OSError:
            pass
    raise RuntimeError(" | ".join(found))
```"""


@pytest.mark.skipif(
    bubblewrap_status()[0] is None,
    reason=f"bubblewrap cannot run here ({bubblewrap_status()[1]}); `apt-get install bubblewrap`",
)
def test_a_worker_hunting_for_the_key_finds_nothing_and_leaves_no_trace(tmp_path, repo):
    from tersetalk.tasks.loading import load_records, sample

    ev, _ = sample("humaneval", load_records("humaneval", data_dir=repo / "data"), n=1,
                   calibration_n=0, seed=3)  # fmt: skip
    sample_path = tmp_path / "sample.parquet"
    ev.to_parquet(sample_path)
    entry = json.loads(ev["gold"].iloc[0])["entry_point"]
    server = FakeServer(answer=HOSTILE.format(entry=entry)).start()
    try:
        layer = {
            "models": {"backend": "openai", "base_url": server.base_url, "model": "fake",
                       "max_retries": 1, "timeout_s": 20, "api_key_env": "TERSETALK_TEST_KEY"},
            "cache_dir": str(tmp_path / "cache"),
        }  # fmt: skip
        cfg = tmp_path / "server.yaml"
        cfg.write_text(yaml.safe_dump(layer))
        out = tmp_path / "results" / "runs" / "humaneval" / "freeform" / "default.parquet"
        proc = subprocess.run(
            [sys.executable, "-m", "tersetalk.cli", "--log-level", "DEBUG", "run", "--task",
             "humaneval", "--system", "freeform", "--config",
             str(repo / "config" / "config.yaml"), str(cfg), "--sample", str(sample_path),
             "--out", str(out), "--no-progress"],
            cwd=repo, capture_output=True, text=True,
            env={**os.environ, "TERSETALK_TEST_KEY": CANARY},
        )  # fmt: skip
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    # the key was really in the runner's environment and used ...
    assert {r["authorization"] for r in server.chat_requests()} == {f"Bearer {CANARY}"}
    df = pd.read_parquet(out)
    # ... and the hostile code ran, sandboxed, and found nothing worth reporting
    assert list(df["sandbox_reason"]) == ["error"] and df["correct"].tolist() == [0.0]
    assert df["sandbox_detail"].iloc[0].startswith("RuntimeError:")
    assert set(df["sandbox_isolation"]) == {"bubblewrap"}
    assert CANARY not in proc.stdout + proc.stderr
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert out in written and any(p.is_relative_to(tmp_path / "cache") for p in written)
    for path in written:
        assert CANARY.encode() not in path.read_bytes(), path
