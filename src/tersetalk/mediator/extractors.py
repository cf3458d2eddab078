"""Stage 2: turn (compressed) text into semantic keys.

* :class:`RuleBasedExtractor` - deterministic: explicit labels (``Goal:``,
  ``Question:``, ...) first, then cue words per sentence; anything else is
  CONTEXT. Its raw output lists which rule typed each key.
* :class:`LLMExtractor` - the model backend with constrained structured output
  (Instructor + a JSON schema compiled into a grammar); its raw output is the
  model's JSON text.

Both return an :class:`ExtractionResult` with the schema version and the raw
extractor output kept for debugging.
"""

from __future__ import annotations

import dataclasses
import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from tersetalk.mediator.errors import ExtractionError, MediatorConfigError
from tersetalk.mediator.keys import SCHEMA_VERSION, KeyType, SemanticKey

__all__ = [
    "ExtractionResult",
    "LLMExtractor",
    "RuleBasedExtractor",
    "SemanticKeyExtractor",
    "make_extractor",
]


@dataclass
class ExtractionResult:
    keys: list[SemanticKey]
    schema_version: str = SCHEMA_VERSION
    raw_output: str = ""
    extractor: str = ""
    dropped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "keys": [k.model_dump(mode="json") for k in self.keys],
            "schema_version": self.schema_version,
            "raw_output": self.raw_output,
            "extractor": self.extractor,
            "dropped": list(self.dropped),
        }


class SemanticKeyExtractor(ABC):
    name = "extractor"

    @abstractmethod
    def extract(self, text: str) -> ExtractionResult:
        """Keys for ``text``; raises :class:`ExtractionError` when it cannot."""


_LABELS: dict[str, KeyType] = {
    "goal": KeyType.GOAL, "objective": KeyType.GOAL, "aim": KeyType.GOAL,
    "question": KeyType.INSTRUCTION, "task": KeyType.INSTRUCTION,
    "instruction": KeyType.INSTRUCTION, "request": KeyType.INSTRUCTION,
    "constraint": KeyType.CONSTRAINT, "constraints": KeyType.CONSTRAINT,
    "rule": KeyType.CONSTRAINT, "requirement": KeyType.CONSTRAINT,
    "deadline": KeyType.CONSTRAINT,
    "state": KeyType.STATE, "status": KeyType.STATE, "progress": KeyType.STATE,
    "context": KeyType.CONTEXT, "facts": KeyType.CONTEXT, "fact": KeyType.CONTEXT,
    "background": KeyType.CONTEXT, "note": KeyType.CONTEXT,
}  # fmt: skip
_LABEL_RE = re.compile(r"^\s*([A-Za-z]+)\s*:\s*(.*)$")
_BULLET_RE = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_CUES: list[tuple[KeyType, str, re.Pattern[str]]] = [
    (KeyType.CONSTRAINT, "modal",
     re.compile(r"\b(must|should|shall|do not|don't|never|no more than|at most|at least|"
                r"limit(?:ed)? to|required to|make sure|ensure|without|deadline|"
                r"not exceed)\b", re.I)),
    (KeyType.GOAL, "purpose",
     re.compile(r"\b(goal|aim|objective|in order to|so that|we want to|the purpose|"
                r"intend to)\b", re.I)),
    (KeyType.INSTRUCTION, "question", re.compile(r"\?\s*$")),
    (KeyType.INSTRUCTION, "imperative",
     re.compile(r"^(please\b|answer|solve|give|find|compute|calculate|write|list|"
                r"summari[sz]e|update|send|check|explain|return|reply|use|provide|create|"
                r"analy[sz]e|review|report|determine|identify|compare|name|tell|state|run|"
                r"restart|start|stop|fix|make|prepare|schedule|share|add|remove|delete)\b",
                re.I)),
    (KeyType.STATE, "status",
     re.compile(r"\b(currently|status|is now|so far|already|in progress|remaining|"
                r"has been|have been|completed|pending|confidence)\b", re.I)),
]  # fmt: skip


def _units(text: str) -> list[str]:
    """Lines, with prose lines split into sentences, bullets stripped."""
    out = []
    for line in text.splitlines():
        line = _BULLET_RE.sub("", line).strip()
        if not line:
            continue
        if _LABEL_RE.match(line):
            out.append(line)
            continue
        out.extend(s.strip() for s in _SENTENCE_RE.split(line) if s.strip())
    return out


