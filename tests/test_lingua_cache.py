"""The LLMLingua compression cache (work recomputed on a rerun).

LLMLingua itself is replaced by a deterministic stand-in here (control flow only);
tests/test_lingua_cache_integration.py runs the real one.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import pytest

from tersetalk.agents.context import RunContext
from tersetalk.encoders import lingua
from tersetalk.encoders import lingua_cache as LC
from tersetalk.encoders.lingua import CompressorSettings, LinguaSettings, LLMLinguaCompressor
from tersetalk.encoders.messages import MessageView, compress_message
from tersetalk.encoders.scripted import ScriptedCompressor
from tersetalk.models import CachedClient, GenerationConfig, ScriptedClient

PIECES = [
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
    "Gustave Eiffel's company designed and built the wrought-iron lattice tower.",
    "It was the tallest man-made structure in the world until 1930.",
]
QUESTION = "When was the Eiffel Tower completed?"


class _Tokenizer:
    clean_up_tokenization_spaces = True

    def __call__(self, text, add_special_tokens=True):
        return SimpleNamespace(input_ids=text.split())


class FakePromptCompressor:
    """Keeps the first half of each piece's words: deterministic, no model."""

    def __init__(self):
        self.tokenizer = _Tokenizer()
        self.fix_short_prompts = True
        self.calls = 0

    def compress_prompt(self, pieces, **kwargs):
        self.calls += 1
        keep = kwargs.get("target_token", 10) / max(1, sum(len(p.split()) for p in pieces))
        out = [" ".join(p.split()[: max(1, round(len(p.split()) * keep))]) for p in pieces]
        return {"compressed_prompt": "\n".join(out)}

    structured_compress_prompt = compress_prompt


@pytest.fixture
def model_dir(tmp_path):
    folder = tmp_path / "compressor"
    folder.mkdir()
    (folder / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (folder / "model.safetensors").write_bytes(b"weights" * 100)
    return folder


@pytest.fixture
def builds(monkeypatch):
    """Every model load (the stand-in), so a test can tell whether one happened. A
    process loads a compressor once (``lingua._LOADED``): each test starts with none."""
    made: list[FakePromptCompressor] = []
    monkeypatch.setattr(lingua, "_LOADED", {})

    def build(self):
        made.append(FakePromptCompressor())
        return made[-1]

    monkeypatch.setattr(LLMLinguaCompressor, "_build", build)
    return made


def compressor(model_dir, cache=None) -> LLMLinguaCompressor:
    comp = LLMLinguaCompressor(CompressorSettings(model=str(model_dir), threads=1))
    if cache is not None:
        assert comp.use_cache(cache)
    return comp


def compress(comp, opts=None, context=PIECES, **kw):
    args = dict(target_tokens=12, question=QUESTION, force=False, options=opts or LinguaSettings())
    return comp.compress(context, **{**args, **kw})


def fields(c, timing=True):
    d = asdict(c)
    d["extra"] = {k: v for k, v in d["extra"].items() if k != "cache_hit"}
    if not timing:
        d.pop("seconds")
    return d


def test_a_hit_is_the_compression_as_computed_and_loads_no_model(model_dir, tmp_path, builds):
    fresh = compress(compressor(model_dir))  # no cache: computed
    first = compress(compressor(model_dir, tmp_path / "lingua"))  # a miss: computed, stored
    # one load: the second compressor of the process reuses the first one's model
    assert len(builds) == 1 and first.extra["cache_hit"] is False and first.attempts >= 1
    again = compressor(model_dir, tmp_path / "lingua")  # another job, same cache
    hit = compress(again)
    assert hit.extra["cache_hit"] is True
    assert fields(hit) == fields(first)  # the stored one, its time included
    assert fields(hit, timing=False) == fields(fresh, timing=False)  # as computed afresh
    assert hit.text == fresh.text
    assert len(builds) == 1 and again._loaded is None  # no model for a hit
    assert again.describe()["cache_hits"] == 1 and again.describe()["cache_misses"] == 0


@pytest.mark.parametrize(
    "change",
    [
        {"target_tokens": 11},
        {"question": "Who built it?"},
        {"force": True},
        {"context": PIECES[:2]},
        {"opts": LinguaSettings(rate=0.3)},
        {"opts": LinguaSettings(tolerance=0.1)},
        {"opts": LinguaSettings(force_entities=True)},
    ],
)
def test_anything_that_decides_the_output_is_in_the_key(model_dir, tmp_path, builds, change):
    cache = tmp_path / "lingua"
    compress(compressor(model_dir, cache))
    kw = dict(change)
    out = compress(compressor(model_dir, cache), kw.pop("opts", None), **kw)
    assert out.extra["cache_hit"] is False


def test_new_weights_under_the_same_name_miss(model_dir, tmp_path, builds):
    cache = tmp_path / "lingua"
    compress(compressor(model_dir, cache))
    (model_dir / "model.safetensors").write_bytes(b"WEIGHTS" * 100)  # same name and size
    assert compress(compressor(model_dir, cache)).extra["cache_hit"] is False
    assert compress(compressor(model_dir, cache)).extra["cache_hit"] is True


def test_the_key_holds_the_model_the_code_and_the_call(model_dir, tmp_path, builds):
    comp = compressor(model_dir, tmp_path / "lingua")
    compress(comp)
    (entry,) = (tmp_path / "lingua").glob("??/*.json")
    material = json.loads(entry.read_text())["request"]
    ident = material["compressor"]
    assert ident["model"].startswith("sha256:") and ident["threads"] == 1
    assert set(ident["code"]) == {
        "wrapper_sha256",
        "llmlingua",
        "transformers",
        "torch",
        "tiktoken",
    }
    assert material["context"] == PIECES and material["question"] == QUESTION
    assert material["options"] == LinguaSettings().model_dump(mode="json")
    # the same model folder elsewhere (another checkout) has the same fingerprint
    other = tmp_path / "elsewhere"
    other.mkdir()
    for f in model_dir.iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    assert LC.model_fingerprint(str(other)) == ident["model"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda e: "not json{",
        lambda e: json.dumps({**e, "key": "0" * 64}),
        lambda e: json.dumps({**e, "result": {**e["result"], "pieces": None}}),
        lambda e: json.dumps({**e, "result": {**e["result"], "attempts": "2"}}),
        lambda e: json.dumps(
            {**e, "result": {k: v for k, v in e["result"].items() if k != "extra"}}
        ),
    ],
)
def test_a_corrupt_entry_is_a_warning_and_a_miss_then_overwritten(
    model_dir, tmp_path, builds, damage
):
    cache = tmp_path / "lingua"
    first = compress(compressor(model_dir, cache))
    (entry,) = cache.glob("??/*.json")
    good = json.loads(entry.read_text())
    entry.write_text(damage(good))
    with pytest.warns(UserWarning, match="LLMLingua cache"):
        again = compress(compressor(model_dir, cache))
    assert again.extra["cache_hit"] is False and fields(again, False) == fields(first, False)
    assert json.loads(entry.read_text())["result"]["pieces"] == good["result"]["pieces"]
    assert compress(compressor(model_dir, cache)).extra["cache_hit"] is True


