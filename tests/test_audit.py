"""The token audit: attribution on hand-checkable lines, accounting, and the CLI end to end.

Every expectation is written as counts of whole strings (``tok(...)``), the same rule the
audit documents, so the tests say what is attributed where without hard-coding BPE.
"""

import copy
import json

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tersetalk.cli import build_parser, main
from tersetalk.core.tokens import count_tokens
from tersetalk.metrics.audit import (
    OH_COLUMNS,
    OVERHEAD_KINDS,
    audit_message,
    audit_runs,
    audit_summary,
    audit_table,
    brief_question,
    strip_title,
)
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import run_spec, validate_config
from tersetalk.pipeline.runner import run
from tersetalk.protocol import serialize
from tersetalk.protocol.lines import FactLine, QuestionLine, RoleLine, TextLine
from tersetalk.tasks.loading import load_records, sample


def tok(text: str) -> int:
    return count_tokens(text, "cl100k_base")


def only(rows):
    assert len(rows) == 1
    return rows[0].row()


def consistent(rows, content):
    """payload + every overhead category == total per line; lines add up to the message."""
    for r in (x.row() for x in rows):
        assert r["payload"] + sum(r[c] for c in OH_COLUMNS) == r["total"]
        assert r["overhead"] == r["total"] - r["payload"]
    assert sum(x.total for x in rows) == tok(content)


# --- one line at a time -------------------------------------------------------------


def test_a_fact_line_is_its_text_plus_syntax():
    r = only(audit_message('["f","Paris"]', kind="brief"))
    assert (r["tag"], r["part"], r["format"]) == ("f", "fact", "jsonl")
    assert r["total"] == tok('["f","Paris"]')
    assert r["payload"] == tok("Paris")
    assert r["oh_syntax"] == tok('["f","Paris"]') - tok("Paris")
    assert sum(r[c] for c in OH_COLUMNS if c != "oh_syntax") == 0


def test_a_role_line_is_all_role_overhead():
    r = only(audit_message('["r","M"]', kind="brief"))
    assert r["part"] == "role" and r["payload"] == 0
    assert r["oh_role"] == r["total"] == tok('["r","M"]')


def test_goal_question_and_fact_ref_lines():
    content = '["g","Solve it."]\n["q","W","How many?"]\n["f","Two cats.","M#3"]'
    goal, question, fact = (x.row() for x in audit_message(content, kind="brief"))
    assert goal["oh_goal"] == goal["total"] == tok('["g","Solve it."]')
    assert question["payload"] == tok("How many?") and question["oh_label"] == tok("W")
    assert fact["payload"] == tok("Two cats.") and fact["oh_ref"] == tok("M#3")
    consistent(audit_message(content, kind="brief"), content)


def test_escapes_are_counted_apart_from_the_payload():
    line = serialize([TextLine(text='say "hi"\nnow')])
    r = only(audit_message(line, kind="brief"))
    assert r["payload"] == tok('say "hi"\nnow')
    assert r["oh_escape"] == tok('say \\"hi\\"\\nnow') - tok('say "hi"\nnow')
    assert r["oh_syntax"] == r["total"] - r["payload"] - r["oh_escape"]


def test_a_hotpotqa_title_repeated_in_its_sentence_is_overhead():
    fact = "Paul Kantner: Paul Lorin Kantner was an American rock musician."
    sentence = "Paul Lorin Kantner was an American rock musician."
    assert strip_title("hotpotqa", fact) == sentence
    r = only(audit_message(serialize([FactLine(text=fact)]), kind="brief", task="hotpotqa"))
    assert r["oh_title"] == tok(fact) - tok(sentence)
    assert r["payload"] == tok(sentence)
    # a title that says something the sentence does not is payload; GSM8K has no titles
    assert strip_title("hotpotqa", "Kantner (album): He was a rock musician.") is None
    r = only(audit_message(serialize([FactLine(text=fact)]), kind="brief", task="gsm8k"))
    assert r["oh_title"] == 0 and r["payload"] == tok(fact)


