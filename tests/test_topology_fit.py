"""The fitted router  and the signals it learns from.

The fit is checked against an independent optimiser of the same objective (scipy's
L-BFGS-B), for determinism, for finite weights on separable data and for its errors;
the rule it feeds is checked to be monotone in θ (a property). The signals command is
checked against real routed runs (the scripted double answers the Worker and Critic,
control flow only): the briefs and signals it records are the ones a run sends and
records, and it makes no model call.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from router_support import scripted

from tersetalk.core.io import message_list
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import run_spec, topology_config
from tersetalk.pipeline.runner import run
from tersetalk.pipeline.topology_signals import LazyClient, brief_signals
from tersetalk.tasks.humaneval.sandbox import bubblewrap_status
from tersetalk.tasks.loading import load_records, sample
from tersetalk.topology.fit import (
    FittedRouter,
    RouterFileError,
    fit_frame,
    fit_router,
    leave_one_task_out_fitted,
    read_router_yaml,
    write_router_yaml,
)
from tersetalk.topology.router import DEFAULT_WEIGHTS, SIGNALS, decide, load_fitted

REPO = Path(__file__).resolve().parents[1]
DIRECT = ("boolq", "commonsenseqa", "socialiqa")
CHAINED = ("hotpotqa", "gsm8k", "humaneval")


def synthetic(n: int, seed: int, noise: float = 0.0) -> tuple[list[dict], list[str]]:
    """Briefs whose label follows arithmetic and code (flipped with probability ``noise``);
    hops never varies."""
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for i in range(n):
        chain = i % 2 == 0
        row = {
            "arithmetic": int(rng.integers(4, 9) if chain else rng.integers(0, 3)),
            "plans": int(rng.integers(0, 3)),
            "hops": 1,
            "conditions": int(rng.integers(0, 2)),
            "quantities": int(rng.integers(0, 2)),
            "code": int(chain and rng.random() < 0.3),
        }
        if rng.random() < noise:
            chain = not chain
        rows.append(row)
        labels.append("chain" if chain else "star")
    return rows, labels


def reference_fit(
    rows: list[dict], labels: list[str], l2: float, prior: dict | None = None
) -> tuple[np.ndarray, float]:
    """The same penalised objective (the weights shrunk towards ``prior``, the design's by
    default), minimised by scipy: raw weights and θ."""
    from scipy.optimize import minimize

    x = np.array([[r[k] for k in SIGNALS] for r in rows], dtype=float)
    y = np.array([label == "chain" for label in labels], dtype=float)
    mean, sd = x.mean(0), x.std(0)
    scale = np.where(sd == 0, 1.0, sd)
    z = (x - mean) / scale
    w0 = np.array([(DEFAULT_WEIGHTS if prior is None else prior).get(k, 0.0) for k in SIGNALS])
    centre = np.where(sd == 0, 0.0, w0 * scale)

    def loss(beta):
        m = beta[0] + z @ beta[1:]
        p = 0.5 * (1 + np.tanh(0.5 * m))
        shift = beta[1:] - centre
        value = np.sum(np.logaddexp(0, m) - y * m) + 0.5 * l2 * shift @ shift
        grad = np.concatenate([[np.sum(p - y)], z.T @ (p - y) + l2 * shift])
        return value, grad

    res = minimize(loss, np.zeros(len(SIGNALS) + 1), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 10_000})  # fmt: skip
    w = np.where(sd == 0, w0, res.x[1:] / scale)
    return w, -(res.x[0] - np.sum(np.where(sd == 0, w0 * mean, res.x[1:] * mean / scale)))


# -- the fit ------------------------------------------------------------------------------
def test_fit_separates_a_separable_set_and_decide_is_the_classifier():
    rows, labels = synthetic(60, seed=1)
    fit = fit_router(rows, labels, l2=0.1, seed=3)
    assert fit.train_selection_accuracy == 1.0
    assert fit.n == 60 and fit.n_per_label == {"star": 30, "chain": 30}
    assert list(fit.weights) == list(SIGNALS) and fit.converged
    assert all(math.isfinite(w) for w in fit.weights.values()) and math.isfinite(fit.theta)
    # a signal that never varies keeps its prior weight (nothing here says otherwise)
    assert fit.weights["hops"] == DEFAULT_WEIGHTS["hops"]
    assert fit_router(rows, labels, l2=0.1, prior={}).weights["hops"] == 0.0
    # the optimum of the objective, as an independent optimiser finds it
    w, theta = reference_fit(rows, labels, 0.1)
    np.testing.assert_allclose([fit.weights[k] for k in SIGNALS], w, rtol=1e-4, atol=1e-6)
    assert fit.theta == pytest.approx(theta, rel=1e-4, abs=1e-6)
    # the router's rule with the fitted weights is the classifier's decision (p >= 1/2)
    x = np.array([[r[k] for k in SIGNALS] for r in rows], dtype=float)
    margin = x @ w - theta
    for row, m, label in zip(rows, margin, labels, strict=True):
        assert decide(row, fit.weights, fit.theta)[0] == ("chain" if m >= 0 else "star") == label


def test_fit_on_noisy_labels_matches_the_reference_optimum():
    rows, labels = synthetic(80, seed=2, noise=0.2)
    fit = fit_router(rows, labels, l2=1.0)
    w, theta = reference_fit(rows, labels, 1.0)
    np.testing.assert_allclose([fit.weights[k] for k in SIGNALS], w, rtol=1e-5, atol=1e-7)
    assert fit.theta == pytest.approx(theta, rel=1e-5, abs=1e-7)
    x = np.array([[r[k] for k in SIGNALS] for r in rows], dtype=float)
    margins = x @ w - theta
    routes = [fit.route(r) for r in rows]
    expected = ["chain" if m >= 0 else "star" for m in margins]
    close = np.abs(margins) < 1e-6  # a brief on the boundary may fall either way
    assert [r for r, c in zip(routes, close, strict=True) if not c] == [
        e for e, c in zip(expected, close, strict=True) if not c
    ]
    hits = sum(r == label for r, label in zip(routes, labels, strict=True))
    assert fit.train_selection_accuracy == hits / len(labels)


def test_fit_is_deterministic_bitwise():
    rows, labels = synthetic(50, seed=4, noise=0.1)
    a, b = fit_router(rows, labels, l2=0.5, seed=7), fit_router(rows, labels, l2=0.5, seed=7)
    assert [float(v).hex() for v in a.weights.values()] == [
        float(v).hex() for v in b.weights.values()
    ]
    assert float(a.theta).hex() == float(b.theta).hex() and a == b


def test_separable_data_keeps_weights_finite_even_with_a_tiny_penalty():
    rows = [{**dict.fromkeys(SIGNALS, 0), "code": c} for c in (0, 0, 1, 1)]
    fit = fit_router(rows, ["star", "star", "chain", "chain"], l2=1e-6)
    assert all(math.isfinite(v) for v in (*fit.weights.values(), fit.theta))
    assert fit.train_selection_accuracy == 1.0


@pytest.mark.parametrize(
    "rows,labels,kwargs,match",
    [
        ([], [], {}, "no rows"),
        ([dict.fromkeys(SIGNALS, 1)] * 3, ["chain"] * 3, {}, "one label only.*no star"),
        ([dict.fromkeys(SIGNALS, 1)] * 2, ["star"] * 2, {}, "one label only.*no chain"),
        ([dict.fromkeys(SIGNALS, 1)] * 2, ["star", "direct"], {}, "unknown label"),
        ([dict.fromkeys(SIGNALS, 1)] * 2, ["star"], {}, "2 signal rows but 1 labels"),
        ([{"hops": 1}, dict.fromkeys(SIGNALS, 1)], ["star", "chain"], {}, "row 0 lacks"),
        ([{**dict.fromkeys(SIGNALS, 1), "plans": math.inf}] * 2, ["star", "chain"], {}, "finite"),
        ([dict.fromkeys(SIGNALS, 1)] * 2, ["star", "chain"], {"l2": 0.0}, "l2 must be"),
    ],
)
def test_degenerate_inputs_say_what_is_missing(rows, labels, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_router(rows, labels, **kwargs)


counts = st.integers(min_value=0, max_value=12)
signal_maps = st.fixed_dictionaries({k: counts for k in SIGNALS})
finite = st.floats(min_value=-50, max_value=50, allow_nan=False, allow_infinity=False)


@given(signal_maps, st.fixed_dictionaries({k: finite for k in SIGNALS}), finite, finite)
def test_raising_theta_never_turns_star_into_chain(signals, weights, t1, t2):
    low, high = sorted((t1, t2))
    if decide(signals, weights, low)[0] == "star":
        assert decide(signals, weights, high)[0] == "star"


@given(st.lists(signal_maps, min_size=1, max_size=20), finite, finite)
def test_fitted_weights_are_monotone_in_theta(signals, t1, t2):
    rows, labels = synthetic(30, seed=5, noise=0.1)
    fit = fit_router(rows, labels)
    low, high = sorted((t1, t2))
    chain_low = {i for i, s in enumerate(signals) if decide(s, fit.weights, low)[0] == "chain"}
    chain_high = {i for i, s in enumerate(signals) if decide(s, fit.weights, high)[0] == "chain"}
    assert chain_high <= chain_low


# -- the router file ----------------------------------------------------------------------
def test_router_file_round_trip_and_the_router_reads_it(tmp_path):
    rows, labels = synthetic(40, seed=6, noise=0.1)
    fits = {
        "topology_tersetalk": fit_router(rows, labels, l2=1.0, tasks=["gsm8k", "boolq"]),
        "topology_freeform": fit_router(rows[:30], labels[:30], l2=2.0),
    }
    path = write_router_yaml(tmp_path / "router.yaml", fits, {"command": "test"})
    text = path.read_text()
    assert text.startswith("# The fitted topology router")
    assert "model: logistic regression, L2=1" in text
    back, meta = read_router_yaml(path)
    assert back == fits and meta == {"command": "test"}
    for name, fit in fits.items():
        assert load_fitted(path, name) == (fit.weights, fit.theta)  # what a run reads
    assert yaml.safe_load(text)["systems"]["topology_tersetalk"]["tasks"] == ["boolq", "gsm8k"]


def _rewrite(path: Path, edit) -> None:
    doc = yaml.safe_load(path.read_text())
    edit(doc["systems"]["topology_tersetalk"])
    path.write_text(yaml.safe_dump(doc))


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda e: e.pop("theta"), r"systems\.topology_tersetalk\.theta is missing"),
        (lambda e: e.update(theta=".nan"), r"systems\.topology_tersetalk\.theta must be a number"),
        (lambda e: e.update(theta=float("inf")), r"topology_tersetalk\.theta must be finite"),
        (lambda e: e["weights"].pop("code"), r"topology_tersetalk\.weights must give each"),
        (lambda e: e["weights"].update(code="x"), r"topology_tersetalk\.weights\.code must be"),
        (lambda e: e.update(n=-1), r"topology_tersetalk\.n must be a count"),
        (lambda e: e.update(train_selection_accuracy=2), r"must be in \[0, 1\]"),
        (lambda e: e.update(model="a depth-2 tree"), r"topology_tersetalk\.model is"),
    ],
)
def test_reading_a_wrong_router_file_names_the_file_and_the_key(tmp_path, edit, match):
    rows, labels = synthetic(20, seed=8)
    path = write_router_yaml(
        tmp_path / "router.yaml", {"topology_tersetalk": fit_router(rows, labels)}
    )
    _rewrite(path, edit)
    with pytest.raises(RouterFileError, match=match) as err:
        read_router_yaml(path)
    assert str(path) in str(err.value)


def test_reading_a_missing_or_shapeless_router_file(tmp_path):
    with pytest.raises(RouterFileError, match="does not exist; `tersetalk topology-fit`"):
        read_router_yaml(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(RouterFileError, match="bad.yaml: must be a mapping"):
        read_router_yaml(bad)
    bad.write_text("systems: {}\n")
    with pytest.raises(RouterFileError, match="key systems must map"):
        read_router_yaml(bad)
    with pytest.raises(ValueError, match="no fitted routers"):
        write_router_yaml(tmp_path / "empty.yaml", {})


# -- leave-one-task-out -------------------------------------------------------------------
def synthetic_frame(per_task: int = 6) -> pd.DataFrame:
    """Signals per study task: the chain tasks' briefs compute more, or hold code."""
    rng = np.random.default_rng(11)
    rows = []
    for task in (*DIRECT, *CHAINED):
        for i in range(per_task):
            chain = task in CHAINED
            arithmetic = int(rng.integers(6, 10) if chain else rng.integers(0, 3))
            quantities, code = int(rng.integers(0, 2)), int(task == "humaneval")
            rows.append({"task": task, "example_id": f"{task}-{i}", "error": None,
                         "arithmetic": arithmetic, "plans": 0, "hops": 1, "conditions": 0,
                         "quantities": quantities, "code": code})  # fmt: skip
    return pd.DataFrame(rows)


