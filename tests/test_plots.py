"""Ablation figures: files written, one figure legend, the enforcement panel (synthetic
summary rows; a test of the drawing code, not a reported number)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tersetalk.plots import figures  # noqa: E402
from tersetalk.systems import ablation_axis  # noqa: E402


def _summary() -> pd.DataFrame:
    rows = []
    for task in ("gsm8k", "hotpotqa"):
        for i, variant in enumerate(["caps_baseline", "enforce_json", "enforce_posthoc"]):
            rows.append(
                dict(task=task, system="tersetalk", variant=variant, n=4, accuracy=0.1 * i,
                     tokens_total_cl100k_mean=200.0 + 50 * i, overflow_rate=0.1,
                     compliance_first_try_rate=1.0 - 0.5 * i, backend="llamacpp",
                     model="m.gguf")
            )  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("setting,n_axes", [("enforcement", 4), ("summarizer", 3)])
def test_ablation_figure(tmp_path, monkeypatch, setting, n_axes):
    seen = {}
    real_save = figures.save_figure

    def spy(fig, out_stem, **kwargs):
        seen["axes"] = fig.axes
        seen["legends"] = [ax.get_legend() for ax in fig.axes]
        seen["fig_legends"] = fig.legends
        return real_save(fig, out_stem, **kwargs)

    monkeypatch.setattr(figures, "save_figure", spy)
    values = {"caps_baseline": "schema", "enforce_json": "json", "enforce_posthoc": "posthoc"}
    axis = ablation_axis("tersetalk", setting)  # what `tersetalk plot-ablation` passes in
    paths = figures.ablation(
        _summary(), "tersetalk", list(values), setting, values, tmp_path / "abl",
        axis_label=axis.label, axis_panels=axis.panels,
    )  # fmt: skip
    assert sorted(p.suffix for p in paths) == [".pdf", ".png"]
    assert all(p.stat().st_size > 1000 for p in paths)
    assert len(seen["axes"]) == n_axes
    assert seen["legends"] == [None] * n_axes and len(seen["fig_legends"]) == 1
    plt.close("all")


def test_plot_ablations_draws_what_plot_ablation_draws_one_by_one(tmp_path, monkeypatch):
    """The workflow's one job (plot-ablations) against one job per ablation: the same
    pixels, under ablation_<name>; the score files are read once (replaced here by the
    synthetic summary)."""
    import json

    import matplotlib.image as mpimg
    import numpy as np

    from tersetalk import cli
    from tersetalk.cli import figures

    reads = []
    monkeypatch.setattr(
        figures, "_ablation_inputs", lambda s, r: reads.append(s) or (_summary(), None)
    )
    values = {"caps_baseline": "schema", "enforce_json": "json", "enforce_posthoc": "posthoc"}
    specs = {
        name: {"system": "tersetalk", "setting": setting, "variants": list(values),
               "values": values}
        for name, setting in (("enforcement", "enforcement"), ("summarizer", "summarizer"))
    }  # fmt: skip
    both = tmp_path / "both"
    assert cli.main(["plot-ablations", "s.parquet", "--ablations-json", json.dumps(specs),
                     "--out-dir", str(both)]) == 0  # fmt: skip
    assert len(reads) == 1
    for name, spec in specs.items():
        one = tmp_path / f"one_{name}"
        assert cli.main(["plot-ablation", "s.parquet", "--system", "tersetalk",
                         "--variants", ",".join(spec["variants"]), "--setting", spec["setting"],
                         "--values", json.dumps(values), "--out-stem", str(one)]) == 0  # fmt: skip
        a = mpimg.imread(both / f"ablation_{name}.png")
        b = mpimg.imread(f"{one}.png")
        assert a.shape == b.shape and np.array_equal(a, b), name
    plt.close("all")


@pytest.mark.parametrize(
    ("given", "said"),
    [("{", "not valid JSON"), ('{"caps": {"system": "tersetalk"}}', "'caps' needs 'system'"),
     ('{"caps": {"system": "t", "setting": "caps", "variants": "a,b"}}', "a list"),
     ('{"caps": {"system": "t", "setting": "c", "variants": ["a"], "values": [1]}}',
      "'values' must be an object"),
     ('{"../x": {"system": "t", "setting": "c", "variants": ["a"]}}', "must be letters")],
)  # fmt: skip
def test_plot_ablations_refuses_a_malformed_ablations_json(tmp_path, capsys, given, said):
    from tersetalk.cli import main

    argv = ["plot-ablations", "s.parquet", "--ablations-json", given, "--out-dir", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "tersetalk plot-ablations: error: --ablations-json" in err and said in err, err
    assert not list(tmp_path.iterdir())