def test_overflow_line_ids_and_method_are_refs_and_the_question_is_recognised():
    question = "Which city is the capital of France?"
    content = (
        '["o","Paris is the capital","M#1","extractive"]\n'
        '["o","Which city is the","M#2","extractive"]\n'
        '["o","capital of France","M#3","extractive"]'
    )
    rows = audit_message(content, kind="brief", question=question)
    fact, q, inside = (x.row() for x in rows)
    assert fact["part"] == "fact" and q["part"] == "question"
    assert inside["part"] == "fact"  # words inside the question, but not its start
    assert fact["payload"] == tok("Paris is the capital")
    assert fact["oh_ref"] == tok("M#1") + tok("extractive")
    consistent(rows, content)


def test_a_prose_brief_has_its_scaffolding_as_overhead():
    fact = "Paul Kantner: Paul Lorin Kantner was an American rock musician."
    content = (
        "Goal: Answer the question with a short span taken from the facts.\n"
        f"Facts:\n- {fact}\n- Two cats.\nQuestion: When did he die?"
    )
    rows = audit_message(content, kind="brief", task="hotpotqa")
    by_tag = {}
    for x in rows:
        by_tag.setdefault(x.tag, []).append(x.row())
    assert all(x.format == "prose" for x in rows)
    goal = by_tag["Goal:"][0]
    assert goal["oh_goal"] == goal["total"] and goal["payload"] == 0
    assert by_tag["Facts:"][0]["oh_syntax"] == by_tag["Facts:"][0]["total"]
    kantner, cats = by_tag["-"]
    assert kantner["total"] == tok(f"- {fact}")
    assert kantner["oh_title"] == tok(fact) - tok(strip_title("hotpotqa", fact))
    assert cats["payload"] == tok("Two cats.")
    assert cats["oh_syntax"] == tok("- Two cats.") - tok("Two cats.")
    q = by_tag["Question:"][0]
    assert q["payload"] == tok("When did he die?")
    assert q["oh_syntax"] == tok("Question: When did he die?") - tok("When did he die?")
    consistent(rows, content)


def test_a_prose_reply_is_one_block_and_its_copied_question_is_overhead():
    question = 'The person "Planet Earth" was the final album for died on what date?'
    reply = 'The person "Planet Earth" was the final album for died on January 28, 2016.\n'
    r = only(audit_message(reply, kind="draft", task="hotpotqa", question=question))
    assert (r["tag"], r["format"]) == ("text", "prose")
    assert r["payload"] == tok("January 28, 2016.")
    assert r["oh_question"] == tok(reply.strip()) - tok("January 28, 2016.")
    assert r["oh_syntax"] == tok(reply) - tok(reply.strip())  # the trailing newline
    # the same text in a brief is not a repeat: the brief is where the question comes from
    r = only(audit_message(reply, kind="brief", question=question))
    assert r["oh_question"] == 0


def test_a_reply_that_echoes_its_receivers_words_is_overhead():
    content = '["r","C"]\n["v","A"]\n["t","2016-01-28"]'
    rows = audit_message(content, kind="verdict", echo_sources=["2016-01-28"])
    role, verdict, text = (x.row() for x in rows)
    assert verdict["payload"] == tok("A")
    assert text["oh_echo"] == tok("2016-01-28") and text["payload"] == 0
    consistent(rows, content)
    # short words that merely also occur are not an echo
    text = audit_message('["t","in 2016"]', kind="verdict", echo_sources=["died in 2016 in LA"])
    assert only(text)["oh_echo"] == 0


