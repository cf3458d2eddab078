"""A free-form message through LLMLingua: plan the target, project it, compress it.

A message is viewed as kept lines (the goal, the question, labels) around a list
of compressible pieces (the facts, plan steps, a note). Only the pieces are
compressed, question-aware, as LLMLingua keeps instruction and question. The
target comes from the variant: a rate over the pieces (``rate_scope: context``), a
rate over the whole message (``message``, LLMLingua's own definition) or a token
budget for the whole message (``target_tokens``). When the kept parts alone, or the
digits that must survive, exceed the target, it cannot be reached; the counters
say so instead of pretending.

The Manager's brief as such a view (and its compression) is the systems' business:
:mod:`tersetalk.systems.lingua_brief`; this module knows no agent roles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tersetalk.core.tokens import count_tokens
from tersetalk.encoders.lingua import Compressed, Compressor, LinguaSettings, ceil_int


@dataclass(frozen=True)
class MessageView:
    """A free-form message as kept lines around compressible pieces."""

    head: tuple[str, ...] = ()
    pieces: tuple[str, ...] = ()
    tail: tuple[str, ...] = ()
    #: what the pieces answer; conditions LLMLingua's perplexities
    question: str = ""
    #: a line printed before the pieces when there are any (e.g. "Facts:")
    label: str | None = None
    bullet: str = "- "

    def render(self, pieces: list[str] | tuple[str, ...] | None = None) -> str:
        pieces = self.pieces if pieces is None else pieces
        lines = list(self.head)
        if pieces and self.label:
            lines.append(self.label)
        lines += [f"{self.bullet}{p}" for p in pieces]
        lines += list(self.tail)
        return "\n".join(line for line in lines if line)


@dataclass(frozen=True)
class Plan:
    """Token accounting of one message before compression (cl100k tokens)."""

    message_tokens: int
    context_tokens: int
    kept_tokens: int
    #: the target rate in the variant's scope (context or message)
    target_rate: float
    scope: str
    #: what the pieces must shrink to
    target_context: int
    reachable: bool


def plan_message(view: MessageView, opts: LinguaSettings) -> Plan:
    message = count_tokens(view.render())
    context = count_tokens("\n".join(view.pieces)) if view.pieces else 0
    kept = max(0, message - context)
    if opts.target_tokens is not None:
        scope, target_rate = "message", min(1.0, opts.target_tokens / max(1, message))
        target_ctx = opts.target_tokens - kept
    elif opts.rate_scope == "message":
        scope, target_rate = "message", opts.rate
        target_ctx = round(opts.rate * message) - kept
    else:
        scope, target_rate = "context", opts.rate
        target_ctx = round(opts.rate * context)
    reachable = context > 0 and target_ctx >= min(opts.min_context_tokens, context)
    return Plan(message, context, kept, target_rate, scope, int(target_ctx), reachable)


def project(plan: Plan, opts: LinguaSettings, factor: float = 1.0) -> int:
    """LLMLingua's projected message length, without running it (the hybrid gate's guess).

    The kept parts plus the pieces' target (scaled by ``factor``, a calibration knob);
    never more than the message itself.
    """
    if plan.context_tokens == 0:
        return plan.message_tokens
    ctx = max(plan.target_context, min(opts.min_context_tokens, plan.context_tokens))
    return min(plan.message_tokens, plan.kept_tokens + ceil_int(factor * ctx))


@dataclass
class CompressedMessage:
    text: str
    plan: Plan
    compressed: Compressed | None
    counters: dict[str, Any] = field(default_factory=dict)


def compress_message(
    view: MessageView, compressor: Compressor, opts: LinguaSettings, task: str
) -> CompressedMessage:
    """Compress the view's pieces to the variant's target; counters ``lingua_*``."""
    plan = plan_message(view, opts)
    comp: Compressed | None = None
    pieces: list[str] | tuple[str, ...] = view.pieces
    if plan.context_tokens:
        comp = compressor.compress(
            list(view.pieces),
            target_tokens=max(plan.target_context, opts.min_context_tokens),
            question=view.question,
            force=opts.forces(task),
            options=opts,
        )
        pieces = comp.pieces
    text = view.render(pieces)
    described = compressor.describe()
    mismatch = bool(described.get("compressor_mismatch", False))
    # a compressor that keeps a cache (the real one) says whether this one came from it
    hit = None
    if "cache_dir" in described:
        hit = int(comp is not None and bool(comp.extra.get("cache_hit")))
    counters = message_counters(plan, text, comp, opts, compressor_mismatch=mismatch, cache_hit=hit)
    return CompressedMessage(text, plan, comp, counters)


def message_counters(
    plan: Plan,
    message: str,
    comp: Compressed | None,
    opts: LinguaSettings,
    *,
    compressor_mismatch: bool = False,
    cache_hit: int | None = None,
) -> dict[str, Any]:
    """The ``lingua_*`` counters of one message (and ``t_lingua_s``, its timing).

    ``lingua_compressor_mismatch`` is 1 when the compressor's prepared folder does
    not match the embedded model, so such records can be found and excluded later.
    ``t_lingua_cache_hit`` (given ``cache_hit``: compressors with a cache) is 1 when
    the compression was read from the LLMLingua cache; ``t_`` because it describes
    this execution, like ``t_lingua_s`` (the stored time of the compression then).
    """
    sent = count_tokens(message)
    msg_rate = sent / plan.message_tokens if plan.message_tokens else 1.0
    ctx_rate = comp.rate if comp is not None else 1.0
    achieved = ctx_rate if plan.scope == "context" else msg_rate
    error = achieved / plan.target_rate - 1.0
    if plan.context_tokens == 0:  # nothing compressible: only "no compression" is reachable
        reachable = plan.target_rate >= 1.0
    else:  # the compressor knows about forced digits and the minimum it keeps
        reachable = plan.reachable and (comp is None or comp.reachable)
    out: dict[str, Any] = {
        "lingua_origin_tokens": plan.message_tokens,
        "lingua_tokens": sent,
        "lingua_rate": msg_rate,
        "lingua_ctx_origin_tokens": plan.context_tokens,
        "lingua_ctx_tokens": comp.compressed_tokens if comp is not None else plan.context_tokens,
        "lingua_ctx_rate": ctx_rate,
        "lingua_kept_tokens": plan.kept_tokens,
        "lingua_target_rate": plan.target_rate,
        "lingua_target_ctx_tokens": plan.target_context,
        "lingua_scope_rate": achieved,
        "lingua_rate_error": error,
        "lingua_abs_rate_error": abs(error),
        "lingua_within_tolerance": int(abs(error) <= opts.tolerance),
        "lingua_target_unreachable": int(not reachable),
        "lingua_skipped": int(comp is None or comp.skipped),
        "lingua_attempts": comp.attempts if comp is not None else 0,
        "lingua_fallbacks": comp.fallbacks if comp is not None else 0,
        "lingua_forced_tokens": comp.forced_tokens if comp is not None else 0,
        "lingua_compressor_mismatch": int(compressor_mismatch),
        "t_lingua_s": comp.seconds if comp is not None else 0.0,
    }
    if cache_hit is not None:
        out["t_lingua_cache_hit"] = cache_hit
    return out
