"""``freeform``: the baseline. Every message is plain natural language.

Manager -> Worker: the brief. Worker -> Critic: the draft, with the brief
forwarded so the Critic can judge it. Critic -> Worker: the verdict. One revise
round when asked. Worker -> Manager: the final answer.

Variant setting ``prompting``:

- ``default``: the Worker's prompts of :mod:`tersetalk.agents.roles`, unchanged;
- ``cod``: Chain-of-Draft (Xu et al., 2025, "Chain of Draft: Thinking Faster by Writing
  Less"). The Worker is told to think step by step but keep only a minimal draft of at
  most five words per step, and to give the answer after a ``####`` separator (GSM8K's
  own answer format). It is the prompt-only way to spend fewer tokens, so it is the
  baseline a protocol has to beat. Only the Worker's prompt changes: the Critic and the
  revise round are free-form's, so the difference to ``default`` is the drafting alone.
  The answer is read after the last ``####``; a reply without one (or with nothing
  usable after it) falls back to free-form's reading, and the record says so
  (counters ``cod_marker`` and ``cod_fallback``). Chain-of-Draft has prompts for
  HotpotQA and GSM8K only; a ``cod`` variant must name them in its ``tasks``.

``default`` serialises to no settings at all, so ``freeform/default``'s run spec (and
every record's ``spec_hash``) is what it was before the setting existed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_serializer

from tersetalk.agents.codecs.prose import ProseCodec
from tersetalk.agents.engine import Dialogue
from tersetalk.agents.roles import Participant, extract_prediction
from tersetalk.systems import register
from tersetalk.tasks.registry import get as get_task
from tersetalk.tasks.registry import names as task_names

__all__ = ["COD_INSTRUCTION", "FreeformCodec", "FreeformSettings", "cod_worker_system"]

#: Chain-of-Draft's instruction, as its paper words it
COD_INSTRUCTION = (
    "Think step by step, but only keep a minimum draft for each thinking step, with 5 words "
    "at most. Return the answer at the end of the response after a separator ####."
)


def cod_worker_system(task: str) -> str | None:
    """The Worker's system prompt under Chain-of-Draft for ``task``: what the Manager
    sends and the answer's form (the task's ``brief_holds`` and ``answer``) around
    :data:`COD_INSTRUCTION`; None (not offered) for a task that does not say what its
    brief holds."""
    spec = get_task(task)
    if spec.brief_holds is None:
        return None
    return (f"You are the Worker. The Manager sends you {spec.brief_holds}. "
            f"{COD_INSTRUCTION} The answer is {spec.answer.form}.")  # fmt: skip


class FreeformSettings(BaseModel):
    """The knobs of one ``freeform`` variant (``systems.freeform.variants.<name>``)."""

    model_config = ConfigDict(extra="forbid")

    prompting: Literal["default", "cod"] = "default"

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: Any) -> dict:
        # the baseline's spec must not change because a setting was added
        data = handler(self)
        return {k: v for k, v in data.items() if v != type(self).model_fields[k].default}


def read_cod_answer(task: str, text: str) -> tuple[str, bool]:
    """``(prediction, found after ####)`` of a Chain-of-Draft reply.

    The answer is what follows the last ``####``, read as the task reads a reply (its
    first number for GSM8K, its first non-empty line for HotpotQA). Without a marker, or
    with nothing usable after it, the whole reply is read the same way
    (:func:`~tersetalk.agents.roles.extract_prediction`), and the second value is False
    so the record can count the fallback.
    """
    if "####" in text:
        answer = extract_prediction(task, text.rpartition("####")[2])
        if answer:
            return answer, True
    return extract_prediction(task, text), False


class FreeformCodec(ProseCodec):
    """Prose; under ``prompting: cod`` the Worker drafts and answers after ``####``."""

    cod_marker: bool | None = None

    @property
    def _cod(self) -> bool:
        return self.settings is not None and self.settings.prompting == "cod"

    def prompt(self, who: Participant) -> str:
        if self._cod and who.kind == "worker":
            prompt = cod_worker_system(self.ctx.task)
            if prompt is None:
                offered = [t for t in task_names() if cod_worker_system(t) is not None]
                raise ValueError(
                    f"freeform with prompting: cod has no Worker prompt for task "
                    f"{self.ctx.task!r} (it has {offered}); list only those in the "
                    f"variant's tasks, e.g. tasks: [{', '.join(offered)}]"
                )
            return prompt
        return super().prompt(who)

    def prediction(self, answer: str) -> str:
        if not self._cod:
            return super().prediction(answer)
        prediction, self.cod_marker = read_cod_answer(self.ctx.task, answer)
        return prediction

    def counters(self, d: Dialogue) -> dict[str, Any]:
        if not self._cod:
            return super().counters(d)
        # cod_marker: the answer was read after ####; cod_fallback: read as free-form's
        return {"cod_marker": int(bool(self.cod_marker)), "cod_fallback": int(not self.cod_marker)}


register("freeform", codec=FreeformCodec, settings=FreeformSettings)
