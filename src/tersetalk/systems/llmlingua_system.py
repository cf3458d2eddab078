"""``llmlingua``: the free-form Manager message, compressed by LLMLingua before it is sent.

The strong compression baseline. The brief is built exactly as in ``freeform``;
its facts go through question-aware LLMLingua (the question conditions the
perplexities; with ``rank_method: longllmlingua`` it also ranks the facts), the
goal and the question are kept verbatim, and for GSM8K numbers and math operators
are never dropped. The Worker and the Critic then talk as in ``freeform``.

Counters (one compressed message per example): ``lingua_origin_tokens`` and
``lingua_tokens`` (the message before and after, cl100k), ``lingua_rate`` (their
ratio), ``lingua_ctx_*`` (the same for the facts alone), ``lingua_target_rate``,
``lingua_rate_error`` (achieved / target - 1 in the variant's scope),
``lingua_within_tolerance``, ``lingua_target_unreachable`` (the kept parts or the
forced digits alone exceed the target: short messages cannot always get there),
``lingua_attempts``, ``lingua_compressor_mismatch`` (1: the prepared compressor
folder does not match the embedded model, see ``LLMLinguaCompressor.describe()``)
and ``t_lingua_s`` (the compressor's own time).
"""

from __future__ import annotations

from typing import Any

from tersetalk.agents.codecs.prose import ProseCodec
from tersetalk.agents.engine import Dialogue
from tersetalk.agents.roles import Brief
from tersetalk.encoders.lingua import LinguaSettings, get_compressor
from tersetalk.encoders.prepare import prepared_compressor_inputs
from tersetalk.systems import register
from tersetalk.systems.lingua_brief import compress_brief


class LLMLinguaSystemSettings(LinguaSettings):
    """The knobs of one ``llmlingua`` variant (``systems.llmlingua.variants.<name>``).

    Everything of :class:`~tersetalk.encoders.lingua.LinguaSettings`: ``rate`` or
    ``target_tokens``, ``rate_scope``, ``rank_method``, ``model`` (an LLMLingua-2
    classifier switches to LLMLingua-2), forcing, tolerance.

    ``force_entities`` is on here: LLMLingua with a causal LM drops
    sub-word tokens, and at rate 0.9 it cut the answer out of 4 of 10 HotpotQA briefs
    ("PPG Paints Arena" -> "PPG Paintsa"); keeping capitalised words and numbers whole
    brings gold-reaches-Worker from 0.60 to 0.80 on the evaluation sample and from
    0.50 to 0.90 on the calibration shard (the ablation ``lingua_entities`` shows it).

    ``entity_phrases`` is on too: given a name, the content word after it is the most
    predictable token, so LLMLingua dropped it first, and it was the rest of the
    answer ("a representation of the Baudot code" -> "... of the Baudot."). Keeping it
    brings gold-reaches-Worker at rate 0.9 from 0.80 to 0.90 on the evaluation sample
    (free-form: 0.90; the ablation ``lingua_phrases`` shows it).
    """

    force_entities: bool = True
    entity_phrases: bool = True


class LinguaCodec(ProseCodec):
    """Prose, with the Manager's brief compressed by LLMLingua."""

    lingua_counters: dict[str, Any] = {}

    def write_brief(self, brief: Brief) -> str:
        compressor = get_compressor(self.ctx, self.settings)
        text, self.lingua_counters = compress_brief(brief, compressor, self.settings,
                                                    self.ctx.task)  # fmt: skip
        return text

    def counters(self, d: Dialogue) -> dict[str, Any]:
        return dict(self.lingua_counters)


register(
    "llmlingua",
    codec=LinguaCodec,
    settings=LLMLinguaSystemSettings,
    inputs=lambda s: prepared_compressor_inputs([s.model]),
)
