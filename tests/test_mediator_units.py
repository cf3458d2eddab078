"""Examples for the mediator: compressors (a tiny BART built here runs the DistilBART
code path for real), the LLMLingua adapter, config files, events, the demo CLI."""

from __future__ import annotations

import json

import pytest

from tersetalk.mediator import (
    CollectingEmitter,
    CompressorUnavailableError,
    EventBus,
    KeyType,
    MediatorConfigError,
    PipelineEvent,
    RuleBasedExtractor,
    build_mediator,
    load_mediator_config,
    make_token_counter,
    parse_mediator_config,
    read_trace,
    trace_problems,
)
from tersetalk.mediator.compressors import (
    DistilBARTCompressor,
    LLMLinguaCompressor,
    make_compressor,
    resolve_distilbart,
)

BRIEF = (
    "Goal: Solve the math word problem and give the final number.\nFacts:\n"
    "- Uncle Ben has four horses.\n- Each horse can consume five pounds of oats per meal.\n"
    "- He feeds his horses twice a day.\nQuestion: If one bag contains 50 pounds of oats, "
    "how many bags does he need for five days?"
)


@pytest.fixture(scope="module")
def tiny_bart(tmp_path_factory):
    """A randomly initialised BART with a byte-level BPE vocabulary, saved like a checkpoint."""
    import torch
    from transformers import BartConfig, BartForConditionalGeneration, BartTokenizer
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

    folder = tmp_path_factory.mktemp("tiny-bart")
    vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>"])}
    for ch in bytes_to_unicode().values():
        vocab.setdefault(ch, len(vocab))
    for merged in ("Ġt", "he", "Ġthe"):
        vocab[merged] = len(vocab)
    vocab["<mask>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\nĠ t\nh e\nĠt he\n")
    tok = BartTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    tok.save_pretrained(folder)
    torch.manual_seed(0)
    cfg = BartConfig(vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1,
                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                     decoder_ffn_dim=32, max_position_embeddings=512, pad_token_id=1,
                     bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
                     forced_bos_token_id=0)  # fmt: skip
    BartForConditionalGeneration(cfg).save_pretrained(folder)
    return folder


def test_distilbart_code_path_runs_on_a_tiny_local_bart(tiny_bart):
    comp = DistilBARTCompressor(tiny_bart, num_beams=1)
    out = comp.compress(BRIEF, target_tokens=12)
    assert isinstance(out, str)
    # at most 12 new tokens; a token of this vocabulary decodes to at most 4 characters
    assert len(out) <= 12 * 4
    cfg = parse_mediator_config({"compression": {"compressor": "distilbart", "token_budget": 20,
                                                 "distilbart_path": str(tiny_bart)}})  # fmt: skip
    built = make_compressor(cfg.compression)
    assert isinstance(built, DistilBARTCompressor)
    res = build_mediator(cfg, compressor=built).process(BRIEF)
    assert res.ok and res.compression.final_tokens <= res.compression.original_tokens


def test_distilbart_missing_weights_say_how_to_fix(tmp_path):
    with pytest.raises(CompressorUnavailableError, match="distilbart_path"):
        resolve_distilbart(str(tmp_path), "sshleifer/distilbart-cnn-12-6")
    with pytest.raises(CompressorUnavailableError, match="compressor: model"):
        resolve_distilbart(None, "tersetalk-tests/definitely-not-cached-model")


def test_llmlingua_adapter_raises_clearly_when_unavailable(monkeypatch):
    import importlib

    real = importlib.import_module

    def no_lingua(name, *args):
        if name.startswith("tersetalk.encoders"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_lingua)
    with pytest.raises(CompressorUnavailableError, match="compressor: model"):
        LLMLinguaCompressor()


