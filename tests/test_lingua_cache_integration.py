"""The LLMLingua cache with real LLMLingua on the prepared embedded model (integration).

A compression read from the cache must be the very one LLMLingua computes: same
pieces, same token counts, same attempts; and a job whose compressions are all
cached must not load the model at all.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from tersetalk.encoders.lingua import CompressorSettings, LinguaSettings, LLMLinguaCompressor

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.integration

FACTS = [
    "Arthur's Magazine (1844-1846) was an American literary periodical published in "
    "Philadelphia in the 19th century.",
    "First for Women is a woman's magazine published by Bauer Media Group in the USA; "
    "the magazine was started in 1989.",
    "Edited by T.S. Arthur, it featured work by Edgar A. Poe, J.H. Ingraham, Sarah "
    "Josepha Hale and Thomas G. Spear.",
]
QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
GSM = [
    "Natalia sold clips to 48 of her friends in April.",
    "In May she sold half as many clips as in April.",
    "Each clip costs $2 and she spent 10 dollars on string.",
]


def _fields(c, timing=True):
    d = asdict(c)
    d["extra"] = {k: v for k, v in d["extra"].items() if k != "cache_hit"}
    if not timing:
        d.pop("seconds")
    return d


@pytest.mark.parametrize(
    ("pieces", "question", "force", "opts"),
    [
        (FACTS, QUESTION, False, LinguaSettings(rate=0.5)),
        (FACTS, QUESTION, True, LinguaSettings(rate=0.5, force_entities=True, entity_phrases=True)),
        (GSM, "How much did Natalia earn?", True, LinguaSettings(rate=0.4)),
    ],
    ids=["hotpotqa", "entities", "gsm8k-digits"],
)
def test_cached_compressions_are_byte_identical(prepared, tmp_path, pieces, question, force, opts):
    settings = CompressorSettings(model=str(prepared), threads=1)
    target = 25

    def run(comp):
        return comp.compress(pieces, target_tokens=target, question=question, force=force,
                             options=opts)  # fmt: skip

    afresh = run(LLMLinguaCompressor(settings))  # no cache at all
    first = LLMLinguaCompressor(settings)
    assert first.use_cache(tmp_path / "lingua")
    miss = run(first)
    later = LLMLinguaCompressor(settings)  # the next job
    assert later.use_cache(tmp_path / "lingua")
    hit = run(later)
    assert (miss.extra["cache_hit"], hit.extra["cache_hit"]) == (False, True)
    assert _fields(miss, timing=False) == _fields(afresh, timing=False)
    assert _fields(hit) == _fields(miss)
    assert hit.text.encode() == afresh.text.encode()
    assert later._loaded is None  # the hit never loaded torch's model