def test_leave_one_task_out_fits_on_the_others_and_scores_the_held_out_task():
    frame = synthetic_frame()
    loto = leave_one_task_out_fitted(frame, l2=0.1)
    assert list(loto["held_out"]) == sorted((*DIRECT, *CHAINED))
    assert list(loto.columns) == [
        "held_out", "n", "selection_accuracy", "train_selection_accuracy", "theta", "weights",
        "note",
    ]  # fmt: skip
    assert (loto["n"] == 6).all() and (loto["note"] == "").all()
    assert (loto["selection_accuracy"] == 1.0).all()  # arithmetic alone separates every task
    for _, row in loto.iterrows():
        train = frame[frame["task"] != row["held_out"]]
        fit = fit_frame(train, l2=0.1)
        assert json.loads(row["weights"]) == fit.weights and row["theta"] == fit.theta
    # humaneval held out: code never varies in training, so it keeps the design's weight
    held = json.loads(loto.set_index("held_out").loc["humaneval", "weights"])
    assert held["code"] == DEFAULT_WEIGHTS["code"]


def test_leave_one_task_out_names_a_fit_that_cannot_be_made():
    frame = synthetic_frame()
    two = frame[frame["task"].isin(["boolq", "gsm8k"])]
    loto = leave_one_task_out_fitted(two)
    assert loto["selection_accuracy"].isna().all() and loto["theta"].isna().all()
    assert loto["note"].str.contains("one label only").all()
    with pytest.raises(ValueError, match="mixes systems"):
        leave_one_task_out_fitted(frame.assign(system=["a", "b"] * (len(frame) // 2)))


def test_fit_frame_leaves_error_rows_out_and_says_so():
    frame = synthetic_frame()
    frame.loc[0, "error"] = "ValueError: broken brief"
    fit = fit_frame(frame)
    assert fit.n == len(frame) - 1 and fit.extra == {"rows_with_error_left_out": 1}
    assert fit.tasks == tuple(sorted((*DIRECT, *CHAINED)))


# -- signals from briefs, as a run writes them --------------------------------------------
@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    out = {}
    for task in ("boolq", "hotpotqa", "humaneval"):
        ev, _ = sample(task, load_records(task, data_dir=REPO / "data"), n=3, calibration_n=0,
                       seed=5)  # fmt: skip
        path = tmp_path_factory.mktemp(task) / "sample.parquet"
        ev.to_parquet(path)
        out[task] = path
    return out


def no_model(*args):
    raise AssertionError("writing a deterministic Manager's brief called the model")


@pytest.mark.parametrize("name", ["topology_tersetalk", "topology_freeform"])
@pytest.mark.parametrize("task", ["boolq", "hotpotqa", "humaneval"])
def test_signals_are_the_ones_a_routed_run_records(base_config, tmp_path, samples, name, task):
    base_config["cache_dir"] = str(tmp_path / "cache")
    spec = run_spec(topology_config(base_config), task, name, "adaptive")
    if task == "humaneval" and bubblewrap_status()[0] is None:  # scripted code, the weaker box
        spec["task_options"] = {**spec.get("task_options", {}), "sandbox": {"isolation": "process"}}
    df = brief_signals(spec, samples[task], client=ScriptedClient(no_model))
    assert df["error"].isna().all() and (df["model_calls"] == 0).all()
    assert (df["label"] == ("star" if task in DIRECT else "chain")).all()
    assert (df["features"] == ("typed" if name == "topology_tersetalk" else "prose")).all()
    ran = run(spec, samples[task], tmp_path / "run.parquet", client=ScriptedClient(scripted),
              progress=False, events=False).set_index("example_id")  # fmt: skip
    for _, row in df.iterrows():
        recorded = ran.loc[row["example_id"]]
        assert json.loads(row["route_signals"]) == json.loads(recorded["route_signals"])
        assert {k: int(row[k]) for k in SIGNALS} == json.loads(recorded["route_signals"])
        assert row["route_rule"] == recorded["route_rule"]
        assert row["route_score"] == recorded["route_score"]
        brief = message_list(recorded["messages"])[0]
        assert brief["kind"] == "brief" and brief["content"] == row["brief"]
        assert brief["tokens_cl100k"] == row["tokens_cl100k"]


def test_the_signals_and_fit_commands_make_no_model_call(tmp_path, samples, monkeypatch):
    import tersetalk.pipeline.topology_signals as ts
    from tersetalk.cli import main

    def refuse(spec):
        raise AssertionError("the model client was built")

    monkeypatch.setattr(ts, "client_from_spec", refuse)
    monkeypatch.chdir(REPO)
    files = []
    for name in ("topology_tersetalk", "topology_freeform"):
        for task in ("boolq", "hotpotqa"):
            out = tmp_path / f"{task}-{name}.parquet"
            argv = ["topology-signals", "--sample", str(samples[task]), "--system", name,
                    "--variant", "adaptive", "--out", str(out)]  # fmt: skip
            assert main(argv) == 0
            files.append(out)
            df = pd.read_parquet(out)
            assert len(df) == 3 and (df["model_calls"] == 0).all() and (df["task"] == task).all()
    router, loto = tmp_path / "router.yaml", tmp_path / "loto.csv"
    argv = ["topology-fit", *map(str, files), "--l2", "1.0", "--seed", "0", "--out", str(router),
            "--loto-out", str(loto)]  # fmt: skip
    assert main(argv) == 0
    fits, meta = read_router_yaml(router)
    assert sorted(fits) == ["topology_freeform", "topology_tersetalk"]
    assert meta["variants"] == {
        "topology_freeform": ["adaptive"],
        "topology_tersetalk": ["adaptive"],
    }
    for fit in fits.values():
        assert isinstance(fit, FittedRouter) and fit.n == 6 and fit.tasks == ("boolq", "hotpotqa")
    table = pd.read_csv(loto)
    assert sorted(set(table["system"])) == ["topology_freeform", "topology_tersetalk"]
    assert table["note"].str.contains("one label only").all()  # two tasks: one label left
    # selection accuracy of the same signals: the variant's rule and the fitted router
    sel = tmp_path / "selection.csv"
    argv = ["topology-selection", *map(str, files), "--router-yaml", str(router),
            "--out", str(sel)]  # fmt: skip
    assert main(argv) == 0
    table = pd.read_csv(sel)
    frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    for (system, router_kind), g in table[table["task"] == "all"].groupby(["system", "router"]):
        rows = frame[frame["system"] == system]
        if router_kind == "variant":
            expected = int((rows["route_rule"] == rows["label"]).sum())
        else:
            fit = fits[system]
            pairs = zip(rows["route_signals"], rows["label"], strict=True)
            expected = sum(fit.route(json.loads(s)) == lab for s, lab in pairs)
        (row,) = g.to_dict("records")
        assert (row["n"], row["k"]) == (6, expected)
        assert row["ci_low"] <= row["selection_accuracy"] <= row["ci_high"]
    per_task = table[(table["task"] != "all") & (table["router"] == "variant")]
    assert set(per_task["task"]) == {"boolq", "hotpotqa"} and (per_task["n"] == 3).all()


def test_the_fit_command_says_what_is_wrong(tmp_path, samples, monkeypatch, capsys):
    from tersetalk.cli import main

    monkeypatch.chdir(REPO)
    out = tmp_path / "boolq.parquet"
    argv = ["topology-signals", "--sample", str(samples["boolq"]), "--system",
            "topology_tersetalk", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    with pytest.raises(SystemExit, match="topology_tersetalk: the rows hold one label only"):
        main(["topology-fit", str(out), "--out", str(tmp_path / "r.yaml")])
    argv = ["topology-signals", "--sample", str(samples["boolq"]), "--system", "tersetalk",
            "--variant", "default", "--out", str(out)]  # fmt: skip
    assert main(argv) == 2
    assert "topology.systems.tersetalk" in capsys.readouterr().err


def test_the_lazy_client_is_built_only_when_a_brief_asks():
    built = []

    def factory():
        built.append(1)
        return ScriptedClient(["a plan"])

    client = LazyClient(factory, {"backend": "llamacpp", "model_path": "x.gguf"})
    assert client.describe() == {"backend": "llamacpp", "model_path": "x.gguf"}
    assert not client.built and not built
    from tersetalk.models import GenerationConfig

    assert client.chat([{"role": "user", "content": "plan"}], GenerationConfig()).text == "a plan"
    assert client.built and built == [1]
    client.count_tokens("x")
    assert built == [1]  # built once


def planning(messages, gen, schema):
    """The scripted double with a Manager that plans: two steps (control flow only)."""
    if schema is not None and schema.__name__ == "ManagerPlan":
        return json.dumps({"steps": [{"text": "Find the facts", "ref": ""},
                                     {"text": "Check the result", "ref": ""}]})  # fmt: skip
    if messages[0]["content"].startswith("You are the Manager"):
        return "1. Find the facts\n2. Check the result"
    return scripted(messages, gen, schema)


@pytest.mark.parametrize("name", ["topology_tersetalk", "topology_freeform"])
def test_a_planning_manager_asks_the_model_once_per_brief(base_config, tmp_path, samples, name):
    base_config["cache_dir"] = str(tmp_path / "cache")
    spec = run_spec(topology_config(base_config), "hotpotqa", name, "planned")
    df = brief_signals(spec, samples["hotpotqa"], client=ScriptedClient(planning))
    assert df["error"].isna().all() and (df["model_calls"] == 1).all()
    assert (df["plans"] == 2).all() and df["brief"].str.contains("Find the facts").all()
    ran = run(spec, samples["hotpotqa"], tmp_path / "run.parquet",
              client=ScriptedClient(planning), progress=False, events=False)  # fmt: skip
    assert list(df["route_signals"]) == list(ran["route_signals"])


def test_one_router_file_error_for_the_run_and_the_fit():
    # a run stops on a bad router file whichever reader found it (the runner knows one class)
    from tersetalk.pipeline.runner import stopping_fault
    from tersetalk.topology import fit, router

    assert fit.RouterFileError is router.RouterFileError
    assert stopping_fault(fit.RouterFileError("router file x: key theta is missing"))
