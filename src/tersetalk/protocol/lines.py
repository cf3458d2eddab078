"""Pydantic models, one per line type, and their canonical array form.

The canonical wire form of a line is the JSON array ``[tag, payload...]``; the
models exist so that everything past the parser works with validated, typed,
immutable values (hashable, comparable, dumpable into records).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from .errors import LineShapeError, PayloadError, UnknownTagError
from .tags import REF_PATTERN, TAGS, Role, Verdict

_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    """True if ``text`` holds a surrogate code point, which cannot be sent as UTF-8."""
    return _SURROGATE_RE.search(text) is not None


def replace_surrogates(text: str) -> str:
    """Replace lone surrogates by U+FFFD so the text can be encoded as UTF-8."""
    return _SURROGATE_RE.sub("\ufffd", text)


Ref = Annotated[str, Field(pattern=REF_PATTERN)]


class LineBase(BaseModel):
    """Common behaviour of every line: strict, frozen, array round trip.

    ``payload_fields`` lists the fields in wire order; ``optional_tail`` is how many
    trailing fields may be left off the array (only the fact's reference).
    """

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    tag: str
    payload_fields: ClassVar[tuple[str, ...]] = ()
    optional_tail: ClassVar[int] = 0
    #: The field that soft caps measure (``None``: the tag is never capped).
    capped_field: ClassVar[str | None] = None

    @field_validator("*", mode="after")
    @classmethod
    def _utf8_safe(cls, value: Any) -> Any:
        # A lone surrogate survives json.loads("\"\\ud800\"") but cannot be encoded,
        # so it would break serialisation later; reject it where it enters.
        if isinstance(value, str) and has_lone_surrogate(value):
            raise ValueError("text contains a lone surrogate code point (not valid UTF-8)")
        return value

    def payload(self) -> list[Any]:
        """Payload items in wire order, dropping an absent optional tail."""
        items = [getattr(self, name) for name in self.payload_fields]
        while self.optional_tail and items and items[-1] is None:
            items.pop()
        return items

    def to_array(self) -> list[Any]:
        """The canonical JSON array ``[tag, payload...]``."""
        return [self.tag, *self.payload()]

    @property
    def capped_text(self) -> str | None:
        """The text a soft cap measures for this line, if any."""
        return None if self.capped_field is None else getattr(self, self.capped_field)


class RoleLine(LineBase):
    """``["r", role]``: who is speaking (Manager, Worker or Critic)."""

    tag: Literal["r"] = "r"
    role: Role
    payload_fields: ClassVar[tuple[str, ...]] = ("role",)


class GoalLine(LineBase):
    """``["g", text]``: the subgoal the message works towards."""

    tag: Literal["g"] = "g"
    text: str
    payload_fields: ClassVar[tuple[str, ...]] = ("text",)
    capped_field: ClassVar[str | None] = "text"


class FactLine(LineBase):
    """``["f", text]`` or ``["f", text, "M#id"]``: a fact, optionally with its source."""

    tag: Literal["f"] = "f"
    text: str
    ref: Ref | None = None
    payload_fields: ClassVar[tuple[str, ...]] = ("text", "ref")
    optional_tail: ClassVar[int] = 1
    capped_field: ClassVar[str | None] = "text"


class AssumptionLine(LineBase):
    """``["u", text]``: something assumed rather than known."""

    tag: Literal["u"] = "u"
    text: str
    payload_fields: ClassVar[tuple[str, ...]] = ("text",)
    capped_field: ClassVar[str | None] = "text"


class PlanLine(LineBase):
    """``["p", text]``: one plan step."""

    tag: Literal["p"] = "p"
    text: str
    payload_fields: ClassVar[tuple[str, ...]] = ("text",)
    capped_field: ClassVar[str | None] = "text"


class QuestionLine(LineBase):
    """``["q", role, text]``: a question addressed to one role."""

    tag: Literal["q"] = "q"
    to: Role
    text: str
    payload_fields: ClassVar[tuple[str, ...]] = ("to", "text")
    capped_field: ClassVar[str | None] = "text"


class DeltaLine(LineBase):
    """``["d", "M#id"]``: refers to earlier content by its memory id."""

    tag: Literal["d"] = "d"
    ref: Ref
    payload_fields: ClassVar[tuple[str, ...]] = ("ref",)


class VerdictLine(LineBase):
    """``["v", A|R|E]``: accept, revise or escalate."""

    tag: Literal["v"] = "v"
    verdict: Verdict
    payload_fields: ClassVar[tuple[str, ...]] = ("verdict",)


class OverflowLine(LineBase):
    """``["o", summary, "M#id", method]``: a capped payload, full text in memory."""

    tag: Literal["o"] = "o"
    summary: str
    ref: Ref
    method: str
    payload_fields: ClassVar[tuple[str, ...]] = ("summary", "ref", "method")


class TextLine(LineBase):
    """``["t", text]``: free text (also where lenient parsing puts salvaged prose)."""

    tag: Literal["t"] = "t"
    text: str
    payload_fields: ClassVar[tuple[str, ...]] = ("text",)
    capped_field: ClassVar[str | None] = "text"


class ContextLine(LineBase):
    """``["x", key, value]``: a named piece of context (units, constraints, ...)."""

    tag: Literal["x"] = "x"
    key: str
    value: str
    payload_fields: ClassVar[tuple[str, ...]] = ("key", "value")
    capped_field: ClassVar[str | None] = "value"


Line = Annotated[
    RoleLine
    | GoalLine
    | FactLine
    | AssumptionLine
    | PlanLine
    | QuestionLine
    | DeltaLine
    | VerdictLine
    | OverflowLine
    | TextLine
    | ContextLine,
    Field(discriminator="tag"),
]
"""Any line model; validates dicts like ``{"tag": "f", "text": ...}`` via :data:`line_adapter`."""

LINE_TYPES: dict[str, type[LineBase]] = {
    cls.model_fields["tag"].default: cls
    for cls in (
        RoleLine,
        GoalLine,
        FactLine,
        AssumptionLine,
        PlanLine,
        QuestionLine,
        DeltaLine,
        VerdictLine,
        OverflowLine,
        TextLine,
        ContextLine,
    )
}
assert tuple(LINE_TYPES) == TAGS

#: Validates the dict form of a line (``model_dump()`` output) back into a model.
line_adapter: TypeAdapter[Any] = TypeAdapter(Line)


def _describe_validation(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "payload"
    return f"{loc}: {first.get('msg', 'invalid')}"


def line_from_array(arr: Any, *, line_no: int | None = None) -> LineBase:
    """Build a line from its canonical array, strictly.

    Raises :class:`LineShapeError`, :class:`UnknownTagError` or :class:`PayloadError`.
    """
    if not isinstance(arr, list) or not arr:
        raise LineShapeError(
            "a line must be a non-empty JSON array [tag, payload...]",
            line_no=line_no,
            snippet=repr(arr),
            fix='write e.g. ["f","Paris is in France"]',
        )
    tag = arr[0]
    if not isinstance(tag, str):
        raise LineShapeError(
            "the first item of a line must be the tag string",
            line_no=line_no,
            snippet=repr(tag),
        )
    cls = LINE_TYPES.get(tag)
    if cls is None:
        raise UnknownTagError(
            f"unknown tag; expected one of {' '.join(TAGS)}",
            line_no=line_no,
            snippet=tag,
        )
    n_items = len(arr) - 1
    most = len(cls.payload_fields)
    least = most - cls.optional_tail
    if not least <= n_items <= most:
        want = str(most) if least == most else f"{least} or {most}"
        raise PayloadError(
            f"tag {tag!r} takes {want} payload items, got {n_items}",
            line_no=line_no,
            snippet=repr(arr),
            fix=f"write [{tag!r}, {', '.join(cls.payload_fields)}]",
        )
    if any(item is None for item in arr[1:]):
        raise PayloadError(
            f"null payload item for tag {tag!r}; leave an absent optional item off instead",
            line_no=line_no,
            snippet=repr(arr),
        )
    try:
        return cls(**dict(zip(cls.payload_fields, arr[1:], strict=False)))
    except ValidationError as exc:
        raise PayloadError(
            f"bad payload for tag {tag!r}: {_describe_validation(exc)}",
            line_no=line_no,
            snippet=repr(arr),
        ) from None
