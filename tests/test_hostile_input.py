"""Hostile input gets a clear refusal, never a traceback or a quietly wrong result.

Each test is one reported case, run the way a user meets it: the protocol's strict
checkers, the ``tersetalk`` and ``tersetalk formats`` commands (a clean ``error:``
line and exit code 2), the sample reader, the atomic writers and the GSM8K scorer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tersetalk.cli import main
from tersetalk.protocol import (
    EncodingError,
    InvalidJSONError,
    ProtocolError,
    StreamReader,
    parse_strict,
    validate_strict,
)
from tersetalk.protocol.codec import MAX_DEPTH

REPO = Path(__file__).resolve().parents[1]
CONFIG = str(REPO / "config" / "config.yaml")


def outcome(fn, *args):
    """What ``fn`` raised, as (type, line, problem); anything but a ProtocolError escapes."""
    try:
        fn(*args)
    except ProtocolError as exc:
        return type(exc), exc.line_no, exc.problem
    return None


def stream_arrays(data: bytes) -> None:
    reader = StreamReader(strict=True, arrays=True)
    reader.feed(data)
    reader.close()


# -- 1. the strict checkers: the protocol's own errors ------------------------------------
DEEP_AFTER_A_LINE = '["f","a"]\n' + "[" * 5000 + "]" * 5000 + "\n"  # msgspec recursed
DEEP_ON_ONE_LINE = '["f","a"] ' + "[" * 100_000 + "\n"
BAD_UTF8 = [b'["f","a"]\n["f","\xff"]\n', b'["f","\xc3"]\n', b'["f","a\xed\xa0\x80"]\n']


@pytest.mark.parametrize("text", [DEEP_AFTER_A_LINE, DEEP_ON_ONE_LINE], ids=["line2", "line1"])
def test_deep_nesting_is_an_invalid_json_error_in_validate_strict_and_the_array_reader(text):
    expected = outcome(parse_strict, text)
    assert expected[0] is InvalidJSONError and f"deeper than {MAX_DEPTH}" in expected[2]
    assert expected[1] == (2 if text.startswith('["f","a"]\n') else 1)
    for data in (text, text.encode()):
        assert outcome(validate_strict, data) == expected
    assert outcome(stream_arrays, text.encode()) == expected


@pytest.mark.parametrize("data", BAD_UTF8)
def test_invalid_utf8_is_an_encoding_error_naming_the_line(data):
    expected = outcome(parse_strict, data)
    assert expected[0] is EncodingError
    assert outcome(validate_strict, data) == expected
    assert outcome(stream_arrays, data) == expected


# -- 2. tersetalk formats encode / decode --------------------------------------------------
def tt(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tersetalk", *args], input=stdin,
                          capture_output=True, text=True, cwd=REPO, timeout=300)  # fmt: skip


def assert_refused(res: subprocess.CompletedProcess, *words: str) -> None:
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert "error:" in last
    for word in words:
        assert word in last


def test_formats_encode_refuses_json_nested_250_deep(tmp_path):
    for i, text in enumerate(["[" * 250 + "1" + "]" * 250, '{"a":' * 1000 + "1" + "}" * 1000]):
        path = tmp_path / f"deep{i}.json"
        path.write_text(text)
        assert_refused(tt("formats", "encode", str(path)), f"deep{i}.json", "deeper than 100")
    assert_refused(tt("formats", "savings", str(path)), "deeper than 100")


def test_formats_round_trip_still_works_at_the_depth_bound(tmp_path):
    value = json.loads('{"a":[' * 49 + '{"b":[1,2,"x"]}' + "]}" * 49)  # exactly 100 levels
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(value))
    enc = tt("formats", "encode", str(path))
    assert enc.returncode == 0, enc.stderr
    dec = tt("formats", "decode", stdin=enc.stdout)
    assert dec.returncode == 0, dec.stderr
    assert json.loads(dec.stdout) == value


def test_formats_decode_refuses_crafted_deep_documents():
    deep_json = "[" * 100_000 + "1" + "]" * 100_000
    assert_refused(tt("formats", "decode", stdin=deep_json), "deeper than 100")
    containers = "> [encoded: mckp]\n" + "".join(" " * i + "a (kv):\n" for i in range(3000))
    assert_refused(tt("formats", "decode", stdin=containers), "deeper than 100")
    inline = "> [encoded: mckp]\na: " + "[" * 5000 + "]" * 5000 + "\n"
    assert_refused(tt("formats", "decode", stdin=inline), "too deep")


def test_formats_decode_names_an_unknown_encoder_hint():
    res = tt("formats", "decode", stdin="> [encoded: bogus]\n1\n")
    assert_refused(res, "bogus", "known: mckp")
    from tersetalk.formats.encoders import FormatDecodeError
    from tersetalk.formats.solver import decode

    with pytest.raises(FormatDecodeError, match="names no known encoding"):
        decode("> [encoded: ]\n1")


# -- 3. malformed JSON options and a negative calibration size -----------------------------
SPEC_CASES = [
    ("{", "not valid JSON"),
    ("[1]", "must be a JSON object, got array"),
    ('{"task": "gsm8k"}', "lacks key(s) system"),
]


@pytest.mark.parametrize(("given", "said"), SPEC_CASES)
def test_malformed_spec_json_is_an_error_naming_the_option(tmp_path, capsys, given, said):
    code = main(["run", "--spec-json", given, "--sample", str(tmp_path / "s.parquet"),
                 "--out", str(tmp_path / "r.parquet")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("tersetalk run: error: --spec-json") and said in err


def test_spec_json_with_a_wrongly_typed_key_is_refused(tmp_path, capsys):
    from tersetalk.pipeline.config import load_config, run_spec

    spec = run_spec(load_config(CONFIG), "gsm8k", "freeform", "default")
    spec["seed"] = "zero"
    code = main(["run", "--spec-json", json.dumps(spec), "--sample", str(tmp_path / "s.parquet"),
                 "--out", str(tmp_path / "r.parquet")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "--spec-json key 'seed' must be a JSON integer, got string" in err


@pytest.mark.parametrize(("given", "said"), [("{", "not valid JSON"), ("[1]", "got array")])
def test_malformed_task_options_is_an_error_naming_the_option(tmp_path, capsys, given, said):
    data = str(REPO / "data")
    code = main(["sample", "--task", "toolqa", "--n", "1", "--task-options", given,
                 "--data-dir", data, "--out", str(tmp_path / "s.parquet")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert "tersetalk sample: error: --task-options" in err and said in err


def test_other_json_options_and_missing_run_options_exit_2_with_an_error_line(tmp_path, capsys):
    out = str(tmp_path / "x.parquet")
    cases = [
        (["stats", out, "--comparisons", "[[", "--out", out], "--comparisons is not valid JSON"),
        (["stats", out, "--comparisons", "[]", "--planned", "[1]", "--out", out],
         "--planned must be a JSON object"),
        (["plot-ablation", out, "--system", "tersetalk", "--variants", "a", "--setting", "x",
          "--values", "{", "--out-stem", out], "--values is not valid JSON"),
        (["run", "--sample", out, "--out", out], "give --task and --system"),
    ]  # fmt: skip
    for argv, said in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"tersetalk {argv[0]}: error: " in err and said in err, err


def test_negative_calibration_n_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["sample", "--task", "gsm8k", "--n", "1", "--calibration-n", "-3",
              "--out", str(tmp_path / "s.parquet")])  # fmt: skip
    assert info.value.code == 2
    assert "argument --calibration-n: must be 0 or more, got -3" in capsys.readouterr().err
    from tersetalk.tasks.loading import TaskDataError, sample

    records = [{"question": f"q{i}", "answer": f"#### {i}"} for i in range(5)]
    with pytest.raises(TaskDataError, match="calibration_n must be 0 or more"):
        sample("gsm8k", records, n=1, calibration_n=-3, seed=0)
    ev, cal = sample("gsm8k", records, n=1, calibration_n=0, seed=0)  # 0: no shard, still fine
    assert len(ev) == 1 and cal.empty


# -- 4. a sample of another task, and repeated example ids ---------------------------------
def write_sample(path: Path, task: str, ids: list[str]) -> Path:
    from tersetalk.tasks.loading import SAMPLE_COLUMNS

    hotpot = {"question": "Who?", "answer": "Ann", "id": "x", "context": [],
              "supporting_facts": []}  # fmt: skip
    record = hotpot if task == "hotpotqa" else {"question": "1+1?", "answer": "#### 2"}
    rows = [{"example_id": i, "task": task, "split": "eval", "position": k, "row": k,
             "question": record["question"], "gold": "Ann" if task == "hotpotqa" else "2",
             "record": json.dumps(record)} for k, i in enumerate(ids)]  # fmt: skip
    pd.DataFrame(rows, columns=SAMPLE_COLUMNS).to_parquet(path)
    return path


def test_run_refuses_a_sample_of_another_task(tmp_path, capsys):
    sample = write_sample(tmp_path / "hotpot.parquet", "hotpotqa", ["h1", "h2"])
    out = tmp_path / "run.parquet"
    code = main(["run", "--task", "gsm8k", "--system", "freeform", "--config", CONFIG,
                 "--sample", str(sample), "--out", str(out), "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert "holds hotpotqa examples, not gsm8k" in err
    assert not out.exists()


def test_a_sample_with_a_repeated_example_id_is_refused_at_read(tmp_path, capsys):
    from tersetalk.tasks.loading import TaskDataError, read_sample

    sample = write_sample(tmp_path / "dup.parquet", "gsm8k", ["g1", "g2", "g1"])
    with pytest.raises(TaskDataError, match=r"repeats example id 'g1' \(rows \[0, 2\]"):
        read_sample(sample)
    code = main(["run", "--task", "gsm8k", "--system", "freeform", "--config", CONFIG,
                 "--sample", str(sample), "--out", str(tmp_path / "r.parquet")])  # fmt: skip
    assert code == 2 and "repeats example id 'g1'" in capsys.readouterr().err


# -- 5. two writers of one file never share a temporary file -------------------------------
def test_two_writers_of_one_parquet_do_not_share_a_temporary_file(tmp_path):
    from tersetalk.core.io import _atomic, write_parquet_atomic

    out = tmp_path / "t.parquet"
    df = pd.DataFrame({"a": [1, 2]})

    def slow_writer(tmp: Path) -> None:
        tmp.write_bytes(b"first half, ")
        write_parquet_atomic(df, out)  # a second writer starts and finishes meanwhile
        with open(tmp, "ab") as fh:
            fh.write(b"second half")

    _atomic(out, slow_writer)  # the last rename wins, with its whole content
    assert out.read_bytes() == b"first half, second half"
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]  # no temporary left


def test_merging_side_files_and_seeding_tiktoken_leave_another_writers_temp_alone(
    tmp_path, monkeypatch
):
    from tersetalk.core import tokens
    from tersetalk.core.io import write_parquet_atomic
    from tersetalk.pipeline.shards import merge_side_files

    out = tmp_path / "t.parquet"
    (tmp_path / "t.parquet.tmp").write_text("another writer's")
    write_parquet_atomic(pd.DataFrame({"a": [1]}), out)
    assert (tmp_path / "t.parquet.tmp").read_text() == "another writer's"

    shards = [tmp_path / f"s{i}.parquet" for i in range(2)]
    for i, shard in enumerate(shards):
        shard.with_name(f"s{i}.trace.jsonl").write_text(f'{{"shard": {i}}}\n')
    merged = tmp_path / "m.parquet"
    (tmp_path / "m.trace.jsonl.tmp").write_text("another writer's")
    assert merge_side_files(shards, merged) == [tmp_path / "m.trace.jsonl"]
    assert (tmp_path / "m.trace.jsonl").read_text() == '{"shard": 0}\n{"shard": 1}\n'
    assert (tmp_path / "m.trace.jsonl.tmp").read_text() == "another writer's"

    cache = tmp_path / "tiktoken"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    import hashlib

    for name in tokens.ENCODINGS:  # another process's temporary file at the old fixed name
        key = hashlib.sha1((tokens._BLOB_BASE + f"{name}.tiktoken").encode()).hexdigest()
        (cache / f"{key}.tmp").write_text("another writer's")
    tokens.ensure_offline_tiktoken()
    assert sorted(p.name for p in cache.iterdir() if p.suffix != ".tmp") == sorted(
        hashlib.sha1((tokens._BLOB_BASE + f"{n}.tiktoken").encode()).hexdigest()
        for n in tokens.ENCODINGS
    )
    assert all(p.read_text() == "another writer's" for p in cache.glob("*.tmp"))
    assert len(list(cache.glob("*.tmp"))) == len(tokens.ENCODINGS)


# -- 6. a memory pointer is not a number ---------------------------------------------------
def test_gsm8k_scorer_does_not_read_a_memory_pointer_as_a_number():
    from tersetalk.tasks.gsm8k import extract_number, gsm8k_correct

    assert extract_number("The answer is M#1") is None
    assert not gsm8k_correct("The answer is M#1", "#### 1")
    assert not gsm8k_correct("see M#12", "12")
    assert extract_number("See M#1 for the steps. The answer is 18.") == "18"
    assert extract_number("Total: 5 apples (details in M#3)") == "5"
    assert extract_number("answer: M#1\nso 7 in all") == "7"
    # GSM8K's own "#### " convention is unchanged, pointer or not
    assert extract_number("M#2 says 3 + 4\n#### 7") == "7"
    assert gsm8k_correct("3 + 4 = 7\n#### 7", "Natalia ... #### 7")
    assert extract_number("#### 1,234 (M#9)") == "1234"


# -- 7. a run spec or options no config validated, and --out naming a folder ---------------
def default_spec() -> dict:
    from tersetalk.pipeline.config import load_config, run_spec

    return run_spec(load_config(CONFIG), "gsm8k", "freeform", "default")


def edited(spec: dict, path: tuple, value) -> dict:
    spec = json.loads(json.dumps(spec))
    node = spec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return spec


SPEC_EDITS = [
    (("models", "timeout_s"), "abc", "--spec-json key 'models.timeout_s': 'abc' is not of type"),
    (("system",), "nosuch", "--spec-json key 'system': unknown system 'nosuch'; registered"),
    (("task",), "nosuch", "--spec-json key 'task': unknown task 'nosuch'; registered"),
    (("seed",), -1, "--spec-json key 'seed': -1 is less than the minimum of 0"),
    (("generation", "temperature"), float("nan"),
     "--spec-json key 'generation.temperature': not a finite number"),
    (("models", "timeout_s"), float("inf"), "--spec-json key 'models.timeout_s': not a finite"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "value", "said"), SPEC_EDITS, ids=lambda x: str(x)[:20])
def test_a_wrong_value_in_a_spec_json_is_refused_before_the_run(
    tmp_path, capsys, monkeypatch, path, value, said
):
    import tersetalk.pipeline.runner

    monkeypatch.setattr(
        tersetalk.pipeline.runner, "run", lambda *a, **k: pytest.fail("the run started")
    )
    sample = write_sample(tmp_path / "s.parquet", "gsm8k", ["g1"])
    spec = json.dumps(edited(default_spec(), path, value))  # NaN/Infinity: Python's JSON
    code = main(["run", "--spec-json", spec, "--sample", str(sample),
                 "--out", str(tmp_path / "r.parquet")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("tersetalk run: error: ") and said in err, err


def test_every_spec_the_config_makes_passes_the_spec_check():
    from tersetalk.pipeline.config import (
        calibration_points,
        calibration_spec,
        check_run_spec,
        configured_runs,
        load_config,
        run_spec,
        topology_config,
    )

    cfg = load_config(CONFIG)
    specs = [run_spec(cfg, "hotpotqa", *label.split("/")) for label in configured_runs(cfg)]
    for system in cfg["calibration"]:
        specs += [
            calibration_spec(cfg, "gsm8k", system, p) for p in calibration_points(cfg, system)
        ]
    study = topology_config(cfg)
    specs += [
        run_spec(study, study["tasks"][0], *label.split("/")) for label in configured_runs(study)
    ]
    for spec in specs:
        check_run_spec(json.loads(json.dumps(spec)), "--spec-json")


DEEP_OPTION = '{"a":' * 20_000 + "1" + "}" * 20_000


def test_deeply_nested_json_options_are_refused_naming_the_option(tmp_path, capsys):
    out = str(tmp_path / "x.parquet")
    cases = [
        ("--spec-json", ["run", "--sample", out, "--out", out]),
        ("--task-options", ["sample", "--task", "toolqa", "--n", "1", "--data-dir",
                            str(REPO / "data"), "--out", out]),
        ("--comparisons", ["stats", out, "--out", out]),
        ("--planned", ["stats", out, "--comparisons", "[]", "--out", out]),
        ("--spec-json", ["calibrate", out, "--task", "gsm8k", "--reference-run", out,
                         "--sample", out, "--out", out]),
        ("--values", ["plot-ablation", out, "--system", "s", "--variants", "a", "--setting",
                      "x", "--out-stem", out]),
        ("--ablations-json", ["plot-ablations", out, "--out-dir", out]),
    ]  # fmt: skip
    for option, argv in cases:
        assert main([*argv, option, DEEP_OPTION]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith(f"tersetalk {argv[0]}: error: {option}: JSON nested deeper than"), err


def test_json_options_nested_up_to_the_bound_are_still_read(capsys):
    from tersetalk.pipeline.config import json_option as _json_option

    value = _json_option('{"a":' * 99 + "[1]" + "}" * 99, "--x", dict, "{}")
    for _ in range(99):
        value = value["a"]
    assert value == [1]


def test_run_refuses_an_out_that_is_a_folder_before_the_first_example(
    tmp_path, capsys, monkeypatch
):
    import tersetalk.pipeline.runner

    monkeypatch.setattr(
        tersetalk.pipeline.runner, "run", lambda *a, **k: pytest.fail("the run started")
    )
    sample = write_sample(tmp_path / "s.parquet", "gsm8k", ["g1"])
    folder = tmp_path / "runs"
    folder.mkdir()
    (tmp_path / "a_file").write_text("")
    for out, said in [
        (folder, f"--out {folder} is a folder; name the run Parquet file to write, e.g. "),
        (tmp_path / "a_file" / "r.parquet", f"{tmp_path / 'a_file'} is a file, not a folder"),
    ]:
        code = main(["run", "--task", "gsm8k", "--system", "freeform", "--config", CONFIG,
                     "--sample", str(sample), "--out", str(out)])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2 and said in err, err
