"""Lenient normalisation of one JSON value into one canonical line.

Small models write ``{"f": "..."}``, ``{"type": "fact", "content": "..."}``,
``["fact", "..."]`` or ``["v", "accept"]`` as readily as the canonical array. This
module maps such shapes onto the line models by a fixed set of rules, so the same
input always gives the same line, and a line (or its canonical array) normalises to
itself -- which is what makes normalisation idempotent.

When no rule fits, :class:`NormalizationError` is raised; the lenient parser then
keeps the raw text as a ``t`` line so nothing is lost.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from .errors import NormalizationError
from .lines import LINE_TYPES, LineBase, TextLine, replace_surrogates
from .tags import PLURAL_ALIASES, role_for, tag_for, verdict_for

_MISSING: Any = object()

#: Keys that name the tag of an object-shaped line.
TAG_KEYS: tuple[str, ...] = ("tag", "type", "kind", "line_type")

_TEXT = ("text", "content", "value", "body", "message", "msg", "statement", "payload")
#: Field synonyms per payload slot (lower case). The tag's own long names are added
#: to its primary slot at lookup time, so {"tag": "f", "fact": "..."} works too.
SLOT_SYNONYMS: dict[str, tuple[str, ...]] = {
    "role": ("role", "value", "name", "who", "speaker", "from"),
    "text": _TEXT,
    "ref": ("ref", "id", "mid", "memory", "memory_id", "pointer", "source", "src", "see"),
    "to": ("to", "addressee", "target", "recipient", "for", "ask"),
    "verdict": ("verdict", "value", "decision", "result", "status"),
    "summary": ("summary", "text", "content", "value"),
    "method": ("method", "summarizer", "via"),
    "key": ("key", "name", "field"),
    "value": ("value", "val", "text", "content"),
}

#: The slot a bare value goes to ({"q": "Which year?"} fills the question's text).
PRIMARY_SLOT: dict[str, str] = {
    "r": "role",
    "g": "text",
    "f": "text",
    "u": "text",
    "p": "text",
    "q": "text",
    "d": "ref",
    "v": "verdict",
    "o": "summary",
    "t": "text",
    "x": "key",
}

_LOOSE_REF_RE = re.compile(r"^\s*(?:m(?:em(?:ory)?)?\s*#?|#)?\s*0*([1-9][0-9]{0,17})\s*$", re.I)
_MARKED_REF_RE = re.compile(r"^\s*(?:m(?:em(?:ory)?)?\s*#?|#)\s*0*([1-9][0-9]{0,17})\s*$", re.I)


class _Fail(Exception):
    """Internal: this rule does not fit (converted to NormalizationError at the top)."""


def _text(value: Any) -> str:
    if isinstance(value, str):
        return replace_surrogates(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return json.dumps(value)
    raise _Fail(f"expected text, got {type(value).__name__}")


def _any_text(value: Any) -> str:
    """Text, or compact JSON for structured values (context values may be numbers)."""
    if isinstance(value, str):
        return replace_surrogates(value)
    if value is None or isinstance(value, bool | int | float | list | dict):
        return replace_surrogates(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    raise _Fail(f"expected a value, got {type(value).__name__}")


def _role(value: Any) -> str:
    if isinstance(value, str) and (role := role_for(value)):
        return role
    raise _Fail("expected a role (M, W, C or manager/worker/critic)")


def _verdict(value: Any) -> str:
    if isinstance(value, str) and (verdict := verdict_for(value)):
        return verdict
    raise _Fail("expected a verdict (A, R, E or accept/revise/escalate)")


def coerce_ref(value: Any, *, marked: bool = False) -> str:
    """``M#n`` from ``"M#3"``, ``"m#3"``, ``"#3"``, ``"M3"`` (and ``3``, ``"3"`` unless ``marked``).

    ``marked`` demands an ``M``/``#`` marker, used where a bare number could just as
    well be text (the optional tail of a fact: ``["f", "the total is", 42]``).
    """
    if isinstance(value, int) and not isinstance(value, bool) and not marked:
        if value > 0:
            return f"M#{value}"
        raise _Fail("a memory reference must be positive")
    if isinstance(value, str):
        match = (_MARKED_REF_RE if marked else _LOOSE_REF_RE).match(value)
        if match:
            return f"M#{int(match.group(1))}"
    raise _Fail("expected a memory reference like M#3")


def _is_ref(value: Any, *, marked: bool) -> bool:
    try:
        coerce_ref(value, marked=marked)
    except _Fail:
        return False
    return True


_COERCE = {
    "role": _role,
    "to": _role,
    "text": _text,
    "summary": _text,
    "method": _text,
    "key": _text,
    "value": _any_text,
    "verdict": _verdict,
    "ref": coerce_ref,
}


def _build(tag: str, slots: dict[str, Any], default_addressee: str | None) -> LineBase:
    cls = LINE_TYPES[tag]
    if tag == "q" and "to" not in slots:
        if default_addressee is None:
            raise _Fail("a question needs an addressee (M, W or C)")
        slots["to"] = default_addressee
    if tag == "o" and "method" not in slots:
        slots["method"] = "unknown"
    kwargs = {}
    for name in cls.payload_fields:
        if name not in slots:
            if name == "ref" and tag == "f":
                continue
            raise _Fail(f"missing {name!r} for tag {tag!r}")
        kwargs[name] = _COERCE[name](slots[name])
    try:
        return cls(**kwargs)
    except ValidationError as exc:
        raise _Fail(str(exc.errors()[0].get("msg", "invalid"))) from None


def _join(items: list[Any]) -> str:
    if not items:
        raise _Fail("missing text")
    return " ".join(_text(item) for item in items)


def _from_items(tag: str, items: list[Any], default_addressee: str | None) -> LineBase:
    """Positional payload, with the tolerances a model plausibly needs."""
    while items and items[-1] is None:
        items = items[:-1]  # ["f", "Paris", null]: an absent optional item written as null
    if len(items) == 1 and isinstance(items[0], dict):
        return _from_fields(tag, {}, items[0], default_addressee)
    slots: dict[str, Any] = {}
    if tag in ("g", "u", "p", "t"):
        slots["text"] = _join(items)
    elif tag == "f":
        if len(items) >= 2 and _is_ref(items[-1], marked=True):
            slots["ref"] = items[-1]
            items = items[:-1]
        slots["text"] = _join(items)
    elif tag == "q":
        if not items:
            raise _Fail("a question needs text")
        if len(items) == 1:
            slots["text"] = items[0]
        elif len(items) == 2 and not _is_role(items[0]) and _is_role(items[1]):
            slots["text"], slots["to"] = items
        elif _is_role(items[0]):
            slots["to"] = items[0]
            slots["text"] = _join(items[1:])
        else:
            raise _Fail('a question is ["q", addressee, text]')
    elif tag in ("r", "d", "v"):
        if len(items) != 1:
            raise _Fail(f"tag {tag!r} takes exactly one payload item")
        slots[PRIMARY_SLOT[tag]] = items[0]
    elif tag == "o":
        if len(items) not in (2, 3):
            raise _Fail('an overflow line is ["o", summary, ref, method]')
        slots.update(zip(("summary", "ref", "method"), items, strict=False))
    elif tag == "x":
        if len(items) == 1 and isinstance(items[0], dict) and len(items[0]) == 1:
            ((slots["key"], slots["value"]),) = items[0].items()
        elif len(items) == 2:
            slots["key"], slots["value"] = items
        else:
            raise _Fail('a context line is ["x", key, value]')
    return _build(tag, slots, default_addressee)


def _is_role(value: Any) -> bool:
    return isinstance(value, str) and role_for(value) is not None


def _slot_for_key(tag: str, key: str) -> str | None:
    names = LINE_TYPES[tag].payload_fields
    if tag_for(key) == tag and key not in SLOT_SYNONYMS["text"]:
        return PRIMARY_SLOT[tag]  # {"tag": "f", "fact": "..."}
    for name in names:
        if key in SLOT_SYNONYMS[name]:
            return name
    return None


def _from_fields(
    tag: str, fields: dict[str, Any], primary: Any, default_addressee: str | None
) -> LineBase:
    """Object-shaped payload: named fields plus an optional bare primary value."""
    slots: dict[str, Any] = {}
    if primary is not _MISSING:
        if isinstance(primary, list):
            if fields:
                raise _Fail("a list payload cannot be mixed with named fields")
            return _from_items(tag, primary, default_addressee)
        if isinstance(primary, dict):
            lowered = _lower_keys(primary)
            if tag == "x" and len(lowered) == 1 and _slot_for_key("x", next(iter(lowered))) is None:
                ((slots["key"], slots["value"]),) = primary.items()
            else:
                clash = set(lowered) & set(fields)
                if clash:
                    raise _Fail(f"field given twice: {sorted(clash)}")
                fields = {**fields, **lowered}
        else:
            slots[PRIMARY_SLOT[tag]] = primary
    for key, value in fields.items():
        if value is None:
            continue  # {"ref": null} is an absent field (model_dump() writes these)
        name = _slot_for_key(tag, key)
        if name is None:
            raise _Fail(f"unknown field {key!r} for tag {tag!r}")
        if name in slots:
            raise _Fail(f"two fields for {name!r}")
        slots[name] = value
    return _build(tag, slots, default_addressee)


def _lower_keys(obj: dict[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise _Fail("object keys must be strings")
        low = " ".join(key.strip().lower().split())
        if low in out:
            raise _Fail(f"key {key!r} given twice")
        out[low] = value
    return out


def _from_dict(obj: dict[Any, Any], default_addressee: str | None) -> LineBase:
    fields = _lower_keys(obj)
    for key in TAG_KEYS:
        value = fields.get(key)
        if isinstance(value, str) and (tag := tag_for(value)):
            rest = {k: v for k, v in fields.items() if k != key}
            return _from_fields(tag, rest, _MISSING, default_addressee)
    found: list[LineBase] = []
    for key, value in fields.items():
        tag = tag_for(key)
        if tag is None or (key in PLURAL_ALIASES and isinstance(value, list)):
            continue
        rest = {k: v for k, v in fields.items() if k != key}
        try:
            found.append(_from_fields(tag, rest, value, default_addressee))
        except _Fail:
            continue
    if len(found) == 1:
        return found[0]
    if not found:
        raise _Fail('no tag key (like "f" or "type": "fact") fits this object')
    raise _Fail("the object fits more than one line type")


def _from_list(obj: list[Any], default_addressee: str | None) -> LineBase:
    if not obj:
        raise _Fail("empty array")
    head = obj[0]
    tag = tag_for(head) if isinstance(head, str) else None
    if tag is None:
        raise _Fail("the first item is not a tag")
    return _from_items(tag, list(obj[1:]), default_addressee)


def normalize_obj(obj: Any, *, default_addressee: str | None = None) -> LineBase:
    """Map one JSON value (or a line) onto a canonical line model.

    A line model is returned unchanged and its canonical array maps back to an
    equal line, so ``normalize_obj(normalize_obj(x)) == normalize_obj(x)``.
    ``default_addressee`` (``"M"``, ``"W"`` or ``"C"``) is used for a question that
    names nobody; without it such a question is rejected.
    Raises :class:`NormalizationError` when no rule fits.
    """
    if isinstance(obj, LineBase):
        return obj
    if default_addressee is not None and default_addressee not in ("M", "W", "C"):
        raise NormalizationError(
            "default_addressee must be M, W or C", snippet=repr(default_addressee)
        )
    try:
        if isinstance(obj, list | tuple):
            return _from_list(list(obj), default_addressee)
        if isinstance(obj, dict):
            return _from_dict(obj, default_addressee)
        if isinstance(obj, str):
            return TextLine(text=replace_surrogates(obj))
        raise _Fail(f"cannot read a {type(obj).__name__} as a line")
    except _Fail as exc:
        raise NormalizationError(str(exc), snippet=_safe_repr(obj)) from None
    except RecursionError:
        raise NormalizationError("value is nested too deeply", snippet=None) from None


def _safe_repr(obj: Any) -> str:
    try:
        return json.dumps(obj, ensure_ascii=False)[:200]
    except (TypeError, ValueError, RecursionError):
        return type(obj).__name__


def tag_arity(tag: str) -> int:
    """Number of payload items of the tag's full canonical array."""
    return len(LINE_TYPES[tag].payload_fields)
