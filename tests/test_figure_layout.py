"""Every figure the workflow draws, checked for overlapping text and empty axes.

Each figure goes through the function its rule calls (``tersetalk plot``,
``plot-ablation`` per configured ablation, ``bench plot``, ``formats plot``, ``topology``,
``models compare``) on small frames with the columns of a tiny run; the figure is caught
where it is saved and checked by :mod:`tersetalk.core.figcheck`. The checker itself is
tested on figures that are wrong on purpose, so it cannot pass by seeing nothing.

Synthetic numbers: a test of the drawing code, never a reported result.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import tersetalk.core.plotting as plotting  # noqa: E402
import tersetalk.formats.plot as formats_plot  # noqa: E402
import tersetalk.plots.figures as F  # noqa: E402
import tersetalk.topology.plots as topology_plot  # noqa: E402
from tersetalk.core.figcheck import (  # noqa: E402
    FigureLayoutError,
    _tick_labels,
    check_figure,
    empty_axes,
    figure_problems,
    overlapping_texts,
)

REPO = Path(__file__).resolve().parents[1]
TASKS = ("hotpotqa", "gsm8k")
N = 4  # examples per task, as in a tiny run
MAIN_RUNS = [("freeform", "default"), ("freeform", "cod"), ("llmlingua", "default"),
             ("tersetalk", "default"), ("hybrid", "default"), ("mediator", "default"),
             ("msp", "default")]  # fmt: skip
ROLES = ("manager", "worker", "critic")


# -- the checker on figures that are wrong on purpose ----------------------------------


def test_checker_finds_overlapping_text():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1])
    ax.set_title("a title long enough to collide")
    fig.suptitle("a suptitle long enough to collide", y=0.9)  # drawn over the title
    ax.annotate("here", (0.5, 0.5))
    ax.annotate("here too", (0.5, 0.5))  # on top of the first annotation
    problems = overlapping_texts(fig)
    assert any("suptitle" in p or "figure text" in p for p in problems), problems
    assert any("'here'" in p and "'here too'" in p for p in problems), problems
    with pytest.raises(FigureLayoutError, match="overlaps"):
        check_figure(fig, "bad")
    plt.close(fig)


def test_checker_finds_crowded_tick_labels():
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.bar(range(12), range(12))
    ax.set_xticks(range(12), [f"category {i}" for i in range(12)])
    assert any("tick label" in p for p in overlapping_texts(fig))
    plt.close(fig)


def test_checker_finds_an_empty_axes():
    fig, (full, empty, only_ref) = plt.subplots(1, 3, figsize=(9, 3))
    full.plot([0, 1], [0, 1])
    empty.set_title("nothing")
    only_ref.axhline(0.5)  # a reference line is not data
    only_ref.text(0.5, 0.5, "no runs")  # nor is a message
    problems = empty_axes(fig)
    assert len(problems) == 2 and "nothing" in problems[0], problems
    assert figure_problems(fig)[-2:] == problems
    plt.close(fig)


def test_checker_leaves_out_a_tick_just_below_a_log_view():
    """A log view spanning seven decades whose lower end lies just above a decade:
    matplotlib does not draw that decade's label, so the checker must not check it (it
    did, and reported it over the axis label: test_bench_figure failed once so)."""
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [1e-4, 1e3])
    ax.set_yscale("log")
    ax.set_ylim(1.0008e-4, 2154)  # 1e-4 is 0.08% below the view
    fig.canvas.draw()
    checked = [lab.text.get_position()[1] for lab in _tick_labels(ax.yaxis, "axes 0", "y")]
    assert checked and min(checked) >= 1e-3, checked  # 1e-3 ... 1e3, not 1e-4
    ax.set_ylim(1e-4, 2154)  # now 1e-4 lies on the view's edge: drawn, and checked
    fig.canvas.draw()
    checked = [lab.text.get_position()[1] for lab in _tick_labels(ax.yaxis, "axes 0", "y")]
    assert min(checked) == pytest.approx(1e-4)
    plt.close(fig)


def test_checker_passes_a_clean_figure():
    fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
    ax.scatter([1, 2, 3], [0, 0, 0])  # zeros are data
    ax.set(title="clean", xlabel="x", ylabel="y")
    fig.suptitle("suptitle")
    check_figure(fig)
    plt.close(fig)


# -- catching every figure where it is saved --------------------------------------------


@pytest.fixture
def caught(monkeypatch, tmp_path):
    """Figures saved during the test, by file stem, with their problems (checked before
    saving, as drawn); the files are written to ``tmp_path`` as usual."""
    seen: dict[str, list[str]] = {}
    real = plotting.save_figure

    def spy(fig, out_stem, *args, **kwargs):
        seen[Path(out_stem).name] = figure_problems(fig)
        return real(fig, out_stem, *args, **kwargs)

    for module in (plotting, F, topology_plot, formats_plot):
        monkeypatch.setattr(module, "save_figure", spy)
    return seen


def assert_clean(seen: dict[str, list[str]], expected: set[str]) -> None:
    assert expected <= set(seen), f"not drawn: {sorted(expected - set(seen))}"
    bad = {name: problems for name, problems in seen.items() if problems}
    assert not bad, json.dumps(bad, indent=1)


# -- inputs with a tiny run's columns --------------------------------------------------


def records(runs=MAIN_RUNS, *, variants_of=None) -> pd.DataFrame:
    """Per-example metrics (``tersetalk score --out-records``) of ``runs`` on TASKS."""
    rng = np.random.default_rng(0)
    rows = []
    for t, task in enumerate(TASKS):
        for s, (system, variant) in enumerate(runs):
            for i in range(N):
                sent = {r: float(rng.integers(10, 200)) for r in ROLES}
                # msp never right on gsm8k: a zero that must not look like a missing bar
                right = (i * (s + 2) + t) % 3 != 0
                correct = 0.0 if (system == "msp" and task == "gsm8k") else float(right)
                rows.append(
                    {"task": task, "system": system, "variant": variant, "seed": 0,
                     "example_id": f"{task}-{i}", "correct": correct, "error": None,
                     "tokens_total_cl100k": sum(sent.values()),
                     "tokens_M_W_cl100k": 20.0 + 30 * i + s,
                     **{f"tokens_sent_{r}_cl100k": v for r, v in sent.items()}}
                )  # fmt: skip
    return pd.DataFrame(rows)


def summary_of(rec: pd.DataFrame, *, overflow=None, compliance=None) -> pd.DataFrame:
    """The per-run rows ``tersetalk aggregate`` writes, as far as the figures read them."""
    rows = []
    for (task, system, variant), g in rec.groupby(["task", "system", "variant"], sort=True):
        ok = g[g["error"].isna()]
        rows.append(
            {"task": task, "system": system, "variant": variant, "seed": 0, "n": len(g),
             "n_errors": len(g) - len(ok), "accuracy": g["correct"].mean(),
             "tokens_total_cl100k_mean": ok["tokens_total_cl100k"].mean(),
             **{f"tokens_sent_{r}_cl100k_mean": ok[f"tokens_sent_{r}_cl100k"].mean()
                for r in ROLES},
             "token_reduction_mean": 0.1, "overflow_rate": overflow(variant) if overflow
             else (0.0 if system == "tersetalk" else np.nan),
             "compliance_first_try_rate": compliance(variant) if compliance else np.nan,
             "semantic_method": "jaccard", "backend": "llamacpp", "model": "qwen2.5-0.5b.gguf"}
        )  # fmt: skip
    return pd.DataFrame(rows)


# -- the figures -----------------------------------------------------------------------


def test_main_figures(caught, tmp_path):
    rec = records()
    # hybrid never ran gsm8k's longest examples: a missing bin, not a zero
    rec = rec[~((rec["system"] == "hybrid") & rec["example_id"].isin(["gsm8k-2", "gsm8k-3"]))]
    summary = F.with_intervals(summary_of(rec), rec, n_resamples=200)
    F.quality_vs_tokens(summary, tmp_path / "quality_vs_tokens")
    F.token_breakdown(summary, tmp_path / "token_breakdown")
    F.accuracy_by_length(rec, "freeform/default", tmp_path / "accuracy_by_length")
    assert_clean(caught, {"quality_vs_tokens", "token_breakdown", "accuracy_by_length"})


def test_accuracy_by_length_tells_zero_from_missing(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(F, "save_figure", lambda fig, out_stem, **kw: seen.setdefault("fig", fig))
    rec = records([("freeform", "default"), ("msp", "default"), ("hybrid", "default")])
    # hybrid has no example in gsm8k's long bin; msp is 0 everywhere on gsm8k
    rec = rec[~((rec["system"] == "hybrid") & rec["example_id"].isin(["gsm8k-2", "gsm8k-3"]))]
    F.accuracy_by_length(rec, "freeform/default", tmp_path / "x")
    ax = next(a for a in seen["fig"].axes if a.get_title() == "GSM8K")
    hatched = [p for p in ax.patches if p.get_hatch()]
    assert len(hatched) == 1  # the one missing cell, and only it
    # msp's zeros: each a dot on the axis with an interval above it
    dots = [c for c in ax.lines if len(c.get_xdata()) and c.get_marker() == "o"]
    zero_dots = [y for line in dots for y in line.get_ydata() if y == 0]
    assert len(zero_dots) >= 3  # msp in each bin (and any other run at 0)
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "short\nn=1",
        "medium\nn=1",
        "long\nn=2",
    ]
    plt.close(seen["fig"])


def _ablations():
    from tersetalk.pipeline.config import ablation_values, load_config
    from tersetalk.systems import ablation_axis

    config = load_config(REPO / "config" / "config.yaml")
    for name, spec in config["ablations"].items():
        axis = ablation_axis(spec["system"], spec["setting"])
        yield name, spec, ablation_values(config, name), axis


ABLATIONS = list(_ablations())


@pytest.mark.parametrize("name,spec,values,axis", ABLATIONS, ids=[a[0] for a in ABLATIONS])
@pytest.mark.parametrize("with_records", [True, False], ids=["records", "scores-only"])
def test_ablation_figure(caught, tmp_path, name, spec, values, axis, with_records):
    variants = list(spec["variants"])
    rec = records([(spec["system"], v) for v in variants])
    overflow = (lambda v: 0.1 * variants.index(v)) if name == "caps" else None
    summary = summary_of(rec, overflow=overflow, compliance=lambda v: 0.5)
    F.ablation(summary, spec["system"], variants, spec["setting"], values,
               tmp_path / f"ablation_{name}", axis_label=axis.label, axis_panels=axis.panels,
               records=rec if with_records else None)  # fmt: skip
    assert_clean(caught, {f"ablation_{name}"})


def test_ablation_leaves_out_an_all_zero_overflow_panel_and_draws_flags_as_categories(
    monkeypatch, tmp_path
):
    seen = {}

    def spy(fig, out_stem, **kwargs):
        seen["fig"] = fig
        return [out_stem]

    monkeypatch.setattr(F, "save_figure", spy)
    variants = ["caps_very_relaxed", "with_roles"]
    rec = records([("tersetalk", v) for v in variants])
    F.ablation(summary_of(rec), "tersetalk", variants, "role_lines",
               {"caps_very_relaxed": False, "with_roles": True}, tmp_path / "x")  # fmt: skip
    axes = seen["fig"].axes
    assert len(axes) == 2  # tokens and accuracy: every overflow rate was 0
    ticks = [t.get_text() for t in axes[1].get_xticklabels()]
    assert ticks == ["off", "on"]
    assert all(len(a.patches) == 2 * len(TASKS) for a in axes)  # bars, not lines
    legend = [t.get_text() for t in seen["fig"].legends[0].get_texts()]
    assert sorted(legend) == [f"GSM8K (n={N})", f"HotpotQA (n={N})"]
    plt.close(seen["fig"])


def test_bench_figure(caught, tmp_path):
    from tersetalk.cli import main

    msgs = [
        {"sender": "M", "receiver": "W", "kind": "brief",
         "content": "Goal: Solve it.\nFacts:\n- Dr. Lee has 3.5 kg.\nQuestion: How much?"},
        {"sender": "C", "receiver": "W", "kind": "verdict", "content": '["r","C"]\n["v","R"]'},
    ]  # fmt: skip
    run = tmp_path / "run.parquet"
    pd.DataFrame([{"task": "gsm8k", "system": "freeform", "variant": "default",
                   "example_id": "e1", "messages": json.dumps(msgs)}]).to_parquet(run)  # fmt: skip
    corpus = tmp_path / "corpus.parquet"
    assert main(["bench", "corpus", "--runs", str(run), "--sizes", "1,8", "--per-size", "4",
                 "--out", str(corpus)]) == 0  # fmt: skip
    fast = ["--repeats", "1", "--warmup", "0", "--min-batch-ms", "0.01"]
    out = {}
    for which in ("mb1", "mb2", "mb3", "mb4"):
        out[which] = tmp_path / f"{which}.parquet"
        extra = {"mb2": ["--chunk-sizes", "1,16", "--stream-bytes", "1024"],
                 "mb4": ["--memory-sizes", "50,200"]}.get(which, [])  # fmt: skip
        source = [] if which == "mb4" else ["--corpus", str(corpus)]
        assert main(["bench", "run", "--which", which, *source, "--out", str(out[which]),
                     *fast, *extra]) == 0  # fmt: skip
    assert main(["bench", "plot", *[a for w in out for a in (f"--{w}", str(out[w]))],
                 "--out-stem", str(tmp_path / "bench")]) == 0  # fmt: skip
    assert_clean(caught, {"bench"})
    # the same figure at timings a loaded machine can give one batch of 10 us: MB-2's
    # ratios to the limit over seven decades, the view's bottom just above 1e-4
    mb2 = pd.read_parquet(out["mb2"])
    shown = mb2.index[(mb2["method"] != mb2["limit"]) & ~mb2["is_baseline"]]
    assert len(shown) >= 2
    ratios = np.ones(len(shown))
    ratios[:2] = 2.17e-4, 1000.0
    for col in ("ratio_vs_limit", "ratio_vs_limit_lo", "ratio_vs_limit_hi"):
        mb2.loc[shown, col] = ratios
    mb2.to_parquet(out["mb2"])
    assert main(["bench", "plot", *[a for w in out for a in (f"--{w}", str(out[w]))],
                 "--out-stem", str(tmp_path / "bench_loaded")]) == 0  # fmt: skip
    assert_clean(caught, {"bench", "bench_loaded"})


def test_formats_figures(caught, tmp_path):
    from tersetalk.formats.experiments import main

    data = REPO / "data" / "toolresponses"
    for exp in ("savings", "knapsack", "dedup"):
        argv = [exp, "--data-dir", str(data), "--out", str(tmp_path / f"{exp}.parquet"),
                "--limit", "3", "--tokenizers", "o200k_base", "--budgets", "0.5", "1",
                "--dedup-json", json.dumps({"sessions": 1, "calls": 6})]  # fmt: skip
        assert main(argv) == 0
    # as a real run lands: most encoders within a few tokens and at the same accuracy
    tokens = {
        "json_pretty": 150,
        "json_compact": 100,
        "toon": 80,
        "csv": 80,
        "markdown_table": 81,
        "kv": 82,
        "best_single": 80,
        "mckp_plain": 79,
        "mckp": 79,
    }
    comp = pd.DataFrame(
        [{"payload_id": f"p{p}", "shape": "table", "qid": f"q{p}{q}", "kind": "count",
          "encoder": e, "tokenizer": "o200k_base", "payload_tokens": t + p,
          "prompt_tokens": 50 + t, "gold": "1", "prediction": "1",
          "correct": (p + q + (e == "kv")) % 3 != 0, "error": None}
         for p in range(2) for q in range(3) for e, t in tokens.items()]
    )  # fmt: skip
    comp.to_parquet(tmp_path / "comprehension.parquet")
    argv = [a for exp in ("savings", "knapsack", "dedup", "comprehension")
            for a in (f"--{exp}", str(tmp_path / f"{exp}.parquet"))]  # fmt: skip
    assert formats_plot.main([*argv, "--figures", str(tmp_path / "f"),
                              "--tables", str(tmp_path / "t")]) == 0  # fmt: skip
    assert_clean(caught, {"formats_savings", "formats_knapsack", "formats_comprehension"})


def test_topology_figures(caught, tmp_path):
    from test_topology_report import study

    from tersetalk.topology.cli import report

    runs = []
    for (system, variant), g in study(n=3).groupby(["system", "variant"]):
        p = tmp_path / f"{system}-{variant}.parquet"
        g.to_parquet(p)
        runs.append(str(p))
    report(runs, tmp_path / "t", tmp_path / "f", n_resamples=100)
    assert_clean(caught, {"topology_selection", "topology_tokens_accuracy", "topology_theta",
                          "topology_ablations"})  # fmt: skip


def test_model_sensitivity_figure(caught, tmp_path):
    from tersetalk.pipeline.sensitivity import comparison_table, plot_comparison

    rec = records()
    big = rec.assign(correct=1.0 - rec["correct"])  # another model, other answers
    summaries = {"qwen2.5-0.5b": summary_of(rec), "llama3.1-8b": summary_of(big)}
    summaries["qwen2.5-0.5b"].loc[lambda d: d["system"] == "freeform", "token_reduction_mean"] = 0
    table = comparison_table(summaries, "freeform/default")
    plot_comparison(table, tmp_path / "model_sensitivity")
    assert_clean(caught, {"model_sensitivity"})


# -- a marker hidden under another, and every other figure the workflow writes ---------


def test_checker_finds_a_marker_hidden_under_another_series():
    from tersetalk.core.figcheck import hidden_markers

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.errorbar([1.0], [0.5], yerr=[[0.1], [0.1]], fmt="o", ms=8, label="mediator")
    ax.errorbar([1.0], [0.5], yerr=[[0.1], [0.1]], fmt="s", ms=8, label="hybrid")
    ax.plot([0, 1, 2], [0.2, 0.21, 0.22], "o-", ms=8, label="one dense series")  # its own
    problems = hidden_markers(fig)
    assert len(problems) == 1 and "'hybrid' hides under one of 'mediator'" in problems[0]
    plt.close(fig)


def test_dodge_sets_coinciding_markers_side_by_side():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set(xlim=(0, 2), ylim=(0, 1))
    offsets = plotting.dodge(ax, [[(1.0, 0.5)], [(1.0, 0.5)], [(1.5, 0.2)]], 10.0)
    assert offsets[0] == 0.0 and abs(offsets[1]) == 10.0 and offsets[2] == 0.0
    for dx, fmt in zip(offsets[:2], "os", strict=True):
        ax.errorbar([1.0], [0.5], fmt=fmt, ms=8, transform=plotting.shifted(ax, dx))
    assert figure_problems(fig) == []
    plt.close(fig)


def test_a_system_keeps_its_colour_and_marker_in_every_figure():
    systems = ["freeform", "llmlingua", "tersetalk", "hybrid", "mediator", "msp", "formats"]
    styles = [plotting.system_style(s) for s in systems]
    assert len(set(styles)) == len(styles)
    assert len({c for c, _ in styles}) == len(styles)  # a colour each (Okabe and Ito)
    assert all(c in plotting.OKABE_ITO for c, _ in styles)
    assert plotting.system_style("my_system") == plotting.system_style("my_system")


def _recorded_problems(paths) -> list[str]:
    from tersetalk.core import figmeta

    metas = [json.loads(figmeta.sidecar(p).read_text()) for p in paths]
    assert metas and all("layout_problems" in m for m in metas)
    return [p for m in metas for p in m["layout_problems"]]


def test_stats_sim_figures_are_clean(tmp_path):
    from test_stats_sim import TINY  # the simulation tests' small grid, every study in it

    from tersetalk.plots.stats_sim import plot_stats_sim
    from tersetalk.stats.simulation import run_simulation, settings_from_config

    paths = plot_stats_sim(run_simulation(settings_from_config(TINY)), tmp_path / "sim")
    assert _recorded_problems(paths) == []


def test_concurrency_figure_is_clean(tmp_path):
    from tersetalk.bench.concurrency import plot

    summary = pd.DataFrame({"max_concurrency": [1, 2, 4], "median_ratio_to_level_1": [1.0,
                            1.6, 1.9], "servers": 2, "cpus": 2})  # fmt: skip
    paths = plot(summary, tmp_path / "concurrency.png")
    assert {p.suffix for p in paths} == {".png", ".pdf"}
    assert _recorded_problems(paths) == []


def test_mcp_figures_are_clean(tmp_path):
    from tersetalk.mcp import plot as mcp_plot
    from tersetalk.mcp import tuned_plot
    from tersetalk.mcp.experiment import DIRECT, LIST_STEP
    from tersetalk.mcp.tuned import DEFAULT, EVAL, TUNED

    rows = []
    for server in ("sqlite", "memory"):
        for arm in (DIRECT, "lossless"):
            for i, tool in enumerate(("read_query", "list_tables", "describe")):
                rows.append(
                    {
                        "server": server,
                        "arm": arm,
                        "tool": tool,
                        "tokens": 100 + 40 * i if arm == DIRECT else 60 + 30 * i,
                        "kind": "table",
                        "t_added_ms": np.nan if arm == DIRECT else 3.0 + 7 * i,
                    }
                )
    paths = mcp_plot.figure(pd.DataFrame(rows), tmp_path / "mcp")
    rows = []
    for server in ("sqlite", "memory"):
        for arm in (DIRECT, DEFAULT, TUNED):
            for seed in range(3):
                for tool in (LIST_STEP, "read_query", "read_query"):
                    rows.append(
                        {
                            "server": server,
                            "arm": arm,
                            "seed": seed,
                            "split": EVAL,
                            "tool": tool,
                            "tokens": 50 + 10 * seed,
                            "hint_tokens": 3,
                            "dedup_hit": seed % 2 == 0,
                            "n_changes": 2,
                            "n_applied": 2,
                        }
                    )
    paths += tuned_plot.figure(pd.DataFrame(rows), tmp_path / "mcp_tuned")
    assert _recorded_problems(paths) == []
