"""Unit tests of the LLMLingua wrapper's pieces that need no model (small inputs)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from tersetalk.agents.roles import Brief, render_brief
from tersetalk.core.tokens import count_tokens
from tersetalk.encoders import lingua
from tersetalk.encoders.errors import CompressorUnavailableError
from tersetalk.encoders.lingua import (
    CompressorSettings,
    LinguaSettings,
    _next_target,
    _resolve_model,
    force_pattern,
    prepared_mismatch,
)
from tersetalk.encoders.messages import (
    MessageView,
    compress_message,
    plan_message,
    project,
)
from tersetalk.encoders.prepare import (
    DEFAULT_COMPRESSOR_DIR,
    MANIFEST,
    is_prepared,
    read_manifest,
)
from tersetalk.encoders.scripted import ScriptedCompressor
from tersetalk.systems.lingua_brief import brief_view, compress_brief

BRIEF = Brief(
    goal="Answer the question with a short span taken from the facts.",
    facts=[
        "Scott Derrickson: Scott Derrickson is an American director, screenwriter and producer.",
        "Ed Wood: Edward Davis Wood Jr. was an American filmmaker, actor, writer and producer.",
    ],
    question="Were Scott Derrickson and Ed Wood of the same nationality?",
)


def test_force_pattern_keeps_numbers_words_and_operators_with_their_spaces():
    pat = force_pattern(["+", "=", "$", "%"])
    text = "She read 10 pages, then 13 more; 1,200 + 3.50 = $4 at 5% twice a day, four times."
    found = [m.group(0) for m in pat.finditer(text)]
    assert " 10" in found and " 13" in found and " 1,200" in found and " 3.50" in found
    assert " +" in found and " =" in found and " $" in found and "%" in found
    assert " twice" in found and " four" in found
    # "10 pages 13" with everything between dropped still reads as two numbers
    assert "".join(m for m in found if m.strip()[0].isdigit())[:6] == " 10 13"
    assert not force_pattern([], words=False).search("four cats")
    assert not pat.search("someone fourteenth")  # word boundaries: no digits, no number word


def test_force_entities_keeps_names_whole_and_is_case_sensitive():
    pat = force_pattern([], words=True, entities=True)
    text = "They moved into PPG Paints Arena in 2010, by Ayub Khan-Din and O'Donnell Co. Four."
    found = [m.group(0).strip() for m in pat.finditer(text)]
    assert found == ["They", "PPG", "Paints", "Arena", "2010", "Ayub", "Khan-Din",
                     "O'Donnell", "Co.", "Four."]  # fmt: skip
    assert not pat.search("moved into the arena")  # lowercase words stay compressible
    # number words stay case-insensitive without entities
    assert force_pattern([], words=True).search("FOUR cats")
    assert not force_pattern([], words=False).search("Arena")
    # entities force for any task; digits alone only for GSM8K
    assert LinguaSettings(force_entities=True).forces("hotpotqa")
    assert not LinguaSettings().forces("hotpotqa") and LinguaSettings().forces("gsm8k")
    from tersetalk.systems.llmlingua_system import LLMLinguaSystemSettings

    assert LLMLinguaSystemSettings().force_entities  # the llmlingua system's default


def test_entity_phrases_keep_the_content_word_after_a_name():
    pat = force_pattern([], words=False, entities=True, phrases=True)
    text = "a representation of the Baudot code. Richard Wagner to a German libretto by them"
    found = [m.group(0).strip() for m in pat.finditer(text)]
    # a function word never completes a name; "Richard Wagner" stays two names
    assert found == ["Baudot code", "Richard", "Wagner", "German libretto"]
    # without phrases the name alone is kept; phrases do nothing without entities
    plain = force_pattern([], words=False, entities=True)
    assert [m.group(0).strip() for m in plain.finditer("the Baudot code")] == ["Baudot"]
    assert not force_pattern([], words=False, phrases=True).search("the Baudot code")
    from tersetalk.systems.llmlingua_system import LLMLinguaSystemSettings

    assert LLMLinguaSystemSettings().entity_phrases  # the llmlingua system's default
    assert not LinguaSettings().entity_phrases  # touchpoints and the hybrid: off


def test_settings_validate_rates_and_reject_code_in_context_budget():
    assert LinguaSettings(rate=0.33).rate == 0.33
    for bad in (
        {"rate": 0},
        {"rate": 1.5},
        {"context_budget": "+__import__('os')"},
        {"unknown": 1},
        {"target_tokens": 0},
    ):
        with pytest.raises(ValidationError):
            LinguaSettings(**bad)
    assert LinguaSettings(context_budget=" *1.3 ").context_budget == "*1.3"
    assert LinguaSettings().forces("gsm8k") and not LinguaSettings().forces("hotpotqa")
    assert LinguaSettings(force_digits="always").forces("hotpotqa")
    assert not LinguaSettings(force_digits="never").forces("gsm8k")


def test_llmlingua2_is_chosen_by_model_name_or_flag():
    assert CompressorSettings(
        model="microsoft/llmlingua-2-xlm-roberta-large-meetingbank"
    ).use_llmlingua2()
    assert not CompressorSettings().use_llmlingua2()
    assert CompressorSettings(llmlingua2=True).use_llmlingua2()
    a, b = CompressorSettings(), CompressorSettings(threads=1)
    assert a.resource_key() != b.resource_key()


def test_missing_default_compressor_names_the_fix(tmp_path):
    with pytest.raises(CompressorUnavailableError, match="prepare-compressor --out"):
        _resolve_model(str(tmp_path / "nope"))
    with pytest.raises(CompressorUnavailableError, match="prepare-compressor"):
        _resolve_model("results/models/smollm2-hf-missing")
    assert _resolve_model(str(tmp_path)) == str(tmp_path)
    assert _resolve_model("NousResearch/Llama-2-7b-hf") == "NousResearch/Llama-2-7b-hf"


def test_a_folder_without_a_finished_manifest_is_not_prepared(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF-not-really")
    assert read_manifest(tmp_path) is None and not is_prepared(tmp_path, gguf)
    (tmp_path / MANIFEST).write_text("{broken")
    assert read_manifest(tmp_path) is None
    import hashlib

    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()
    (tmp_path / MANIFEST).write_text(json.dumps({"prepare_version": 1, "source_sha256": sha}))
    assert is_prepared(tmp_path, gguf)
    gguf.write_bytes(b"another file")  # the source changed: prepare again
    assert not is_prepared(tmp_path, gguf)


def test_only_the_default_folder_made_from_another_gguf_is_a_mismatch(tmp_path, monkeypatch):
    import hashlib

    monkeypatch.chdir(tmp_path)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF-not-really")
    folder = tmp_path / DEFAULT_COMPRESSOR_DIR
    folder.mkdir(parents=True)
    assert prepared_mismatch(DEFAULT_COMPRESSOR_DIR, gguf)  # no manifest
    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()
    (folder / MANIFEST).write_text(json.dumps({"prepare_version": 1, "source_sha256": sha}))
    assert not prepared_mismatch(DEFAULT_COMPRESSOR_DIR, gguf)
    assert not prepared_mismatch(str(folder), gguf)  # the same folder, spelled absolute
    gguf.write_bytes(b"another model")
    assert prepared_mismatch(DEFAULT_COMPRESSOR_DIR, gguf)
    assert prepared_mismatch(str(folder), gguf)
    other = tmp_path / "my-compressor"
    other.mkdir()
    assert not prepared_mismatch(other, gguf)  # a folder the user named is taken as is
    assert not prepared_mismatch("microsoft/llmlingua-2-xlm-roberta-large-meetingbank", gguf)


def test_a_compressor_mismatch_reaches_describe_and_every_message_counter(
    tmp_path, monkeypatch, caplog
):
    """The real wrapper (LLMLingua itself replaced) flags the mismatch; counters carry it."""

    class FakePromptCompressor:
        def __init__(self, **kwargs):
            self.tokenizer = type("T", (), {"clean_up_tokenization_spaces": True})()

    monkeypatch.chdir(tmp_path)
    (tmp_path / DEFAULT_COMPRESSOR_DIR).mkdir(parents=True)
    monkeypatch.setattr(lingua, "_short_prompt_class", lambda: FakePromptCompressor)
    monkeypatch.setattr(lingua, "ensure_offline_tiktoken", lambda: None)
    checked = []

    def is_prepared_stub(folder, gguf=None):
        checked.append(folder)
        return prepared

    monkeypatch.setattr(lingua, "is_prepared", is_prepared_stub)
    no_pieces = MessageView(head=("Goal: solve.",), tail=("Question: 2 + 2?",))
    for prepared in (False, True):
        with caplog.at_level("WARNING", logger=lingua.__name__):
            comp = lingua.LLMLinguaCompressor(CompressorSettings(threads=1))
        assert checked[-1] == DEFAULT_COMPRESSOR_DIR
        assert comp.describe()["compressor_mismatch"] is (not prepared)
        assert ("lingua_compressor_mismatch=1" in caplog.text) is (not prepared)
        caplog.clear()
        out = compress_message(no_pieces, comp, LinguaSettings(), "gsm8k")
        assert out.counters["lingua_compressor_mismatch"] == int(not prepared)
    # the scripted double reports it the same way, also for a message that is compressed
    _, c = compress_brief(BRIEF, ScriptedCompressor(mismatch=True), LinguaSettings(), "hotpotqa")
    assert c["lingua_compressor_mismatch"] == 1 and c["lingua_skipped"] == 0
    _, c = compress_brief(BRIEF, ScriptedCompressor(), LinguaSettings(), "hotpotqa")
    assert c["lingua_compressor_mismatch"] == 0


def test_message_view_renders_the_freeform_brief_exactly():
    assert brief_view(BRIEF).render() == render_brief(BRIEF)
    empty = Brief(goal="Solve it.", facts=[], question="What is 2 + 2?")
    assert brief_view(empty).render() == render_brief(empty)


def test_plan_scopes_and_unreachable_targets():
    view = brief_view(BRIEF)
    ctx = count_tokens("\n".join(BRIEF.facts))
    msg = count_tokens(render_brief(BRIEF))
    p = plan_message(view, LinguaSettings(rate=0.5))
    assert (p.scope, p.context_tokens, p.message_tokens) == ("context", ctx, msg)
    assert p.target_context == round(0.5 * ctx) and p.reachable
    m = plan_message(view, LinguaSettings(rate=0.5, rate_scope="message"))
    assert m.scope == "message" and m.target_context == round(0.5 * msg) - m.kept_tokens
    # a budget below the kept goal and question cannot be reached
    t = plan_message(view, LinguaSettings(target_tokens=10))
    assert t.target_context < 0 and not t.reachable
    opts = LinguaSettings(rate=0.5)
    assert project(p, opts) == p.kept_tokens + p.target_context
    assert project(p, opts, factor=100.0) == msg  # never more than the message itself


def test_compress_message_counts_what_was_achieved():
    comp = ScriptedCompressor()
    text, c = compress_brief(BRIEF, comp, LinguaSettings(rate=0.5), "hotpotqa")
    assert text.startswith("Goal: ") and text.endswith(f"Question: {BRIEF.question}")
    assert c["lingua_tokens"] == count_tokens(text) < c["lingua_origin_tokens"]
    assert c["lingua_ctx_rate"] == pytest.approx(
        c["lingua_ctx_tokens"] / c["lingua_ctx_origin_tokens"]
    )
    assert c["lingua_scope_rate"] == c["lingua_ctx_rate"]
    assert c["lingua_rate_error"] == pytest.approx(c["lingua_ctx_rate"] / 0.5 - 1)
    assert c["lingua_target_unreachable"] == 0 and c["lingua_skipped"] == 0
    assert comp.calls[0]["question"] == BRIEF.question and not comp.calls[0]["force"]
    # a compressor that stops far short of the target is reported, not hidden
    _, lazy = compress_brief(
        BRIEF, ScriptedCompressor(ratio=1.9), LinguaSettings(rate=0.5), "hotpotqa"
    )
    assert lazy["lingua_within_tolerance"] == 0 and lazy["lingua_rate_error"] > 0.2
    _, tight = compress_brief(
        BRIEF, ScriptedCompressor(), LinguaSettings(target_tokens=10), "hotpotqa"
    )
    assert tight["lingua_target_unreachable"] == 1


def test_gsm8k_forces_digits_and_a_message_without_pieces_is_skipped():
    view = MessageView(
        head=("Goal: solve.",),
        pieces=("Tom has 12 apples and buys 30 more.",),
        tail=("Question: how many?",),
        question="how many?",
    )
    out = compress_message(view, ScriptedCompressor(), LinguaSettings(rate=0.3), "gsm8k")
    assert "12" in out.text and "30" in out.text
    empty = MessageView(head=("Goal: solve.",), tail=("Question: 2 + 2?",))
    out = compress_message(empty, ScriptedCompressor(), LinguaSettings(rate=0.5), "gsm8k")
    assert out.text == empty.render() and out.counters["lingua_skipped"] == 1
    assert out.counters["lingua_target_unreachable"] == 1  # nothing compressible


def test_next_target_shifts_then_interpolates():
    first = _next_target([(20.0, 12)], goal=17, scale=1.2)
    assert first == pytest.approx(20 + 5 * 1.2)
    # secant between (20 -> 12) and (26 -> 19): goal 17 lies between
    second = _next_target([(20.0, 12), (26.0, 19)], goal=17, scale=1.2)
    assert 20 < second < 26
    assert _next_target([(2.0, 30)], goal=5, scale=1.0) == 1.0  # never below one token


def test_prepare_compressor_is_a_cli_subcommand():
    from tersetalk.cli import build_parser

    args = build_parser().parse_args(["prepare-compressor", "--out", "x", "--force"])
    assert args.out == "x" and args.force and callable(args.func)
