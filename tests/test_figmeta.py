"""Figures and tables record n, model, seed and commit from their data, and the report's
captions print what was recorded, not the config."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from tersetalk.core import figmeta
from tersetalk.tasks import registry

# the processes that draw and caption figures (the figure commands, Snakemake's) load the
# task registry, which names each task to readers (Task.display_name)
registry.names()

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "workflow" / "report"


def _summary() -> pd.DataFrame:
    """Summary rows of two tasks at n = 1 and 2 (a config would say 10)."""
    return pd.DataFrame(
        {
            "task": ["gsm8k", "gsm8k", "hotpotqa"],
            "system": ["freeform", "tersetalk", "freeform"],
            "variant": ["default"] * 3,
            "n": [1, 1, 2],
            "seed": [7, 7, 7],
            "backend": ["llamacpp"] * 3,
            "model": ["SmolLM2-135M-Instruct"] * 3,
            "accuracy": [0.0, 1.0, 0.5],
        }
    )


def _figure():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    return fig


def test_save_figure_records_n_from_the_data_model_seed_and_commit(tmp_path):
    from tersetalk.core.plotting import save_figure

    paths = save_figure(_figure(), tmp_path / "figures" / "mykey" / "fig", data=_summary())
    assert {p.suffix for p in paths} == {".pdf", ".png"}
    for path in paths:
        meta = figmeta.read(path)
        assert meta["n"] == {"gsm8k": 1, "hotpotqa": 2}
        assert meta["model"] == {"key": "mykey", "names": ["llamacpp:SmolLM2-135M-Instruct"]}
        assert meta["seed"] == 7
        assert meta["commit"] == figmeta.git_commit()
        assert figmeta.sidecar(path).is_file()
    png = next(p for p in paths if p.suffix == ".png")
    # the PNG carries it in its own text chunks too: read without the sidecar
    figmeta.sidecar(png).unlink()
    assert figmeta.read(png)["n"] == {"gsm8k": 1, "hotpotqa": 2}
    assert "GSM8K 1, HotpotQA 2" in figmeta._png_text(png)["Description"]
    pdf = next(p for p in paths if p.suffix == ".pdf")
    raw = pdf.read_bytes().decode("latin-1")
    assert "/Subject (Built from: n per task: GSM8K 1, HotpotQA 2" in raw


def test_a_caption_names_each_task_by_its_display_name_else_by_its_id():
    meta = {"n": {"socialiqa": 3, "my_plugin_task": 4}}
    assert "n per task: Social IQa 3, my_plugin_task 4" in figmeta.caption(meta)


def test_n_per_task_from_per_example_rows_and_differing_runs():
    rows = pd.DataFrame({"task": ["a", "a", "a", "b"], "example_id": ["1", "2", "1", "9"]})
    assert figmeta.describe(rows, commit="x")["n"] == {"a": 2, "b": 1}
    questions = pd.DataFrame({"encoder": ["json", "toon", "json"], "qid": ["q1", "q1", "q2"]})
    assert figmeta.describe(questions, commit="x")["n"] == {"all": 2}
    runs = pd.DataFrame({"task": ["a", "a"], "n": [3, 5]})
    meta = figmeta.describe(runs, commit="x")
    assert meta["n"] == {"a": [3, 5]}
    assert "n per task: a 3-5" in figmeta.caption(meta)


def test_table_writer_records_sidecars(tmp_path):
    from tersetalk.plots.tables import write_main_table

    summary = _summary()
    for col in ("tokens_total_cl100k_mean", "token_reduction", "f1"):
        summary[col] = 1.0
    try:
        paths = write_main_table(summary, tmp_path / "results" / "k" / "tables", seed=3)
    except (KeyError, ValueError) as exc:  # the table needs more columns than shown here
        pytest.skip(f"main table needs a fuller summary: {exc}")
    for path in paths:
        meta = figmeta.read(path)
        assert meta["n"] == {"gsm8k": 1, "hotpotqa": 2}
        assert meta["bootstrap_seed"] == 3
        assert meta["model"]["key"] == "k"


def test_commit_of_a_git_checkout_is_marked_dirty_and_elsewhere_unknown(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    assert figmeta.git_commit(str(tmp_path)) == "unknown"  # not a checkout
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "f.txt").write_text("1\n")
    subprocess.run([*git, "add", "f.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    figmeta.git_commit.cache_clear()
    assert figmeta.git_commit(str(repo)) == head.stdout.strip()
    (repo / "f.txt").write_text("2\n")
    figmeta.git_commit.cache_clear()
    assert figmeta.git_commit(str(repo)) == head.stdout.strip() + "-dirty"
    figmeta.git_commit.cache_clear()
    assert re.fullmatch(r"([0-9a-f]{40}(-dirty)?|unknown)", figmeta.git_commit())


def test_missing_or_stale_metadata_says_not_recorded(tmp_path):
    path = tmp_path / "old.csv"
    path.write_text("a\n1\n")
    assert figmeta.read(path) is None
    figmeta.write(path, figmeta.describe(pd.DataFrame({"task": ["a"], "n": [4]}), commit="c"))
    assert figmeta.read(path)["n"] == {"a": 4}
    os.utime(path, (0, 2_000_000_000))  # touched later (Snakemake does): still its own
    assert figmeta.read(path)["n"] == {"a": 4}
    path.write_text("a\n2\n")  # replaced by a writer that does not record
    assert figmeta.read(path) is None
    assert "not recorded" in figmeta.caption(None)


def test_caption_template_prints_the_recorded_values_not_the_config(tmp_path):
    """The real caption template, rendered as Snakemake's report renders it (a Jinja
    environment with ``snakemake`` the job's Snakemake object), with a config that says
    n_eval 10, seed 0 and another model: the caption says what the file recorded."""
    from jinja2 import Environment
    from snakemake.iocontainers import Namedlist
    from snakemake.script import Snakemake

    from tersetalk.core.plotting import save_figure

    stem = tmp_path / "figures" / "mykey" / "quality_vs_tokens"
    save_figure(_figure(), stem, data=_summary())
    output = Namedlist(fromdict={"pareto": str(stem) + ".png", "pareto_pdf": str(stem) + ".pdf"})
    provenance = figmeta.provenance(output)
    # by output name, position and file name (a rule whose outputs are a plain list)
    assert provenance["pareto"] == provenance["0"] == provenance["quality_vs_tokens.png"]
    params = Namedlist(fromdict={"provenance": provenance})
    config = {
        "n_eval": 10,
        "seed": 0,
        "models": {"backend": "openai", "model": "other-model"},
        "evaluation": {"seed": 0, "reference": "freeform/default"},
    }
    job = Snakemake(
        Namedlist(), output, params, Namedlist(), 1, Namedlist(), Namedlist(), config,
        "plot", None,
    )  # fmt: skip
    env = Environment(trim_blocks=True, lstrip_blocks=True)
    for name in ("quality_vs_tokens.rst", "token_breakdown.rst"):
        text = env.from_string((REPORT / name).read_text()).render(snakemake=job)
        if name == "token_breakdown.rst":
            # this caption's output is "roles", which this job does not have
            assert "Built from: not recorded." in text
            continue
        assert "n per task: GSM8K 1, HotpotQA 2" in text
        assert "``mykey``" in text and "llamacpp:SmolLM2-135M-Instruct" in text
        assert "seed 7" in text
        assert "other-model" not in text and "n = 10" not in text


SNAKEFILE = """
import sys
from tersetalk.core import figmeta
from tersetalk.tasks import registry

