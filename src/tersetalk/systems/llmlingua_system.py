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

from tersetalk.agents.roles import build_brief
from tersetalk.encoders.lingua import LinguaSettings, get_compressor
from tersetalk.encoders.messages import compress_brief
from tersetalk.systems import register
from tersetalk.systems.base import RunContext, SystemResult
from tersetalk.systems.freeform import converse


class LLMLinguaSystemSettings(LinguaSettings):
    """The knobs of one ``llmlingua`` variant (``systems.llmlingua.variants.<name>``).

    Everything of :class:`~tersetalk.encoders.lingua.LinguaSettings`: ``rate`` or
    ``target_tokens``, ``rate_scope``, ``rank_method``, ``model`` (an LLMLingua-2
    classifier switches to LLMLingua-2), forcing, tolerance.
    """


@register("llmlingua", settings=LLMLinguaSystemSettings)
def run(example: dict, ctx: RunContext) -> SystemResult:
    settings = LLMLinguaSystemSettings.model_validate(ctx.variant_settings)
    brief = build_brief(ctx.task, example["record"], ctx.task_options)
    compressor = get_compressor(ctx, settings)
    message, counters = compress_brief(brief, compressor, settings, ctx.task)
    result = converse(example, ctx, message)
    result.counters = {**result.counters, **counters}
    return result
