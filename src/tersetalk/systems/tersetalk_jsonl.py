"""``tersetalk``: every message travels as TerseTalk-JSONL.

The codec (:mod:`tersetalk.agents.codecs.tersetalk`) writes the Manager's brief as
typed lines with soft caps and ``M#`` overflow into a bounded memory, dereferences
as the variant says, and produces the Worker's and Critic's replies under the
variant's enforcement mode (``schema``, ``json``, ``posthoc``), counting compliance,
repairs and lines per tag and direction. As in ``freeform``, a ``revise`` verdict
buys one revise round (the star topology).
"""

from __future__ import annotations

from tersetalk.agents.codecs.tersetalk import (
    TERSETALK_RATES,
    TerseTalkCodec,
    TerseTalkSettings,
    touchpoint_models,
)
from tersetalk.encoders.prepare import prepared_compressor_inputs
from tersetalk.systems import Axis, register


def summarizer_name(settings: TerseTalkSettings) -> str:
    """The summarizer that writes a variant's overflow summaries: LLMLingua when its
    touchpoint is on (``lingua_summaries: true``, it takes the summarizer's slot), else
    the named built-in (``extractive`` or ``truncation``)."""
    return "llmlingua" if settings.lingua_summaries else settings.summarizer


#: ablation axes: caps are drawn by the fact cap in tokens; the summarizer axis names
#: the one that actually writes ``o`` summaries; the enforcement figure also shows
#: what the mode is for (replies valid at the first try)
TERSETALK_AXES = {
    "caps": Axis(value=lambda s: s.cap_dict().get("f", 0), label="fact cap (tokens)"),
    "summarizer": Axis(value=summarizer_name, label="overflow summarizer"),
    "enforcement": Axis(panels=("compliance_first_try_rate",)),
}

register(
    "tersetalk",
    codec=TerseTalkCodec,
    settings=TerseTalkSettings,
    inputs=lambda s: prepared_compressor_inputs(touchpoint_models(s)),
    ablation=TERSETALK_AXES,
    rates=TERSETALK_RATES,
)