registry.names()  # as the workflow's config check does: tasks are named to readers

configfile: "config.yaml"

rule all:
    input: "figures/k/quality_vs_tokens.png"

rule plot:
    output:
        pareto=report(
            "figures/k/quality_vs_tokens.png",
            caption="{caption}",
            category="Main results",
        ),
        pareto_pdf="figures/k/quality_vs_tokens.pdf",
    params:
        provenance=lambda wildcards, output: figmeta.provenance(output),
    shell:
        "{python} draw.py {{output.pareto}}"
"""

DRAW = """
import sys
import pandas as pd
import matplotlib.pyplot as plt
from tersetalk.core.plotting import save_figure

summary = pd.DataFrame({"task": ["gsm8k"], "n": [1], "seed": [0],
                        "backend": ["llamacpp"], "model": ["SmolLM2-135M-Instruct"]})
fig, ax = plt.subplots()
ax.plot([0, 1])
save_figure(fig, sys.argv[1].removesuffix(".png"), data=summary)
"""


def test_real_snakemake_report_shows_recorded_n_and_does_not_rerun(tmp_path):
    """Real Snakemake: a job writes a figure with its metadata, ``--report`` renders the
    caption from it, and the derived ``provenance`` parameter is no rerun trigger."""
    (tmp_path / "Snakefile").write_text(
        SNAKEFILE.format(caption=REPORT / "quality_vs_tokens.rst", python=sys.executable)
    )
    (tmp_path / "draw.py").write_text(DRAW)
    (tmp_path / "config.yaml").write_text(
        "n_eval: 10\nseed: 0\nmodels: {backend: openai, model: other-model}\n"
        "evaluation: {seed: 0, reference: freeform/default}\n"
    )
    snakemake = [sys.executable, "-m", "snakemake", "--cores", "1", "-d", str(tmp_path),
                 "-s", str(tmp_path / "Snakefile")]  # fmt: skip
    subprocess.run(snakemake, check=True, capture_output=True)
    dry = subprocess.run([*snakemake, "-n"], check=True, capture_output=True, text=True)
    assert "Nothing to be done" in dry.stdout + dry.stderr
    report = tmp_path / "report.zip"
    subprocess.run([*snakemake, "--report", str(report)], check=True, capture_output=True)
    with zipfile.ZipFile(report) as z:
        text = "\n".join(
            z.read(n).decode("utf-8", "replace") for n in z.namelist() if n.endswith(".html")
        )
    assert "Built from: n = 1" in text or "Built from: n per task: GSM8K 1" in text
    assert "other-model" not in text
    meta = json.loads((tmp_path / "figures/k/quality_vs_tokens.png.meta.json").read_text())
    assert meta["n"] == {"gsm8k": 1}
    # Snakemake touched the outputs after the job: the sidecars still count as theirs
    for name in ("quality_vs_tokens.png", "quality_vs_tokens.pdf"):
        assert figmeta.read(tmp_path / "figures/k" / name)["n"] == {"gsm8k": 1}


def test_report_figures_flags_each_png_with_its_own_caption():
    from snakemake.io import get_flag_value, is_flagged

    files = ["figures/k/topology_theta.png", "figures/k/topology_theta.pdf"]
    marked = figmeta.report_figures(files, "Topology study")
    assert marked[1] == files[1] and not is_flagged(marked[1], "report")
    flag = get_flag_value(marked[0], "report")
    assert flag.caption == "../report/topology_theta.rst"
    assert flag.category == "Topology study"
    # every caption a rule's report() names exists and reads the provenance param
    for name in ("topology_selection", "topology_tokens_accuracy", "topology_theta",
                 "topology_ablations", "formats_savings", "formats_knapsack",
                 "formats_comprehension"):  # fmt: skip
        text = (REPORT / f"{name}.rst").read_text()
        assert f'provenance or {{}}).get("{name}.png"' in text
    for rst in REPORT.glob("*.rst"):
        text = rst.read_text()
        assert 'snakemake.config["n_eval"]' not in text, rst.name
        assert 'snakemake.config["models"]' not in text, rst.name


def test_every_rule_with_report_outputs_passes_the_provenance_param():
    """A caption prints ``snakemake.params.provenance``: a rule that marks a file for the
    report without that param would caption it 'not recorded'."""
    rules = ROOT / "workflow" / "rules"
    missing = []
    for smk in rules.glob("*.smk"):
        blocks = re.split(r"^(?=rule |use rule )", smk.read_text(), flags=re.M)
        for body in blocks:
            marks = ("report(", "report_figures(", "ablation_figures(")
            if any(m in body for m in marks) and body.startswith("rule "):
                if "figmeta.provenance(output)" not in body:
                    missing.append(f"{smk.name}: {body.splitlines()[0]}")
    assert not missing, missing
