"""``tersetalk route`` and the router on held-out briefs.

``route`` must give, for a study's own briefs, the decision a run records (the scripted
double answers the Worker and Critic: control flow only, no number from it); the
held-out tables must score what the signals files say, per subset and router; the
leave-one-out checks must never see the task or format they score.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest
from router_support import scripted

from tersetalk.core.io import InputFileError
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import run_spec, validate_config
from tersetalk.pipeline.runner import run
from tersetalk.pipeline.topology_signals import read_records
from tersetalk.tasks.loading import load_records, sample
from tersetalk.topology import heldout as th
from tersetalk.topology.router import DEFAULT_THETA, DEFAULT_WEIGHTS, SIGNALS

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cli(capsys, monkeypatch):
    """``tersetalk route ARGS`` in this process, from the repository (its config):
    ``(exit code, stdout, stderr)``."""
    from tersetalk.cli import main

    monkeypatch.chdir(REPO)

    def call(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["route", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return call


def _lines(result: tuple[int, str, str]) -> list[dict]:
    code, out, err = result
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize("system", ["topology_tersetalk", "topology_freeform"])
def test_route_reproduces_the_decisions_a_run_records(base_config, tmp_path, system, cli):
    task = "gsm8k"
    ev, _ = sample(task, load_records(task, data_dir=REPO / "data"), n=4, calibration_n=0,
                   seed=5)  # fmt: skip
    path = tmp_path / "sample.parquet"
    ev.to_parquet(path)
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    cfg["evaluation"]["comparisons"] = []
    validate_config(cfg)
    spec = run_spec(
        {**cfg, "systems": {system: {"variants": {"adaptive": {"policy": "adaptive"}}}}},
        task, system, "adaptive",
    )  # fmt: skip
    df = run(spec, path, tmp_path / "run.parquet", client=ScriptedClient(scripted),
             progress=False)  # fmt: skip
    routed = {r["id"]: r for r in _lines(cli(str(path), "--task", task, "--system", system))}
    assert set(routed) == set(df["example_id"])
    for _, row in df.iterrows():
        line = routed[row["example_id"]]
        assert line["route"] == row["route_rule"]
        assert line["signals"] == json.loads(row["route_signals"])
        assert line["score"] == pytest.approx(row["route_score"])


def test_route_reads_jsonl_records_and_a_fitted_router(tmp_path, cli):
    lines = _lines(cli("data/topology/heldout/boolq.jsonl", "--task", "boolq"))
    assert len(lines) == len(Path(REPO / "data/topology/heldout/boolq.jsonl").read_text()
                             .splitlines())  # fmt: skip
    first = lines[0]
    assert set(first["signals"]) == set(SIGNALS) and first["label"] in ("star", "chain")
    assert first["weights"] == DEFAULT_WEIGHTS and first["theta"] == DEFAULT_THETA
    router = tmp_path / "router.yaml"
    router.write_text(json.dumps({"systems": {"topology_tersetalk": {
        "weights": dict.fromkeys(SIGNALS, 0.0), "theta": -1.0}}}))  # fmt: skip
    fitted = _lines(cli("data/topology/heldout/boolq.jsonl", "--task", "boolq", "--router",
                        str(router)))  # fmt: skip
    assert {line["route"] for line in fitted} == {"chain"}  # score 0 >= θ -1 everywhere
    assert {line["router"] for line in fitted} == {"fitted"}


def test_route_says_what_is_wrong_with_its_input(tmp_path, cli):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "is it?", "passage": "It is."}\nnot json\n')
    with pytest.raises(InputFileError, match="line 2"):
        read_records(bad, "boolq")
    bad.write_text("[1, 2]\n")
    with pytest.raises(InputFileError, match="not a JSON object"):
        read_records(bad, "boolq")
    bad.write_text('{"id": "a", "question": "q"}\n{"id": "a", "question": "r"}\n')
    with pytest.raises(InputFileError, match="ids repeat"):
        read_records(bad, "boolq")
    bad.write_text("\n")
    with pytest.raises(InputFileError, match="no records"):
        read_records(bad, "boolq")
    code, _, err = cli(str(tmp_path / "none.jsonl"), "--task", "boolq")
    assert code == 2 and "cannot be read" in err and "Traceback" not in err
    code, _, err = cli("data/topology/heldout/boolq.jsonl", "--task", "boolq", "--variant", "nope")
    assert code == 2 and "adaptive" in err  # lists the variants
    code, _, err = cli("data/topology/heldout/boolq.jsonl", "--task", "nope")
    assert code == 2 and "boolq" in err and "Traceback" not in err


def _frame(rows: list[tuple[str, str, str, dict]], system: str = "s") -> pd.DataFrame:
    out = []
    for i, (task, label, eid, signals) in enumerate(rows):
        full = {**dict.fromkeys(SIGNALS, 0), **signals}
        out.append({"task": task, "example_id": eid or f"{task}-{i}", "system": system,
                    "label": label, "error": None, **full,
                    "route_weights": json.dumps(DEFAULT_WEIGHTS), "route_theta": 3.0})  # fmt: skip
    return pd.DataFrame(out)


def test_agreement_table_counts_subsets_and_intervals():
    held = _frame([
        ("boolq", "star", "", {}),              # star, not crossing: agrees
        ("boolq", "chain", "", {"hops": 1}),    # chain, crossing: agrees (3 >= 3)
        ("boolq", "chain", "", {}),             # crossing: disagrees
        ("gsm8k", "chain", "", {"arithmetic": 2}),  # not crossing: agrees
        ("gsm8k", "star", "", {"arithmetic": 2}),   # crossing: disagrees
    ])  # fmt: skip
    table = th.agreement_table(held).set_index("subset")
    assert table.loc["all", ["n", "agree"]].tolist() == [5, 3]
    assert table.loc["crossing", ["n", "agree"]].tolist() == [3, 1]
    assert table.loc["not crossing", ["n", "agree"]].tolist() == [2, 2]
    assert table.loc["format boolq", "agree"] == 2
    low, high = table.loc["all", ["ci_low", "ci_high"]]
    assert 0 < low < 0.6 < high < 1  # Wilson, not a point
    assert set(table["router"]) == {"design"}
    held["batch"] = ["1", "1", "2", "2", ""]
    batches = th.agreement_table(held).set_index("subset")
    assert batches.loc["batch 2", ["n", "agree"]].tolist() == [2, 1]
    assert "batch " not in table.index.str.cat()  # no batch column, no batch rows


def test_leave_one_out_never_sees_what_it_scores():
    # hops decides chain in every task but hotpotqa, where only arithmetic does: held out,
    # hotpotqa is scored by a rule that never saw it
    rows = []
    for task, label in [("boolq", "star"), ("socialiqa", "star"), ("gsm8k", "chain"),
                        ("humaneval", "chain")]:  # fmt: skip
        for i in range(4):
            rows.append((task, label, f"{task}-{i}", {"hops": int(label == "chain") * 2}))
    for i in range(4):
        rows.append(("hotpotqa", "chain", f"hotpotqa-{i}", {"arithmetic": 1}))
    cal = _frame(rows)
    loto = th.leave_one_task_out(cal, l2=1.0).set_index(["router", "held_out"])
    # design weights: θ chosen on the others is the smallest that separates them (1.0);
    # arithmetic 1 x 1.5 reaches it, so hotpotqa is routed to the chain
    assert loto.loc[("design", "hotpotqa"), "theta"] == 1.0
    assert loto.loc[("design", "hotpotqa"), "agreement"] == 1.0
    assert loto.loc[("design", "gsm8k"), "group"] == "chain"
    held = _frame([("hotpotqa", "star", "h1", {}), ("hotpotqa", "chain", "h2", {"hops": 1})])
    lofo = th.leave_one_format_out(cal, held).set_index(["router", "format"])
    assert lofo.loc[("design", "hotpotqa"), "n"] == 2
    summary = th.summary(th.agreement_table(held), loto.reset_index(), lofo.reset_index())
    entry = summary["s"]["design"]
    assert entry["loto_chain_min"] <= entry["loto_chain_mean"] <= 1.0
    assert set(entry["loto_by_task"]) == {"boolq", "socialiqa", "gsm8k", "humaneval",
                                          "hotpotqa"}  # fmt: skip
