"""``tersetalk plan`` on a fresh clone: no run records anywhere, so it plans with stated
rates per example and says so, and prints the driver's time beside the server's (the
driver benchmark's CPU per call when its table is there, else a stated one)."""

from __future__ import annotations

import pandas as pd
import pytest

from tersetalk.pipeline import plan

REPO_LINKS = ("config", "data", "workflow", "Snakefile")


@pytest.fixture
def fresh(tmp_path, monkeypatch, repo):
    """A folder that looks like a fresh clone: the workflow's files, no results."""
    for name in REPO_LINKS:
        (tmp_path / name).symlink_to(repo / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_fresh_clone_plans_with_stated_rates_and_says_so(fresh, capsys):
    code = plan.main(["--no-comprehension", "--server-calls-per-s", "10",
                      "--out", "plan.csv", "--runs-out", "runs.csv"])  # fmt: skip
    assert code == 0
    out, err = capsys.readouterr()
    assert "no run records under" in err and "using stated rates per example" in err
    assert f"rates per example from none ({plan.STATED_BASIS})" in out
    runs = pd.read_csv("runs.csv")
    assert (runs["rates_basis"] == plan.STATED_BASIS).all()
    calls = (runs["examples"] * plan.STATED_CALLS_PER_EXAMPLE).sum()
    assert runs["calls"].sum() == pytest.approx(calls)
    assert f"driver and server: {calls:,.0f} model calls" in out
    assert "server at 10 calls/s (named)" in out
    assert f"driver {plan.STATED_DRIVER_CPU_MS:.1f} ms of client CPU per call (stated" in out
    # no CPU target without measured rates: the GPU server and the cluster are projected
    targets = set(pd.read_csv("plan.csv")["target"])
    assert targets == {"gpu-server", f"slurm:{plan.SLURM_NODES}-nodes"}


def test_the_driver_benchmarks_rate_nearest_the_configured_in_flight_is_used(fresh, capsys):
    rows = [
        {"side": side, "latency_ms": lat, "in_flight": k, "examples": 200,
         "cpu_ms_per_call": ms, "ok": True}
        for side, lat, k, ms in [("tersetalk", 20.0, 1, 11.0), ("tersetalk", 20.0, 32, 6.5),
                                 ("tersetalk", 0.0, 1, 99.0), ("openai-sdk", 20.0, 1, 2.0)]
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv("driver.csv", index=False)
    assert plan.main(["--no-comprehension", "--driver-table", "driver.csv"]) == 0
    out = capsys.readouterr().out
    # the default config keeps one example in flight: the 20 ms server's 1-in-flight row
    assert "driver 11.0 ms of client CPU per call (measured by the driver benchmark" in out
    assert "1 in flight, 20 ms server, 200 examples" in out
    assert f"server at {plan.STATED_SERVER_CALLS_PER_S:g} calls/s (assumed" in out
