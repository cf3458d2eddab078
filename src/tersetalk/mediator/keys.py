"""Semantic keys: the typed symbols stage 2 turns a message into.

A key is ``{"type": <KeyType>, "value": <text>}``; a key set carries the schema
version. Serialisation is canonical JSON; deserialisation validates against the
schema and reports every problem with its JSON path (``keys[2].type: ...``), so a
malformed payload from an LLM or a file is rejected loudly, never half-read.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from tersetalk.mediator.errors import KeyValidationError

__all__ = [
    "SCHEMA_VERSION",
    "KeyType",
    "SemanticKey",
    "SemanticKeySet",
    "keys_from_json",
    "keys_json_schema",
    "keys_to_json",
    "render_keys",
]

SCHEMA_VERSION = "1.0"


class KeyType(StrEnum):
    """What a key says: an order, a state of the world, an aim, background, or a limit."""

    INSTRUCTION = "INSTRUCTION"
    STATE = "STATE"
    GOAL = "GOAL"
    CONTEXT = "CONTEXT"
    CONSTRAINT = "CONSTRAINT"


KeyValue = Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class SemanticKey(BaseModel):
    """One key: a type and a non-empty value."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: KeyType
    value: KeyValue

    def render(self) -> str:
        return f"{self.type.value}: {self.value}"


class SemanticKeySet(BaseModel):
    """The keys of one message with the schema version they follow."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Annotated[str, StringConstraints(pattern=r"^1\.0$")] = SCHEMA_VERSION
    keys: list[SemanticKey] = Field(default_factory=list)


def keys_json_schema() -> dict[str, Any]:
    """The JSON schema a serialised key set conforms to."""
    return SemanticKeySet.model_json_schema()


def keys_to_json(keys: list[SemanticKey], schema_version: str = SCHEMA_VERSION) -> str:
    """Canonical JSON of a key list (validated on the way out too)."""
    ks = SemanticKeySet(schema_version=schema_version, keys=list(keys))
    return json.dumps(ks.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))


def _readable(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        path = ""
        for p in err["loc"]:
            path += f"[{p}]" if isinstance(p, int) else (f".{p}" if path else str(p))
        got = err.get("input")
        shown = repr(got) if not isinstance(got, dict | list) else type(got).__name__
        hint = ""
        if err["type"] == "enum":
            hint = f"; allowed types: {', '.join(t.value for t in KeyType)}"
        elif err["type"] == "extra_forbidden":
            hint = "; a key has only 'type' and 'value'"
        elif err["type"] == "string_pattern_mismatch":
            hint = f"; this version reads schema_version {SCHEMA_VERSION!r}"
        parts.append(f"{path or '<root>'}: {err['msg']} (got {shown}){hint}")
    return "semantic keys do not conform to the schema:\n  " + "\n  ".join(parts)


def keys_from_json(text: str | bytes) -> SemanticKeySet:
    """Parse and validate serialised keys; raise :class:`KeyValidationError` listing problems."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as exc:
        raise KeyValidationError(f"semantic keys are not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise KeyValidationError(
            'semantic keys must be a JSON object {"schema_version": ..., "keys": [...]}, '
            f"got {type(data).__name__}"
        )
    if "schema_version" not in data:
        raise KeyValidationError("semantic keys: 'schema_version' is missing; add \"1.0\"")
    try:
        return SemanticKeySet.model_validate(data)
    except ValidationError as exc:
        raise KeyValidationError(_readable(exc)) from None


def render_keys(keys: list[SemanticKey]) -> str:
    """Keys as the text Agent B reads: one ``TYPE: value`` line each."""
    return "\n".join(k.render() for k in keys)