def test_gsm8k_question_is_the_last_sentence():
    assert brief_question("gsm8k", "Ann has 3 cats. How many legs?") == "How many legs?"
    assert brief_question("hotpotqa", " Who? ") == "Who?"


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@given(facts=st.lists(_TEXT, max_size=4), question=_TEXT, reply=_TEXT)
def test_accounting_is_exact_for_any_text(facts, question, reply):
    brief = serialize(
        [
            RoleLine(role="M"),
            *(FactLine(text=f) for f in facts),
            QuestionLine(to="W", text=question),
        ]
    )
    consistent(audit_message(brief, kind="brief", task="hotpotqa", question=question), brief)
    prose = "Facts:\n" + "\n".join(f"- {f}" for f in facts) + f"\nQuestion: {question}"
    consistent(audit_message(prose, kind="brief", task="hotpotqa"), prose)
    for content in (reply, serialize([TextLine(text=reply)])):
        rows = audit_message(content, kind="draft", question=question, echo_sources=facts)
        consistent(rows, content)


# --- runs ---------------------------------------------------------------------------


def _msg(sender, receiver, kind, content):
    return {"sender": sender, "receiver": receiver, "kind": kind, "content": content,
            "tokens_cl100k": tok(content)}  # fmt: skip


def _run(system, variant, briefs, replies, error=None):
    rows = []
    for i, (brief, reply) in enumerate(zip(briefs, replies, strict=True)):
        msgs = [_msg("M", "W", "brief", brief), _msg("W", "C", "draft", reply),
                _msg("C", "W", "verdict", reply), _msg("W", "M", "final", reply)]  # fmt: skip
        rows.append({"task": "gsm8k", "system": system, "variant": variant,
                     "example_id": f"e{i}", "question": "Ann has 3 cats. How many legs?",
                     "messages": json.dumps(msgs), "error": error if i == 0 else None,
                     "tokens_total_cl100k": sum(m["tokens_cl100k"] for m in msgs)})  # fmt: skip
    return pd.DataFrame(rows)


PROSE = "Goal: Solve it.\nFacts:\n- Ann has 3 cats.\nQuestion: How many legs?"
TERSE = '["r","M"]\n["g","Solve it."]\n["f","Ann has 3 cats."]\n["q","W","How many legs?"]'


def test_tables_are_means_per_example_and_add_up_to_the_recorded_tokens():
    prose = _run("freeform", "default", [PROSE, PROSE], ["Answer: 12", "Answer: 12"])
    terse = _run("tersetalk", "v", [TERSE, TERSE], ['["x","answer","12"]'] * 2, error="boom")
    lines, runs = audit_runs([prose, terse])
    assert runs["messages_recount_differs"].eq(0).all()
    assert runs.set_index("system")["n"].to_dict() == {"freeform": 2, "tersetalk": 1}
    table = audit_table(lines, runs)
    assert table.groupby("system")["total"].sum().round(9).to_dict() == {
        "freeform": prose["tokens_total_cl100k"].mean(),
        "tersetalk": terse["tokens_total_cl100k"].iloc[1],  # the error row is left out
    }
    cols = ["payload", *OH_COLUMNS]
    assert (table[cols].sum(axis=1) - table["total"]).abs().max() < 1e-9
    summary = audit_summary(lines, runs)
    assert list(summary["kind"].drop_duplicates()) == ["brief", "draft", "verdict", "final"]
    brief = summary[summary["kind"] == "brief"].set_index("system")
    assert brief.loc["freeform", "d_total"] == 0
    assert brief.loc["tersetalk", "d_total"] == tok(TERSE) - tok(PROSE)
    assert brief.loc["tersetalk", "d_oh_role"] == tok('["r","M"]')
    assert brief.loc["tersetalk", "jsonl_share"] == 1 and brief.loc["freeform", "jsonl_share"] == 0
    verdict = summary[summary["kind"] == "verdict"].set_index("system")
    assert verdict.loc["freeform", "oh_echo"] == tok("Answer: 12")  # the Critic echoes the draft
    assert verdict.loc["tersetalk", "oh_echo"] == tok("12")
    assert verdict.loc["tersetalk", "oh_label"] == tok("answer")


def fake_model(messages, gen=None, schema=None):
    system = messages[0]["content"]
    if schema is not None:
        if schema.__name__ == "CriticReply":
            return json.dumps({"verdict": "A", "note": "fine"})
        return json.dumps({"plan": [], "need": [], "answer": "Paris"})
    if system.startswith("You are the Critic"):
        return "ACCEPT. The answer Paris is right."
    return "The answer is Paris."