def test_an_unwritable_cache_still_returns_the_compression(
    model_dir, tmp_path, builds, monkeypatch
):
    def refuse(text, out):
        raise OSError("read-only file system")

    monkeypatch.setattr(LC, "write_text_atomic", refuse)
    with pytest.warns(UserWarning, match="not cached"):
        out = compress(compressor(model_dir, tmp_path / "lingua"))
    assert out.compressed_tokens < out.origin_tokens


def test_a_folder_that_cannot_be_fingerprinted_is_not_cached(tmp_path, builds, caplog):
    empty = tmp_path / "empty"
    empty.mkdir()
    comp = LLMLinguaCompressor(CompressorSettings(model=str(empty), threads=1))
    assert not comp.use_cache(tmp_path / "lingua") and comp.cache is None
    assert "LLMLingua cache off" in caplog.text


def _ctx(client, **shared):
    gen = GenerationConfig(max_tokens=8)
    return RunContext(task="hotpotqa", client=client, gen=gen, critic_gen=gen, shared=shared)


def test_a_run_caches_beside_its_call_cache(model_dir, tmp_path, builds):
    client = CachedClient(ScriptedClient(["x"]), tmp_path / "cache" / "calls")
    opts = LinguaSettings(model=str(model_dir), threads=1)
    comp = lingua.get_compressor(_ctx(client), opts)
    assert comp.cache.folder == tmp_path / "cache" / "lingua"
    shared = lingua.get_compressor(_ctx(client, cache_dir=str(tmp_path / "elsewhere")), opts)
    assert shared.cache.folder == tmp_path / "elsewhere" / "lingua"
    uncached = lingua.get_compressor(_ctx(ScriptedClient(["x"])), opts)
    assert uncached.cache is None


def test_doubles_are_never_cached(tmp_path, monkeypatch):
    double = ScriptedCompressor()
    monkeypatch.setattr(lingua, "load_compressor", lambda settings: double)
    client = CachedClient(ScriptedClient(["x"]), tmp_path / "calls")
    assert lingua.get_compressor(_ctx(client), LinguaSettings()) is double
    view = MessageView(head=("Goal: g",), pieces=tuple(PIECES), question=QUESTION)
    counters = compress_message(view, double, LinguaSettings(), "hotpotqa").counters
    assert "t_lingua_cache_hit" not in counters  # records of the doubles are unchanged


def test_the_counters_say_whether_the_message_came_from_the_cache(model_dir, tmp_path, builds):
    view = MessageView(head=("Goal: g",), pieces=tuple(PIECES), tail=(f"Question: {QUESTION}",),
                       question=QUESTION, label="Facts:")  # fmt: skip
    opts = LinguaSettings(rate=0.5)
    first = compress_message(view, compressor(model_dir, tmp_path / "l"), opts, "hotpotqa")
    second = compress_message(view, compressor(model_dir, tmp_path / "l"), opts, "hotpotqa")
    assert first.counters["t_lingua_cache_hit"] == 0 and second.counters["t_lingua_cache_hit"] == 1
    assert first.text == second.text
    assert {k: v for k, v in first.counters.items() if k != "t_lingua_cache_hit"} == {
        k: v for k, v in second.counters.items() if k != "t_lingua_cache_hit"
    }
    uncached = compress_message(view, compressor(model_dir), opts, "hotpotqa")
    assert uncached.counters["t_lingua_cache_hit"] == 0  # no cache: the column still exists


def test_the_mediator_adapter_still_loads_at_construction(tmp_path, monkeypatch):
    from tersetalk.mediator.compressors import LLMLinguaCompressor as Adapter

    def build(self):
        raise lingua.CompressorUnavailableError("no weights here")

    monkeypatch.setattr(LLMLinguaCompressor, "_build", build)
    folder = tmp_path / "m"
    folder.mkdir()
    with pytest.raises(Exception, match="no weights here"):
        Adapter(model=str(folder))


def test_skipped_compressions_say_no_hit(model_dir, tmp_path, builds):
    out = compress(compressor(model_dir, tmp_path / "lingua"), target_tokens=10**6)
    assert out.skipped and out.extra["cache_hit"] is False and not builds
    assert not list(Path(tmp_path / "lingua").glob("??/*.json"))
