"""``formats``: the Manager forwards the tool payload re-encoded by one of the study's encoders.

The format study's system in the pipeline. On ``toolqa`` the free-form
Manager forwards the payload as the tool returned it (pretty JSON); here the same brief
carries the payload encoded by the variant's ``encoder`` through
:func:`tersetalk.formats.solver.encode`, exactly as the comprehension experiment
encodes it: ``json_pretty`` / ``json_compact`` / ``toon`` (or another single format),
or ``mckp``, the multi-choice knapsack's cheapest lossless encoding, or with a
``budget`` the most value within that many tokens (what is left out named by
overflow hints). Everything else -- the goal, the question, the Worker's and Critic's
turns -- is free-form (:class:`ProseCodec`), so a paired comparison with
``freeform/default`` isolates the payload's encoding.

Counters (one payload per example): ``format_payload_tokens`` (as sent) and
``format_payload_tokens_pretty`` (as the tool returned it), both under the variant's
``tokenizer``; ``format_payload_saving`` (1 - sent / pretty); ``format_value_share``
(the share of leaves kept: below 1 only under a budget); ``format_lossless``;
``format_fallback`` (1 when compact JSON was sent instead: the encoder cannot carry
this payload losslessly, or the knapsack's text did not read back) and
``format_fallback_reason``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, PositiveInt, ValidationInfo, field_validator

from tersetalk.agents.codecs.prose import ProseCodec
from tersetalk.agents.engine import Dialogue
from tersetalk.agents.roles import Brief, render_brief
from tersetalk.formats.solver import SINGLE, BudgetError, encode
from tersetalk.systems import register

#: the solver's single formats and the knapsack
ENCODERS = (*SINGLE, "mckp")
TOKENIZERS = ("o200k_base", "cl100k_base")


class FormatsSettings(BaseModel):
    """The knobs of one ``formats`` variant (``systems.formats.variants.<name>``)."""

    model_config = ConfigDict(extra="forbid")

    encoder: str = "mckp"
    #: tokens the payload may take (mckp only): the knapsack keeps the most value
    budget: PositiveInt | None = None
    #: what token counts (budget, counters) are measured under
    tokenizer: str = "o200k_base"

    @field_validator("encoder")
    @classmethod
    def _known_encoder(cls, value: str) -> str:
        if value not in ENCODERS:
            raise ValueError(f"unknown encoder {value!r}; use one of {', '.join(ENCODERS)}")
        return value

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str) -> str:
        if value not in TOKENIZERS:
            raise ValueError(f"unknown tokenizer {value!r}; use one of {', '.join(TOKENIZERS)}")
        return value

    @field_validator("budget")
    @classmethod
    def _budget_is_for_mckp(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("encoder", "mckp") != "mckp":
            raise ValueError(
                "a budget applies to encoder mckp only (the knapsack elides to fit it); "
                "remove budget or set encoder: mckp"
            )
        return value


class FormatsError(ValueError):
    """The formats system was given an example without a tool payload."""


class FormatsCodec(ProseCodec):
    """Prose, with the brief's tool payload re-encoded by the variant's encoder."""

    format_counters: dict[str, Any] = {}

    def write_brief(self, brief: Brief) -> str:
        if not brief.payload:
            raise FormatsError(
                f"task {self.ctx.task!r} has no tool payload to encode; the formats system "
                "runs on toolqa (config key 'systems.formats.tasks')"
            )
        text, self.format_counters = encode_payload(brief.payload, self.settings)
        return render_brief(replace(brief, payload=text))

    def counters(self, d: Dialogue) -> dict[str, Any]:
        return dict(self.format_counters)


def encode_payload(payload: str, settings: FormatsSettings) -> tuple[str, dict[str, Any]]:
    """The payload in the variant's encoding, and the counters of the record.

    A single format that cannot carry the payload losslessly sends compact JSON
    instead (counted, with the reason): the study's encoders fail closed, and a run
    must still deliver the data. A budget the knapsack cannot meet raises BudgetError:
    the example becomes an error row, scored wrong.
    """
    from tersetalk.core.tokens import count_tokens
    from tersetalk.formats.tree import parse_json

    node = parse_json(payload)
    tok = settings.tokenizer
    reason = None
    try:
        enc = encode(node, settings.encoder, budget=settings.budget, tokenizer=tok)
        reason = enc.fallback
    except BudgetError:
        raise
    except ValueError as exc:
        reason = f"{settings.encoder}: {exc}"
        enc = encode(node, "json_compact", tokenizer=tok)
    pretty = count_tokens(payload, tok)
    return enc.text, {
        "format_payload_tokens": enc.tokens,
        "format_payload_tokens_pretty": pretty,
        "format_payload_saving": 1 - enc.tokens / pretty if pretty else 0.0,
        "format_value_share": enc.value_share,
        "format_lossless": int(enc.lossless),
        "format_fallback": int(reason is not None),
        "format_fallback_reason": reason or "",
    }


register("formats", codec=FormatsCodec, settings=FormatsSettings)
