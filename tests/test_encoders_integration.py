"""Real LLMLingua on the prepared embedded model (integration).

The compressor is prepared once per machine into pytest's cache folder (about
30-50 s the first time, a manifest check afterwards), or the workflow's own
``results/models/smollm2-hf`` is used when it is already prepared.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from tersetalk.agents.roles import build_brief, render_brief
from tersetalk.core.io import message_list
from tersetalk.core.tokens import count_tokens
from tersetalk.encoders.lingua import CompressorSettings, LinguaSettings, LLMLinguaCompressor
from tersetalk.encoders.prepare import is_prepared, prepare_compressor
from tersetalk.pipeline.config import run_spec, validate_config
from tersetalk.pipeline.runner import run
from tersetalk.tasks.loading import load_records, read_sample, sample

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def compressor(prepared) -> LLMLinguaCompressor:
    return LLMLinguaCompressor(CompressorSettings(model=str(prepared), threads=1))


def examples(task: str, n: int, tmp_path: Path) -> Path:
    ev, _ = sample(
        task, load_records(task, data_dir=REPO / "data"), n=n, calibration_n=0, seed=1234
    )
    path = tmp_path / f"{task}.parquet"
    ev.to_parquet(path)
    return path


def test_prepared_folder_is_an_hf_causal_lm_with_a_manifest(prepared):
    config = json.loads((prepared / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    tok = json.loads((prepared / "tokenizer_config.json").read_text())
    assert tok["clean_up_tokenization_spaces"] is False
    assert is_prepared(prepared)
    assert prepare_compressor(prepared) == prepared  # the second call is a no-op


def test_llmlingua_system_on_a_real_hotpotqa_example(prepared, base_config, tmp_path):
    """Real compression and the real embedded model, one example end to end."""
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    cfg["models"]["threads"] = 1
    variants = cfg["systems"].setdefault("llmlingua", {"variants": {}})["variants"]
    variants["r05"] = {"model": str(prepared), "threads": 1}
    validate_config(cfg)
    spec = run_spec(cfg, "hotpotqa", "llmlingua", "r05")
    sample_path = examples("hotpotqa", 1, tmp_path)
    df = run(spec, sample_path, tmp_path / "o.parquet", progress=False)
    row = df.iloc[0]
    assert pd.isna(row["error"]), row["error"]
    brief = message_list(row["messages"])[0]["content"]
    ex = read_sample(sample_path)[0]
    original = render_brief(build_brief("hotpotqa", ex["record"], cfg["hotpotqa"]))
    assert count_tokens(brief) < count_tokens(original)
    assert row["c_lingua_origin_tokens"] == count_tokens(original)
    assert row["c_lingua_tokens"] == count_tokens(brief)
    assert 0.0 < row["c_lingua_ctx_rate"] < 1.0 and 0.0 < row["c_lingua_rate"] < 1.0
    assert row["c_lingua_target_rate"] == 0.5 and row["c_t_lingua_s"] > 0
    assert row["c_lingua_compressor_mismatch"] == 0  # a prepared folder of the embedded GGUF
    # goal and question travel verbatim
    b = build_brief("hotpotqa", ex["record"], cfg["hotpotqa"])
    assert brief.startswith(f"Goal: {b.goal}") and brief.endswith(f"Question: {b.question}")
    assert row["n_model_calls"] >= 2  # the real Worker and Critic answered


def test_gsm8k_numbers_survive_compression(compressor, tmp_path):
    ex = read_sample(examples("gsm8k", 3, tmp_path))
    opts = LinguaSettings(rate=0.33)
    for e in ex:
        b = build_brief("gsm8k", e["record"], {})
        if not b.facts:
            continue
        out = compressor.compress(
            b.facts,
            target_tokens=round(0.33 * count_tokens("\n".join(b.facts))),
            question=b.question,
            force=True,
            options=opts,
        )
        digits = re.findall(r"\d+", " ".join(b.facts))
        assert re.findall(r"\d+", out.text) == digits, (b.facts, out.text)
        assert out.compressed_tokens < out.origin_tokens


def test_short_prompts_compress_only_with_the_window_fix(compressor):
    """microsoft/LLMLingua#196: below ``iterative_size`` tokens, stock LLMLingua keeps all."""
    facts = [
        "Natalia sold clips to 48 of her friends in April.",
        "Then she sold half as many clips in May.",
    ]
    target = round(0.5 * count_tokens("\n".join(facts)))
    kw = dict(target_tokens=target, question="How many clips did she sell altogether?")
    stock = compressor.compress(
        facts, **kw, options=LinguaSettings(fix_short_prompts=False, max_adjust=0)
    )
    fixed = compressor.compress(facts, **kw, options=LinguaSettings(max_adjust=0))
    assert stock.rate > 0.9
    assert fixed.rate < 0.8