@pytest.fixture
def real_runs(tmp_path, repo, base_config):
    """A freeform and a tersetalk run of the real runner on two HotpotQA examples."""
    records = load_records("hotpotqa", data_dir=repo / "data")
    ev, _ = sample("hotpotqa", records, n=2, calibration_n=0, seed=11)
    sample_path = tmp_path / "sample.parquet"
    ev.to_parquet(sample_path)
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    cfg["systems"]["tersetalk"] = {"variants": {"v": {"caps": "aggressive"}}}
    cfg.update(ablations={}, calibration={})
    cfg["evaluation"]["comparisons"] = []
    validate_config(cfg)
    out = {}
    for system, variant in (("freeform", "default"), ("tersetalk", "v")):
        path = tmp_path / f"{system}.parquet"
        run(run_spec(cfg, "hotpotqa", system, variant), sample_path, path,
            client=ScriptedClient(fake_model), progress=False)  # fmt: skip
        out[system] = path
    return out


def test_runner_messages_are_audited_exactly(real_runs):
    frames = [pd.read_parquet(p) for p in real_runs.values()]
    lines, runs = audit_runs(frames)
    assert runs["messages_recount_differs"].eq(0).all()
    table = audit_table(lines, runs)
    for df in frames:
        got = table[table["system"] == df["system"].iloc[0]]["total"].sum()
        assert got == pytest.approx(df["tokens_total_cl100k"].mean())
    terse = table[(table["system"] == "tersetalk") & (table["kind"] == "brief")]
    assert set(terse["format"]) == {"jsonl"} and "question" in set(terse["part"])
    free = table[(table["system"] == "freeform") & (table["kind"] == "brief")]
    assert set(free["format"]) == {"prose"} and {"Goal:", "Question:"} <= set(free["tag"])


def test_cli_writes_the_tables_and_prints_markdown(real_runs, tmp_path, capsys):
    out, summary, md = tmp_path / "a" / "audit.csv", tmp_path / "s.csv", tmp_path / "a.md"
    code = main(["audit", *map(str, real_runs.values()), "--out", str(out),
                 "--summary-out", str(summary), "--markdown", str(md),
                 "--detail-kinds", "brief,draft"])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "## hotpotqa · brief M->W" in printed and "### per line: hotpotqa · draft" in printed
    assert md.read_text() == printed
    table = pd.read_csv(out)
    assert {"task", "system", "variant", "kind", "tag", "total", "payload", "overhead"} <= set(
        table.columns
    )
    assert set(table["system"]) == {"freeform", "tersetalk"}
    assert {f"oh_{k}" for k in OVERHEAD_KINDS} <= set(table.columns)
    assert set(pd.read_csv(summary)["kind"]) == {"brief", "draft", "verdict", "final"}


def test_cli_kinds_filter(real_runs, tmp_path, capsys):
    out = tmp_path / "audit.csv"
    assert main(["audit", *map(str, real_runs.values()), "--out", str(out),
                 "--kinds", "verdict", "--reference", ""]) == 0  # fmt: skip
    assert set(pd.read_csv(out)["kind"]) == {"verdict"}
    assert "d total" not in capsys.readouterr().out


@pytest.mark.parametrize("content", [None, b"not parquet at all", "table"])
def test_cli_a_missing_unreadable_or_foreign_file_is_a_clean_error(tmp_path, capsys, content):
    path = tmp_path / "run.parquet"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content == "table":
        pd.DataFrame({"x": [1]}).to_parquet(path)
    code = main(["audit", str(path), "--out", str(tmp_path / "audit.csv")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("tersetalk audit: error:") and str(path) in err
    assert not (tmp_path / "audit.csv").exists()


def test_every_option_is_explained():
    sub = build_parser()._subparsers._group_actions[0].choices["audit"]
    for action in sub._actions:
        assert action.dest == "help" or action.help, action.option_strings or action.dest
