"""``tersetalk results-doc``: a model's results folder rendered as Markdown.

The document replaces the measurements that used to be pasted into the README, so what
matters is that it shows what the folder holds and says plainly what it does not.
"""

from __future__ import annotations

import pandas as pd

from tersetalk.cli import main
from tersetalk.pipeline import results_doc


def _folder(tmp_path):
    res = tmp_path / "results" / "toy-model"
    (res / "stats").mkdir(parents=True)
    (res / "tables").mkdir()
    pd.DataFrame(
        {
            "task": ["gsm8k", "gsm8k"],
            "system": ["freeform", "tersetalk"],
            "variant": ["default", "default"],
            "n": [2, 2],
            "n_errors": [0, 1],
            "accuracy": [0.5, 0.0],
            "tokens_total_cl100k_mean": [503.25, 128.75],
            "backend": ["llamacpp", "llamacpp"],
            "model": ["toy.gguf", "toy.gguf"],
            "c_unrelated_counter": [7, 8],
        }
    ).to_csv(res / "summary.csv", index=False)
    pd.DataFrame(
        {
            "id": ["token_reduction"],
            "task": ["gsm8k"],
            "run": ["tersetalk/default vs freeform/default"],
            "measured": ["74% fewer | tokens"],
            "status": ["met"],
            "reason": ["the whole interval\nclears 25%"],
        }
    ).to_csv(res / "tables" / "targets.csv", index=False)
    figs = tmp_path / "figures" / "toy-model"
    figs.mkdir(parents=True)
    (figs / "main.png").write_bytes(b"\x89PNG")
    return res, figs


def test_renders_present_tables_and_names_absent_ones(tmp_path):
    res, figs = _folder(tmp_path)
    out = res / "RESULTS.md"
    text = results_doc.render(res, figures=figs, out=out, commit="abc123", date="2026-11-27")
    assert text.startswith("# Results: toy-model")
    assert "- commit: `abc123`" in text and "- generated: 2026-11-27" in text
    assert "- model: `llamacpp:toy.gguf`" in text
    # the main comparison keeps the chosen columns (the token mean found by pattern)
    header = "| task | system | variant | n | n_errors | accuracy | tokens_total_cl100k_mean |"
    assert header in text
    assert "| gsm8k | tersetalk | default | 2 | 1 | 0 | 128.8 |" in text
    assert "c_unrelated_counter" not in text
    # a pipe and a line break inside a cell keep the row one row
    assert "74% fewer \\| tokens" in text and "the whole interval clears 25%" in text
    # every absent table has its line, naming the file and what builds it
    absent = ("stats/noninferiority.csv", "formats/savings_by_shape.csv", "topology/policies.csv")
    for rel in absent:
        assert f"Not built: `{(res / rel).as_posix()}` is absent" in text
    assert "`snakemake --cores all topology` builds it" in text
    # figures are linked relative to the document
    assert "- [main](../../figures/toy-model/main.png)" in text


def test_every_section_absent_and_no_figures(tmp_path):
    res = tmp_path / "results" / "empty"
    res.mkdir(parents=True)
    text = results_doc.render(res, figures=tmp_path / "nofigs", commit="x", date="d")
    assert text.count("Not built:") == len(results_doc.SECTIONS) + 1
    assert "no figures in" in text


def test_cli_writes_the_document(tmp_path, capsys):
    res, figs = _folder(tmp_path)
    out = res / "RESULTS.md"
    code = main(["results-doc", "--results", str(res), "--figures", str(figs), "--out", str(out)])
    assert code == 0
    text = out.read_text(encoding="utf-8")
    assert "# Results: toy-model" in text and "## Main comparison" in text
    assert "- commit: `" in text


def test_cli_missing_folder_is_a_clean_error(tmp_path, capsys):
    code = main(
        ["results-doc", "--results", str(tmp_path / "nope"), "--out", str(tmp_path / "R.md")]
    )
    assert code == 2
    assert "results-doc: error: --results" in capsys.readouterr().err