class RuleBasedExtractor(SemanticKeyExtractor):
    """Deterministic keys: same text in, same keys out, no model."""

    name = "rule"

    def extract(self, text: str) -> ExtractionResult:
        keys: list[SemanticKey] = []
        why: list[dict] = []
        seen: set[tuple[KeyType, str]] = set()
        section: KeyType | None = None
        for unit in _units(text):
            ktype, rule, value = None, "", unit
            m = _LABEL_RE.match(unit)
            if m and m.group(1).lower() in _LABELS:
                label_type = _LABELS[m.group(1).lower()]
                if not m.group(2).strip():  # a section header such as "Facts:"
                    section = label_type
                    continue
                ktype, rule, value = label_type, f"label {m.group(1)!r}", m.group(2).strip()
                section = None
            if ktype is None and section is not None:
                ktype, rule = section, "section"
            if ktype is None:
                for cue_type, cue, pattern in _CUES:
                    if pattern.search(unit):
                        ktype, rule = cue_type, f"cue {cue}"
                        break
            if ktype is None:
                ktype, rule = KeyType.CONTEXT, "default"
            if (ktype, value) in seen:
                continue
            seen.add((ktype, value))
            keys.append(SemanticKey(type=ktype, value=value[:2000]))
            why.append({"type": ktype.value, "rule": rule, "text": value})
        return ExtractionResult(keys=keys, raw_output=json.dumps(why, ensure_ascii=False),
                                extractor=self.name)  # fmt: skip


EXTRACTOR_SYSTEM = (
    "You turn a message into semantic keys. Each key has a type and a short value copied "
    "or condensed from the message. Types: INSTRUCTION (what to do, or the question to "
    "answer), GOAL (the aim), CONTEXT (facts and background), CONSTRAINT (limits and "
    "rules), STATE (current status). Keep every name, number and date. Use only "
    "information in the message."
)

_Value = Annotated[str, StringConstraints(min_length=1, max_length=300)]


class _KeyDraft(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["INSTRUCTION", "STATE", "GOAL", "CONTEXT", "CONSTRAINT"]
    value: _Value


def _keys_schema(max_keys: int) -> type[BaseModel]:
    class KeysDraft(BaseModel):
        model_config = ConfigDict(extra="forbid")
        keys: list[_KeyDraft] = Field(min_length=1, max_length=max_keys)

    return KeysDraft


class LLMExtractor(SemanticKeyExtractor):
    """Keys by the model backend under a JSON schema (grammar-constrained where possible)."""

    name = "llm"

    def __init__(self, client, gen=None, max_tokens: int = 192, max_keys: int = 8) -> None:
        from tersetalk.models import GenerationConfig

        self.client = client
        base = gen or GenerationConfig()
        self.gen = dataclasses.replace(base, max_tokens=max_tokens)
        self.schema = _keys_schema(max_keys)

    def extract(self, text: str) -> ExtractionResult:
        from tersetalk.models import ModelError

        messages = [{"role": "system", "content": EXTRACTOR_SYSTEM},
                    {"role": "user", "content": text}]  # fmt: skip
        try:
            res = self.client.structured(messages, self.schema, self.gen)
        except ModelError as exc:
            raise ExtractionError(
                f"LLM extractor failed: {exc}; raise semantic_keys.max_tokens, use a stronger "
                "model, or set semantic_keys.extractor: rule"
            ) from exc
        keys, dropped = [], []
        for item in (res.parsed or {}).get("keys", []):
            value = str(item.get("value", "")).strip()
            if not value:
                dropped.append(json.dumps(item))  # an empty value carries nothing; recorded
                continue
            keys.append(SemanticKey(type=KeyType(item["type"]), value=value))
        return ExtractionResult(keys=keys, raw_output=res.text, extractor=self.name,
                                dropped=dropped)  # fmt: skip


def make_extractor(cfg, client=None, gen=None) -> SemanticKeyExtractor:
    """Build the extractor ``semantic_keys.extractor`` names."""
    if cfg.extractor == "rule":
        return RuleBasedExtractor()
    if cfg.extractor == "llm":
        if client is None:
            raise MediatorConfigError(
                "semantic_keys.extractor=llm needs a model client; use extractor: rule"
            )
        return LLMExtractor(client, gen, max_tokens=cfg.max_tokens, max_keys=cfg.max_keys)
    raise MediatorConfigError(f"semantic_keys.extractor: unknown extractor {cfg.extractor!r}")