def test_llmlingua_adapter_maps_onto_the_wrapper():
    from tersetalk.encoders.lingua import Compressed

    class FakeLingua:
        def __init__(self):
            self.calls = []

        def compress(self, context, *, target_tokens, question="", force=False, options=None):
            self.calls.append((list(context), target_tokens, force, options.rate))
            kept = [c[: len(c) // 2] for c in context]
            return Compressed(pieces=kept, origin_tokens=10, compressed_tokens=5,
                              target_tokens=target_tokens)  # fmt: skip

    fake = FakeLingua()
    comp = LLMLinguaCompressor(impl=fake, rate=0.4)
    assert comp.compress("abcdefgh\n\nwxyz", 3) == "abcd\nwx"
    assert fake.calls == [(["abcdefgh", "wxyz"], 3, False, 0.4)]
    with pytest.raises(MediatorConfigError, match="compression.llmlingua"):
        LLMLinguaCompressor(impl=fake, no_such_option=1)
    cfg = parse_mediator_config({"compression": {"compressor": "llmlingua", "token_budget": 4,
                                                 "llmlingua": {"rate": 0.4}}})  # fmt: skip
    res = build_mediator(cfg, compressor=comp).process("one two three four five six\nseven")
    assert res.ok and res.compression.passes >= 1


def test_rule_extractor_reads_the_managers_brief():
    res = RuleBasedExtractor().extract(BRIEF)
    types_ = [k.type for k in res.keys]
    assert types_[0] is KeyType.GOAL and types_[-1] is KeyType.INSTRUCTION
    assert types_[1:-1] == [KeyType.CONTEXT] * 3
    assert all("rule" in r for r in json.loads(res.raw_output))
    prose = RuleBasedExtractor().extract(
        "We must finish by Friday. The server is currently down. Please restart it now."
    )
    assert [k.type for k in prose.keys] == [KeyType.CONSTRAINT, KeyType.STATE,
                                            KeyType.INSTRUCTION]  # fmt: skip


def test_config_file_errors_name_the_key(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("mediator:\n  compression:\n    token_budget: 0\n    compresor: model\n")
    with pytest.raises(MediatorConfigError) as err:
        load_mediator_config(path)
    msg = str(err.value)
    assert "compression.token_budget" in msg and "compression.compresor" in msg
    path.write_text("mediator:\n  judge: {enabled: true}\n  semantic_keys: {enabled: false}\n")
    with pytest.raises(MediatorConfigError, match="semantic_keys"):
        load_mediator_config(path)
    path.write_text("mediator: [1, 2\n")
    with pytest.raises(MediatorConfigError, match="not valid YAML"):
        load_mediator_config(path)
    with pytest.raises(MediatorConfigError, match="not found"):
        load_mediator_config(tmp_path / "missing.yaml")


def test_example_config_is_valid(repo):
    cfg = load_mediator_config(repo / "config" / "mediator.example.yaml")
    assert cfg.compression.compressor == "model" and cfg.judge.enabled


def test_events_in_order_and_a_failing_subscriber_does_not_break_the_pipeline():
    bus = EventBus()
    seen = CollectingEmitter()
    bus.subscribe(seen.emit)

    def broken(payload):
        raise RuntimeError("dashboard went away")

    unsubscribe = bus.subscribe(broken)
    cfg = parse_mediator_config({"compression": {"compressor": "truncate", "token_budget": 10}})
    res = build_mediator(cfg, emitter=bus).process(BRIEF, "msg-1")
    assert res.ok
    kinds = seen.kinds()
    assert (
        kinds[0] is PipelineEvent.MESSAGE_RECEIVED and kinds[-1] is PipelineEvent.PIPELINE_COMPLETE
    )
    assert kinds.index(PipelineEvent.COMPRESSION_START) < kinds.index(
        PipelineEvent.COMPRESSION_PASS
    )
    assert PipelineEvent.EXTRACTION_COMPLETE in kinds and PipelineEvent.JUDGE_START not in kinds
    assert all(e.message_id == "msg-1" for e in seen.events)
    unsubscribe()
    assert len(bus._subs) == 1


def test_demo_cli_writes_an_inspectable_trace(tmp_path, capsys):
    from tersetalk.cli import main

    rc = main(["mediator", "demo", "--compressor", "truncate", "--no-judge", "--budget", "40",
               "--trace-dir", str(tmp_path)])  # fmt: skip
    assert rc == 0
    out = capsys.readouterr().out
    assert "pass 1:" in out and "Delivered to Agent B" in out and "aggregate_ratio" in out
    records = read_trace(tmp_path / "mediator_trace.jsonl")
    assert len(records) == 1 and trace_problems(records[0]) == []
    assert records[0]["compression"]["final_tokens"] <= 40


def test_demo_cli_rejects_a_bad_budget(tmp_path, capsys):
    from tersetalk.cli import main

    with pytest.raises(SystemExit) as ex:
        main(["mediator", "demo", "--compressor", "truncate", "--budget", "0",
              "--trace-dir", str(tmp_path)])  # fmt: skip
    assert ex.value.code == 2
    assert "token_budget" in capsys.readouterr().err


def test_model_tokenizer_option_uses_the_clients_counter():
    from tersetalk.models import ScriptedClient

    counter = make_token_counter("model", ScriptedClient(["x"]))
    assert counter("a b c") == 3
    with pytest.raises(MediatorConfigError):
        make_token_counter("model")


# The embedding judge's deterministic number check
class _FixedEmbedder:
    def similarity(self, a, b):
        return 0.9


def _keys(*values):
    from tersetalk.mediator import SemanticKey

    return [SemanticKey(type=KeyType.CONTEXT, value=v) for v in values]


def test_embedding_judge_reports_missing_and_hallucinated_numbers():
    from tersetalk.mediator.judges import EmbeddingJudge

    judge = EmbeddingJudge(0.5, embedder=_FixedEmbedder())
    original = "Store 12 sold 4,310 units and store 17 sold 3,980 units."
    faithful = judge.evaluate(original, _keys("Store 12 sold 4310 units", "store 17: 3980"))
    assert faithful.passed and faithful.issues == []
    dropped = judge.evaluate(original, _keys("Store 12 sold 4310 units", "store 17 sold"))
    assert not dropped.passed
    assert "missing critical information: number 3980" in dropped.issues
    assert not any(i.startswith("hallucinated") for i in dropped.issues)
    changed = judge.evaluate(original, _keys("Store 12 sold 4310 units", "store 17 sold 9,999"))
    assert not changed.passed and changed.confidence == 0.9  # similarity alone would pass
    assert "missing critical information: number 3980" in changed.issues
    assert any(i.startswith("hallucinated number: 9999") for i in changed.issues)
    added = judge.evaluate(original, _keys("Store 12 sold 4310, store 17 sold 3980, total 8290"))
    assert not added.passed
    assert [i for i in added.issues if "number" in i] == [
        "hallucinated number: 8290 is in the keys but not in the original"]  # fmt: skip


def test_number_check_canonicalises_spellings_and_names_its_blind_spots():
    from tersetalk.mediator import judges
    from tersetalk.mediator.judges import number_issues

    assert number_issues("It costs 12.50 and weighs 007 kg, 1,000 in all", "12.5 7 1000") == []
    assert number_issues("twelve apples", "12 apples") == [
        "hallucinated number: 12 is in the keys but not in the original"]  # fmt: skip
    # blind spots are documented where a reader of the judge looks
    doc = judges.number_issues.__doc__
    assert "cannot detect" in doc and "negation" in doc and "words" in doc
    module_doc = " ".join(judges.__doc__.split())
    assert "Contradictions of other kinds" in module_doc and "antonyms" in module_doc


def test_embedding_judge_reports_contradictions_of_the_sentence_a_key_restates():
    from tersetalk.mediator.judges import EmbeddingJudge, contradiction_issues

    judge = EmbeddingJudge(0.5, embedder=_FixedEmbedder())
    original = ("The bridge over the Tyne was not finished in 1928. The tickets cost 12 "
                "dollars each at the gate.")  # fmt: skip
    faithful = _keys("bridge over the Tyne not finished in 1928", "tickets cost 12 dollars")
    assert contradiction_issues(original, faithful) == []
    assert judge.evaluate(original, faithful).passed
    # negation dropped: similarity and every number agree, only the negation differs
    flipped = _keys("bridge over the Tyne finished in 1928", "tickets cost 12 dollars")
    res = judge.evaluate(original, flipped)
    assert not res.passed and res.confidence == 0.9
    assert [i for i in res.issues if i.startswith("contradiction")] == [
        "contradiction: negation differs: CONTEXT: 'bridge over the Tyne finished in 1928' "
        "against 'The bridge over the Tyne was not finished in 1928.'"]  # fmt: skip
    # a negation added ("never") is as much a contradiction as one dropped
    assert contradiction_issues("Alice signed the lease in May.",
                                _keys("Alice never signed the lease")) != []  # fmt: skip
    # a number changed in the restated sentence: paired, not only missing + hallucinated
    changed = _keys("bridge over the Tyne not finished in 1928", "tickets cost 21 dollars")
    issues = judge.evaluate(original, changed).issues
    assert any(i.startswith("contradiction: number 21 where the original says 12") for i in issues)
    assert "missing critical information: number 12" in issues
    # a key that restates no sentence in particular is not compared
    assert contradiction_issues(original, _keys("no idea", "weather is nice")) == []
    # a number the original states elsewhere is not a changed one (roles are a blind spot)
    assert not any("number" in i for i in contradiction_issues(original, _keys(
        "tickets cost 1928 dollars")))  # fmt: skip


# DistilBART: an input longer than the model's window is cut, and the trace says so
def test_distilbart_records_truncated_input_in_the_pass_log(tiny_bart, tmp_path):
    comp = DistilBARTCompressor(tiny_bart, num_beams=1)
    assert comp.max_input_tokens == 512
    comp.compress(BRIEF, target_tokens=12)
    short = comp.pass_notes()
    assert short["input_truncated"] is False and short["compressor_input_tokens"] <= 512
    long_text = "\n".join([BRIEF] * 4)  # ~1,300 byte-level tokens of this tiny vocabulary
    out = comp.compress(long_text, target_tokens=12)
    notes = comp.pass_notes()
    assert isinstance(out, str) and notes["input_truncated"] is True
    assert notes["compressor_input_tokens"] > 512 == notes["compressor_max_input_tokens"]
    assert notes["compressor_kept_tokens"] <= 512

    cfg = parse_mediator_config({"compression": {"compressor": "distilbart", "token_budget": 20,
                                                 "recursion_limit": 1},
                                 "trace": {"dir": str(tmp_path)}})  # fmt: skip
    res = build_mediator(cfg, compressor=comp).process(long_text, "m-long")
    assert res.ok and res.compression.passes == 1
    first = res.compression.log[0]
    assert first.input_truncated and first.notes["compressor_input_tokens"] > 512
    assert res.compression.input_truncated
    rec = read_trace(tmp_path / "mediator_trace.jsonl")[0]
    assert rec["compression"]["input_truncated"] is True
    assert rec["compression"]["passes"][0]["input_truncated"] is True
    assert trace_problems(rec) == []
    # a message that fits leaves the flag down
    res = build_mediator(cfg, compressor=comp).process(BRIEF, "m-short")
    assert res.ok and not res.compression.input_truncated


def test_mediator_system_counts_truncated_input():
    from tersetalk.mediator.compression import CompressionPass, CompressionResult
    from tersetalk.mediator.pipeline import MediatorResult
    from tersetalk.systems.mediator_system import counters_of

    cut = CompressionPass(1, 900, 40, 0.044444, True, input_truncated=True,
                          notes={"compressor_input_tokens": 1100})  # fmt: skip
    res = MediatorResult("m", "x", 900, compression=CompressionResult(
        "y", 900, 40, 1, [cut], "budget_met", "distilbart"))  # fmt: skip
    c = counters_of(res)
    assert c["mediator_input_truncated"] is True
    assert c["mediator_pass_log"][0]["notes"] == {"compressor_input_tokens": 1100}
