"""The data dictionary (tersetalk.core.columns) against the columns the writers really write.

Frames come from the writing code paths on the scripted model double (control flow only,
no reported number): a free-form and a TerseTalk run, ``tersetalk score`` on them (the
per-example metrics and the score row) and ``tersetalk aggregate`` (the summary).
"""

import copy
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from tersetalk.cli import main
from tersetalk.core import columns as C
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import load_config, run_spec, validate_config
from tersetalk.pipeline.runner import run
from tersetalk.tasks.loading import load_records, sample

REPO = Path(__file__).resolve().parents[1]


def _freeform_model(messages):
    system = messages[0]["content"]
    if system.startswith("You are the Critic"):
        return "REVISE: check it" if "Paris" in messages[-1]["content"] else "ACCEPT."
    return "Answer: Paris"


def _structured_model(messages, gen, schema):
    if schema is None:
        return "Answer: Paris"
    if schema.__name__ == "CriticReply":
        return json.dumps({"verdict": "R", "note": "check the year"})
    return json.dumps({"plan": ["look up"], "need": [], "answer": "Paris"})


def _spec(base_config, tmp_path, system, settings):
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    if settings is not None:
        cfg["systems"][system] = {"variants": {"v": settings}}
    cfg.update(ablations={}, calibration={})
    cfg["evaluation"]["comparisons"] = []
    validate_config(cfg)
    return run_spec(cfg, "hotpotqa", system, "default" if settings is None else "v")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Every file the run, score and aggregate steps write for two systems."""
    base_config = load_config(REPO / "config" / "config.yaml")
    tmp = tmp_path_factory.mktemp("columns")
    records = load_records("hotpotqa", data_dir=REPO / "data")
    ev, _ = sample("hotpotqa", records, n=2, calibration_n=0, seed=5)
    sample_path = tmp / "samples" / "hotpotqa.parquet"
    sample_path.parent.mkdir()
    ev.to_parquet(sample_path)
    runs = {}
    for system, settings, respond in [
        ("freeform", None, ScriptedClient(_freeform_model)),
        ("tersetalk", {"caps": "aggressive", "deref": "conditional"},
         ScriptedClient(_structured_model)),
    ]:  # fmt: skip
        spec = _spec(base_config, tmp, system, settings)
        out = tmp / "runs" / "hotpotqa" / system / "v.parquet"
        run(spec, sample_path, out, client=respond, progress=False)
        runs[system] = out
    # the topology study's routed run: router outcome columns, the chain's edges
    spec = _spec(base_config, tmp, "topology_tersetalk", {"policy": "chain"})
    out = tmp / "topology" / "runs" / "hotpotqa" / "topology_tersetalk" / "v.parquet"
    run(spec, sample_path, out, client=ScriptedClient(_structured_model), progress=False)
    scores = []
    for system, path in runs.items():
        metrics = tmp / "metrics" / "hotpotqa" / system / "v.parquet"
        score = tmp / "scores" / "hotpotqa" / system / "v.parquet"
        argv = ["score", "--run", str(path), "--out-records", str(metrics),
                "--reference", str(runs["freeform"]), "--out", str(score)]  # fmt: skip
        assert main(argv) == 0
        scores.append(score)
    summary = tmp / "summary.parquet"
    assert main(["aggregate", *map(str, scores), "--out", str(summary),
                 "--csv", str(tmp / "summary.csv")]) == 0  # fmt: skip
    return tmp


def _frames(root: Path):
    for path in sorted(root.rglob("*")):
        if path.suffix in (".parquet", ".csv") and "cache" not in path.parts:
            kind = C.file_kind(path)
            assert kind is not None, f"no kind for {path}"
            cols = C._read_columns(path)
            yield path, kind, cols


def test_every_written_column_is_documented(written):
    kinds = set()
    for path, kind, cols in _frames(written):
        kinds.add(kind)
        assert C.undocumented(cols, kind) == [], path
    assert {"run", "metrics", "summary", "samples"} <= kinds
    routed = pd.read_parquet(next(written.glob("topology/runs/hotpotqa/*/v.parquet")))
    assert (routed["route"] == "chain").all() and "tokens_W1_W2_cl100k" in routed.columns


def test_no_stale_entries_for_what_every_run_writes(written):
    """Entries the common code writes (and the TerseTalk codec's counters and the router's
    columns) each match a column of these files; entries of other systems and tasks
    cannot be checked here and are left out."""
    seen: dict[str, set[str]] = {}
    for _, kind, cols in _frames(written):
        seen.setdefault(kind, set()).update(cols)
    checkable = {"", "tersetalk", "star topology", "router"}
    stale = []
    for kind in ("run", "metrics", "summary", "samples"):
        for e in C.columns_for(kind):
            if e.only not in checkable or e.of:
                continue
            if not any(C.match(c, kind) is e for c in seen[kind]):
                stale.append((kind, e.pattern))
    assert stale == []


def test_an_invented_column_is_reported_undocumented(written, tmp_path, capsys):
    assert C.undocumented(["c_invented_counter", "tokens_M_W_cl100k", "task"], "run") == [
        "c_invented_counter"
    ]
    assert C.undocumented(["c_invented_counter_mean", "accuracy"], "summary") == [
        "c_invented_counter_mean"
    ]
    # a real run file with one column added: the CLI flags it, and --strict fails
    path = next(written.glob("runs/hotpotqa/tersetalk/*.parquet"))
    df = pd.read_parquet(path)
    df["c_invented_counter"] = 1
    out = tmp_path / "runs" / "hotpotqa" / "tersetalk" / "x.parquet"
    out.parent.mkdir(parents=True)
    df.to_parquet(out)
    assert main(["columns", str(out)]) == 0
    text = capsys.readouterr().out
    assert "`c_invented_counter` | | | **UNDOCUMENTED**" in text
    assert "1 undocumented column(s): c_invented_counter" in text
    with pytest.raises(SystemExit) as exc:
        main(["columns", "--strict", str(out)])
    assert exc.value.code == 1


def test_patterns_match_only_their_placeholders():
    assert C.match("tokens_total_cl100k", "run") is not None
    assert C.match("tokens_total_gpt2", "run") is None
    assert C.match("c_lines_f", "run") is not None
    assert C.match("c_lines_zz", "run") is None
    assert C.match("c_repairs_code_fence", "metrics") is not None
    assert C.match("tokens_sent_manager_o200k_mean", "summary") is not None
    assert C.file_kind("results/m/runs/gsm8k/freeform/default.parquet") == "run"
    assert C.file_kind("results/m/summary.parquet") == "summary"
    assert C.file_kind("results/mcp/summary.csv") == "mcp"


def test_docs_columns_md_is_up_to_date():
    doc = REPO / "docs" / "columns.md"
    assert doc.read_text(encoding="utf-8") == C.markdown(), (
        "docs/columns.md is stale: run `tersetalk columns --markdown docs/columns.md`"
    )


def test_every_counter_is_documented_once():
    names = [e.pattern for e in C.entries()]
    assert len(names) == len(set((e.pattern, e.files) for e in C.entries()))
    assert sum(n.startswith("c_") for n in names) >= 90


def test_messages_are_a_nested_list_and_old_json_strings_still_load(written, tmp_path):
    import pyarrow.parquet as pq

    from tersetalk.core.io import message_list, messages_arrow_type

    path = written / "runs" / "hotpotqa" / "tersetalk" / "v.parquet"
    assert pq.read_schema(path).field("messages").type == messages_arrow_type()
    df = pd.read_parquet(path)
    # a run file as older versions wrote it: the same conversation as a JSON string, and
    # the per-direction token columns without their tokenizer (tokens_M_W)
    old = df.assign(messages=[json.dumps(message_list(m)) for m in df["messages"]])
    old = old.rename(columns=lambda c: re.sub(r"^(tokens_[A-Z]\w*_[A-Z]\w*)_cl100k$", r"\1", c))
    assert "tokens_M_W" in old.columns and "tokens_M_W_cl100k" not in old.columns
    old_path = tmp_path / "runs" / "hotpotqa" / "tersetalk" / "v.parquet"
    old_path.parent.mkdir(parents=True)
    old.to_parquet(old_path)
    scores = {}
    for name, run_path in (("new", path), ("old", old_path)):
        out = tmp_path / f"{name}.parquet"
        assert main(["score", "--run", str(run_path),
                     "--out-records", str(tmp_path / f"{name}_m.parquet"),
                     "--out", str(out)]) == 0  # fmt: skip
        scores[name] = pd.read_parquet(tmp_path / f"{name}_m.parquet")
        scores[name + "_summary"] = pd.read_parquet(out)
    for kind in ("", "_summary"):
        new, old_ = scores["new" + kind], scores["old" + kind]
        cols = [c for c in new.columns if not c.startswith(("t_", "tokens_per_s"))]
        assert list(new.columns) == list(old_.columns)
        pd.testing.assert_frame_equal(new[cols], old_[cols])
    assert "tokens_M_W_cl100k_mean" in scores["old_summary"].columns
    assert message_list(None) == [] and message_list("") == []
