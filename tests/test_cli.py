import subprocess
import sys

import pytest

from tersetalk.cli import build_parser, main

COMMANDS = [
    "sample",
    "run",
    "score",
    "aggregate",
    "stats",
    "calibrate",
    "plot",
    "plot-ablation",
    "plot-ablations",
]


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_option_is_explained(cmd):
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[cmd]
    for action in sub._actions:
        if action.dest == "help":
            continue
        assert action.help, f"tersetalk {cmd} {action.option_strings or action.dest} has no help"


def test_help_runs_as_a_command():
    out = subprocess.run([sys.executable, "-m", "tersetalk", "run", "--help"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert "--spec-json" in out.stdout and "resume" in out.stdout


def test_bad_config_is_a_clean_error(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 1\nn_eval: 0\ntasks: [gsm8k]\n")
    code = main(["sample", "--task", "gsm8k", "--config", str(bad), "--out", str(tmp_path / "x")])
    assert code == 2
    err = capsys.readouterr().err
    assert "config key 'n_eval'" in err


def _metrics_file(tmp_path, task, label, correct):
    import pandas as pd

    system, variant = label.split("/")
    n = len(correct)
    df = pd.DataFrame({"task": task, "system": system, "variant": variant,
                       "example_id": [f"e{i}" for i in range(n)],
                       "correct": [float(c) for c in correct],
                       "tokens_total_cl100k": [100.0 + i for i in range(n)],
                       "error": [None] * n})  # fmt: skip
    path = tmp_path / f"{task}_{system}_{variant}.parquet"
    df.to_parquet(path)
    return str(path)


def test_stats_keeps_a_row_for_each_comparison_it_could_not_compute(tmp_path, caplog):
    import json
    import logging

    import pandas as pd

    files = [
        _metrics_file(tmp_path, "gsm8k", "tersetalk/default", [1, 0, 1, 1]),
        _metrics_file(tmp_path, "gsm8k", "freeform/default", [1, 1, 1, 0]),
        _metrics_file(tmp_path, "hotpotqa", "freeform/default", [1, 0, 0, 1]),
    ]
    comparisons = [
        ["hybrid/default", "llmlingua/default"],
        ["tersetalk/default", "freeform/default"],
    ]
    out = tmp_path / "ni.parquet"
    csv, tex = tmp_path / "ni.csv", tmp_path / "ni.tex"
    args = ["stats", *files, "--comparisons", json.dumps(comparisons), "--n-resamples", "200",
            "--out", str(out), "--csv", str(csv), "--tex", str(tex)]  # fmt: skip
    with caplog.at_level(logging.WARNING):
        assert main(args) == 0
    df = pd.read_parquet(out)
    assert list(zip(df["task"], df["treatment"], strict=True)) == [
        ("gsm8k", "hybrid/default"),
        ("gsm8k", "tersetalk/default"),
        ("hotpotqa", "hybrid/default"),
        ("hotpotqa", "tersetalk/default"),
    ]
    computed = df["not_computed"] == ""
    assert computed.tolist() == [False, True, False, False]
    why = df.set_index(["task", "treatment"])["not_computed"]
    assert why["gsm8k", "hybrid/default"] == (
        "no gsm8k records of hybrid/default and llmlingua/default among the inputs"
    )
    assert why["hotpotqa", "tersetalk/default"] == (
        "no hotpotqa records of tersetalk/default among the inputs"
    )
    assert df.loc[~computed, "non_inferior"].isna().all()
    assert (df["margin"] == 0.02).all() and (df["n_resamples"] == 200).all()
    assert "tersetalk/default vs freeform/default on hotpotqa not computed" in caplog.text
    assert (
        pd.read_csv(csv, keep_default_na=False)["not_computed"].tolist()
        == df["not_computed"].tolist()
    )
    assert "Not computed:" in tex.read_text()


def test_stats_with_no_computable_comparison_stops_with_a_message(tmp_path, capsys):
    import json

    files = [_metrics_file(tmp_path, "gsm8k", "freeform/default", [1, 0])]
    args = ["stats", *files, "--comparisons", json.dumps([["a/b", "c/d"]]),
            "--out", str(tmp_path / "ni.parquet")]  # fmt: skip
    assert main(args) == 2
    assert "tersetalk stats: error: " in capsys.readouterr().err
    assert not (tmp_path / "ni.parquet").exists()


def _summary(methods):
    import pandas as pd

    n = len(methods)
    return pd.DataFrame({
        "task": ["gsm8k"] * n, "system": ["freeform", "tersetalk", "hybrid"][:n],
        "variant": ["default"] * n, "n": [10] * n, "accuracy": [0.5] * n,
        "tokens_total_cl100k_mean": [100.0] * n,
        "semantic_bertscore_f1_mean": [0.9 if m.startswith("bertscore") else float("nan")
                                       for m in methods],
        "semantic_method": methods, "backend": ["llamacpp"] * n, "model": ["smollm2"] * n,
    })  # fmt: skip


BERT = "bertscore-f1:all-MiniLM-L6-v2:layer6"


def test_main_table_names_the_semantic_method(tmp_path):
    import pandas as pd

    from tersetalk.plots.tables import write_main_table

    write_main_table(_summary([BERT, BERT]), tmp_path, seed=0)
    csv = pd.read_csv(tmp_path / "main.csv")
    assert csv["semantic method"].tolist() == [BERT, BERT]
    tex = (tmp_path / "main.tex").read_text()
    caption = tex.split(r"\caption{")[1].split(r"\label")[0]
    assert "Semantic preservation method: bertscore-f1:all-MiniLM-L6-v2:layer6 (every run)" in (
        caption
    )
    assert "semantic method" not in tex.split(r"\midrule")[0]  # caption, not a wide column


def test_main_table_makes_a_bertscore_fallback_visible(tmp_path):
    import pandas as pd

    from tersetalk.plots.tables import write_main_table

    fallback = "unavailable (OSError: no model at /x/y_z\n" + "very long " * 20 + ")"
    write_main_table(_summary([BERT, fallback, BERT]), tmp_path, seed=0)
    csv = pd.read_csv(tmp_path / "main.csv")
    assert csv["semantic method"].tolist() == [BERT, fallback, BERT]
    assert csv["BERTScore F1"].isna().tolist() == [False, True, False]
    tex = (tmp_path / "main.tex").read_text()
    caption = tex.split(r"\caption{")[1].split(r"\label")[0]
    assert "methods differ between runs" in caption
    assert "gsm8k freeform/default, gsm8k hybrid/default" in caption.replace(r"\_", "_")
    assert "unavailable (OSError: no model at /x/y\\_z" in caption  # escaped, shortened
    assert "gsm8k tersetalk/default" in caption and "..." in caption
    assert "-- where it was unavailable" in caption


def test_semantic_method_note_without_the_column():
    from tersetalk.plots.figures import semantic_method_note

    summary = _summary([BERT]).drop(columns="semantic_method")
    assert semantic_method_note(summary) == "Semantic preservation method: not recorded."


@pytest.mark.parametrize(
    "argv",
    [
        ["sample", "--task", "gsm8k", "--n", "1", "--out", "s.parquet"],
        ["stats", "r.parquet", "--comparisons", "[]", "--out", "s.parquet"],
        ["plot", "--summary", "s.parquet", "--records", "r.parquet"],
        ["topology", "r.parquet", "--tables", "t", "--figures", "f"],
        ["topology-fit", "s.parquet", "--out", "router.yaml"],
    ],
    ids=lambda argv: argv[0],
)
def test_a_negative_seed_is_refused_when_the_command_is_parsed(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main([*argv, "--seed", "-1"])
    assert info.value.code == 2
    assert "argument --seed: must be 0 or more, got -1" in capsys.readouterr().err


def test_the_topology_commands_stop_with_exit_code_2_and_an_error_line(tmp_path, capsys):
    missing = str(tmp_path / "missing.parquet")
    argvs = [
        ["topology", missing, "--tables", str(tmp_path / "t"), "--figures", str(tmp_path / "f")],
        ["topology-selection", missing],
    ]
    for argv in argvs:
        try:
            code = main(argv)
        except SystemExit as exc:  # the commands' own refusals
            code = exc.code
        assert code == 2, argv
        err = capsys.readouterr().err
        assert err.startswith(f"tersetalk {argv[0]}: error: ") and "missing.parquet" in err
