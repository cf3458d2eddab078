"""Lenient parsing: salvage what is valid in a mixed-format message, count each repair.

Small models wrap JSONL in code fences, mix prose in, emit one JSON array of lines,
pretty-print objects over several lines, or stop mid-line. The parser here is a
line-driven state machine (:class:`LenientMachine`) so that the whole-message
parser and the streaming reader run the very same code and give the same lines for
any chunking. Everything that cannot be typed is kept verbatim as a ``t`` line, so
no content is dropped; every repair is counted by kind in :class:`ParseResult`.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import tersetalk.protocol.fast as _fast  # not "from . import": that names the package
from tersetalk.core.tags import REPAIR_KINDS

from .codec import MAX_DEPTH, exceeds_depth, physical_lines
from .errors import NormalizationError, ProtocolError
from .lines import LINE_TYPES, LineBase, QuestionLine, TextLine, replace_surrogates
from .normalize import normalize_obj
from .tags import PLURAL_ALIASES, role_for, tag_for, verdict_for

# Possessive quantifiers: the classes are disjoint, and backtracking over a long run
# of blanks would take quadratic time.
_FENCE_RE = re.compile(r"^(?:```++|~~~++)\s*+[\w.+#-]*+\s*+$")
_OPENERS_RE = re.compile(r"[\[{]")
_CONTROL_RE = re.compile(r"[\x00-\x1f]")
_WORD_RE = re.compile(r"\w")
_PARTIAL_U_ESCAPE_RE = re.compile(r"\\u[0-9a-fA-F]{0,3}$")
_KEY_VALUE_RE = re.compile(r"^([A-Za-z][A-Za-z _-]{0,30}?)(?:\s+\d{1,3})?\s*:\s*(\S.*)$", re.S)
_QUESTION_FOR_RE = re.compile(r"^question\s+(?:for|to)\s+(?:the\s+)?([a-z]+)$")

# The one JSON string scanner: a string runs from its quote to the next quote that no
# backslash escapes, or to the end of the text (unterminated; ``close`` then holds a
# trailing lone backslash, the start of an escape cut off, or nothing). Outside strings
# a quote always opens one, so the strings of a text are its successive matches.
# Possessive quantifiers: linear time on any input.
_ESCAPE = r"(\\.)"  # a backslash and the character it escapes, whatever it is
_STRING = rf'"(?:[^"\\]++|{_ESCAPE})*+(?P<close>"|\\?)'
_JSON_STRING_RE = re.compile(_STRING, re.S)
#: one bracket outside strings, or a run of strings and other text between brackets
#: (``close`` is then its last string's: only the text's last string can be open)
_JSON_TOKEN_RE = re.compile(rf'[\[\]{{}}]|(?:{_STRING}|[^\[\]{{}}"]++)++', re.S)
_ESCAPE_RE = re.compile(_ESCAPE, re.S)
_CONTROL_ESCAPES = {i: f"\\u{i:04x}" for i in range(0x20)}

_OK, _INCOMPLETE, _INVALID = "ok", "incomplete", "invalid"
_NONE: Any = object()
_MAX_LITERAL_CHARS = 20_000
_MAX_EMBED_ATTEMPTS = 64
_KV_TEXT_TAGS = {
    "goal": "g",
    "subgoal": "g",
    "g": "g",
    "fact": "f",
    "f": "f",
    "assumption": "u",
    "u": "u",
    "plan": "p",
    "plan step": "p",
    "step": "p",
    "p": "p",
}
_KV_ROLE_KEYS = {"role", "r", "speaker"}
_KV_VERDICT_KEYS = {"verdict", "v", "decision"}
_MESSAGE_TEXT_KEYS = {"content", "text", "message", "body"}
_CONTAINER_KEYS = {"lines", "messages", "jsonl", "items"}


@dataclass
class ParseResult:
    """Lines salvaged from a message, with every repair counted.

    ``repairs`` maps a kind from :data:`REPAIR_KINDS` to how often it was applied
    (kinds never applied are absent); ``errors`` holds the problems that forced
    JSON to be kept as a ``t`` line, each with its line number; ``canonical_lines``
    counts lines that arrived exactly in canonical form.
    """

    lines: list[LineBase] = field(default_factory=list)
    repairs: dict[str, int] = field(default_factory=dict)
    errors: list[ProtocolError] = field(default_factory=list)
    canonical_lines: int = 0

    @property
    def repairs_total(self) -> int:
        return sum(self.repairs.values())

    @property
    def compliance(self) -> float:
        """Share of lines that needed no repair at all (1.0 for an empty message)."""
        return self.canonical_lines / len(self.lines) if self.lines else 1.0

    @property
    def clean(self) -> bool:
        """True when the message was canonical TerseTalk-JSONL throughout."""
        return not self.repairs and not self.errors

    def counters(self, prefix: str = "parse_") -> dict[str, float | int]:
        """Flat counters with stable keys (every repair kind present, zero if unused)."""
        out: dict[str, float | int] = {
            f"{prefix}lines": len(self.lines),
            f"{prefix}canonical_lines": self.canonical_lines,
            f"{prefix}errors": len(self.errors),
            f"{prefix}repairs_total": self.repairs_total,
            f"{prefix}compliance": self.compliance,
        }
        for kind in REPAIR_KINDS:
            out[f"{prefix}repair_{kind}"] = self.repairs.get(kind, 0)
        return out


def _json_status(text: str) -> tuple[str, Any]:
    """Parse ``text`` as one JSON value; say whether a failure could be a mere prefix.

    A value nested deeper than :data:`~tersetalk.protocol.codec.MAX_DEPTH` is invalid
    before the decoder runs, so the answer never depends on the caller's stack depth.
    """
    if text.lstrip(" \t\n\r")[:1] in ("[", "{") and exceeds_depth(text):
        return _INVALID, None
    try:
        return _OK, json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip()):
            return _INCOMPLETE, None
        return _INVALID, None
    except (ValueError, RecursionError):
        return _INVALID, None


def _complete(text: str) -> Any:
    """Close an unterminated string and open brackets; the value, or ``_NONE``."""
    stack: list[str] = []
    in_str = escaped = False
    for token in _JSON_TOKEN_RE.finditer(text):
        ch = token.group()
        if ch in ("[", "{"):
            stack.append("]" if ch == "[" else "}")
            if len(stack) > MAX_DEPTH:
                return _NONE  # too deep to close (its parse would be refused anyway)
        elif ch in ("]", "}"):
            if not stack or stack.pop() != ch:
                return _NONE
        else:
            close = token.group("close")
            in_str, escaped = close not in (None, '"'), close == "\\"
    if not stack and not in_str:
        return _NONE
    out = text
    if in_str:
        if escaped:
            out = out[:-1]
        out = _PARTIAL_U_ESCAPE_RE.sub("", out) + '"'
    out = out.rstrip()
    if out.endswith(","):
        out = out[:-1]
    elif out.endswith(":"):
        out += "null"
    status, value = _json_status(out + "".join(reversed(stack)))
    if status != _OK or value == [] or value == {}:
        return _NONE  # an opener alone ("[") is prose, not a truncated line
    return value


def _escape_controls(text: str) -> str:
    """Escape raw control characters that sit inside JSON strings."""
    if not _CONTROL_RE.search(text):
        return text
    return _JSON_STRING_RE.sub(_escape_string_controls, text)


def _escape_string_controls(string: re.Match[str]) -> str:
    """One string's raw control characters as ``\\u00XX``; its escapes kept as they are
    (a control character after a backslash too: that is invalid JSON, left so)."""
    parts = _ESCAPE_RE.split(string.group())  # text, escape, text, ..., text
    parts[::2] = [part.translate(_CONTROL_ESCAPES) for part in parts[::2]]
    return "".join(parts)


def _from_python(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_from_python(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError("non-string key")
        return {k: _from_python(v) for k, v in value.items()}
    if value is None or isinstance(value, str | bool | int | float):
        return value
    raise ValueError("not a JSON-like literal")


def _python_literal(text: str) -> Any:
    """A list/dict written as a Python literal (single quotes, None, True), or ``_NONE``."""
    if len(text) > _MAX_LITERAL_CHARS or text[0] not in "[{(":
        return _NONE
    if exceeds_depth(text, python=True):
        return _NONE  # ast and _from_python recurse: refuse before the stack decides
    try:
        value = _from_python(ast.literal_eval(text))
    except Exception:  # literal_eval raises many types (SyntaxError, MemoryError, ...)
        return _NONE
    return value if isinstance(value, list | dict) else _NONE


def _compact(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return repr(value)


class _Acc:
    """Repair bookkeeping; trial expansions use their own and merge on success."""

    def __init__(self) -> None:
        self.repairs: Counter[str] = Counter()
        self.errors: list[ProtocolError] = []
        self.canonical = 0

    def merge(self, other: _Acc) -> None:
        self.repairs.update(other.repairs)
        self.errors.extend(other.errors)
        self.canonical += other.canonical


class LenientMachine:
    """Consumes physical lines one at a time and returns lines as soon as they are known.

    A line that opens a JSON value without closing it is held back (``pending``)
    until the value closes, turns out invalid, or the message ends; everything else
    is decided on the spot. ``finish()`` resolves what is still pending.
    """

    def __init__(self, *, default_addressee: str | None = None, max_pending_lines: int = 256):
        if default_addressee is not None and default_addressee not in ("M", "W", "C"):
            raise NormalizationError(
                "default_addressee must be M, W or C", snippet=repr(default_addressee)
            )
        self.default_addressee = default_addressee
        self.max_pending_lines = max(1, max_pending_lines)
        self.acc = _Acc()
        self.lines: list[LineBase] = []
        self._pending: list[tuple[int, str]] = []
        self._line_no = 0

    # -- input -------------------------------------------------------------------------
    def push_bytes(self, raw: bytes) -> list[LineBase]:
        """One physical line as bytes (without its ``\\n``)."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "replace")
            self.acc.repairs["invalid_utf8"] += 1
        return self.push(text)

    def push_block(self, raw: bytes) -> list[LineBase]:
        """Several physical lines as bytes, joined by ``\\n`` (without the last newline).

        The same as :meth:`push_bytes` for each line; lines that are all canonical
        (nothing pending) are read in one orjson call (:mod:`.fast`).
        """
        if not self._pending:
            lines = _fast.parse_block(raw, lenient=True)
            if lines is not None:
                self._line_no += len(lines)
                self.acc.canonical += len(lines)
                self.lines.extend(lines)
                return lines
        out: list[LineBase] = []
        for part in raw.split(b"\n"):
            out += self.push_bytes(part)
        return out

    def push(self, raw: str) -> list[LineBase]:
        """One physical line as text (without its ``\\n``)."""
        self._line_no += 1
        if raw.endswith("\r"):
            raw = raw[:-1]
        if self._line_no == 1 and raw.startswith("\ufeff"):
            raw = raw[1:]
            self.acc.repairs["bom"] += 1
        out = self._take([(self._line_no, raw)])
        self.lines.extend(out)
        return out

    def finish(self) -> list[LineBase]:
        """End of message: resolve any pending (possibly truncated) JSON."""
        out: list[LineBase] = []
        while self._pending:
            flushed, requeue = self._flush()
            out += flushed
            out += self._take(requeue)
        self.lines.extend(out)
        return out

    def result(self) -> ParseResult:
        repairs = {k: self.acc.repairs[k] for k in REPAIR_KINDS if self.acc.repairs[k]}
        return ParseResult(
            lines=list(self.lines),
            repairs=repairs,
            errors=list(self.acc.errors),
            canonical_lines=self.acc.canonical,
        )

    # -- line handling -----------------------------------------------------------------
    def _take(self, items: list[tuple[int, str]]) -> list[LineBase]:
        out: list[LineBase] = []
        queue = list(reversed(items))
        while queue:
            no, raw = queue.pop()
            if self._pending:
                cand = [*self._pending, (no, raw)]
                joined = "\n".join(r for _, r in cand)
                status, value = _json_status(joined)
                if status == _OK:
                    self._pending = []
                    self.acc.repairs["multiline_json"] += 1
                    out += self._expand(value, cand[0][0], joined, self.acc, top=False)
                    continue
                if status == _INCOMPLETE and len(cand) < self.max_pending_lines:
                    self._pending = cand
                    continue
                flushed, requeue = self._flush()
                out += flushed
                queue.append((no, raw))
                queue.extend(reversed(requeue))
                continue
            stripped = raw.strip()
            if not stripped:
                continue
            line = _fast.parse_line(stripped, lenient=True)
            if line is not None:  # canonical: what _expand(..., top=True) would give
                self.acc.canonical += 1
                out.append(line)
                continue
            if _FENCE_RE.match(stripped):
                self.acc.repairs["code_fence"] += 1
                continue
            status, value = _json_status(stripped)
            if status == _OK:
                out += self._expand(value, no, stripped, self.acc, top=True)
            elif status == _INCOMPLETE and stripped[0] in "[{":
                self._pending = [(no, raw)]
            else:
                out += self._salvage(no, stripped)
        return out

    def _flush(self) -> tuple[list[LineBase], list[tuple[int, str]]]:
        """Give up waiting: close the pending value, or salvage its first line alone."""
        cand, self._pending = self._pending, []
        joined = "\n".join(r for _, r in cand)
        value = _complete(joined)
        if value is not _NONE:
            self.acc.repairs["truncated_line"] += 1
            if len(cand) > 1:
                self.acc.repairs["multiline_json"] += 1
            return self._expand(value, cand[0][0], joined, self.acc, top=False), []
        no, raw = cand[0]
        return self._salvage(no, raw.strip()), cand[1:]

    def _salvage(self, no: int, s: str) -> list[LineBase]:
        """A non-blank line that is not one JSON value: try each repair in a fixed order."""
        acc = self.acc
        if s.endswith(","):
            status, value = _json_status(s[:-1].rstrip())
            if status == _OK and isinstance(value, list | dict):
                acc.repairs["trailing_comma"] += 1
                return self._expand(value, no, s, acc, top=False)
        escaped = _escape_controls(s)
        if escaped != s:
            status, value = _json_status(escaped)
            if status == _OK:
                acc.repairs["control_chars"] += 1
                return self._expand(value, no, s, acc, top=False)
        value = _python_literal(s)
        if value is not _NONE:
            acc.repairs["python_literal"] += 1
            return self._expand(value, no, s, acc, top=False)
        if s[0] in "[{":
            value = _complete(s)
            if value is not _NONE:
                acc.repairs["truncated_line"] += 1
                return self._expand(value, no, s, acc, top=False)
        embedded = self._embedded(no, s)
        if embedded is not None:
            return embedded
        line = self._key_value(s)
        if line is not None:
            acc.repairs["key_value"] += 1
            return [line]
        if s[0] in "[{" and exceeds_depth(s):
            problem = f"JSON nested deeper than {MAX_DEPTH} levels was not parsed"
            return self._invalid(no, s, NormalizationError(problem), acc)
        acc.repairs["prose"] += 1
        return [TextLine(text=replace_surrogates(s))]

    def _embedded(self, no: int, s: str) -> list[LineBase] | None:
        """JSON lines inside prose, or several JSON values on one line."""
        decoder = json.JSONDecoder()
        segments: list[tuple[int, int, list[LineBase], _Acc]] = []
        pos = 0
        for _ in range(_MAX_EMBED_ATTEMPTS):
            match = _OPENERS_RE.search(s, pos)
            if match is None:
                break
            start = match.start()
            try:
                value, end = decoder.raw_decode(s, start)
            except (ValueError, RecursionError):
                pos = start + 1
                continue
            if exceeds_depth(s, start, end):
                # Whether the decoder got this far depended on the stack depth; treat
                # it exactly like the RecursionError it may have raised instead.
                pos = start + 1
                continue
            trial = _Acc()
            lines = self._expand(value, no, s[start:end], trial, top=False)
            if lines and not trial.errors and not trial.repairs["prose"]:
                segments.append((start, end, lines, trial))
            pos = end
        if not segments or (len(segments) == 1 and (segments[0][0], segments[0][1]) == (0, len(s))):
            return None
        out: list[LineBase] = []
        prose_parts = 0
        prev = 0
        for start, end, lines, trial in segments:
            prose_parts += self._prose_gap(s[prev:start], out)
            out += lines
            self.acc.merge(trial)
            prev = end
        prose_parts += self._prose_gap(s[prev:], out)
        if prose_parts:
            self.acc.repairs["embedded_json"] += 1
        if len(segments) > 1:
            self.acc.repairs["concatenated_json"] += 1
        return out

    def _prose_gap(self, gap: str, out: list[LineBase]) -> int:
        gap = gap.strip()
        if not _WORD_RE.search(gap):
            return 0  # separators like "," or "->" between JSON values carry nothing
        self.acc.repairs["prose"] += 1
        out.append(TextLine(text=replace_surrogates(gap)))
        return 1

    def _key_value(self, s: str) -> LineBase | None:
        """``Goal: ...``, ``Fact: ...``, ``Role: Manager``, ``Question for the Worker: ...``."""
        if ":" not in s:
            return None  # cheap exit: the pattern needs a colon (and is slow on long blanks)
        match = _KEY_VALUE_RE.match(s)
        if match is None:
            return None
        key = " ".join(match.group(1).lower().replace("_", " ").split())
        value = replace_surrogates(match.group(2).strip())
        if key in _KV_TEXT_TAGS:
            return LINE_TYPES[_KV_TEXT_TAGS[key]](text=value)
        if key in _KV_ROLE_KEYS and (role := role_for(value.rstrip("."))):
            return LINE_TYPES["r"](role=role)
        if key in _KV_VERDICT_KEYS and (verdict := verdict_for(value)):
            return LINE_TYPES["v"](verdict=verdict)
        q = _QUESTION_FOR_RE.match(key)
        if q and (role := role_for(q.group(1))):
            return QuestionLine(to=role, text=value)
        if key in ("question", "q") and self.default_addressee:
            return QuestionLine(to=self.default_addressee, text=value)
        return None

    # -- from a JSON value to lines ----------------------------------------------------
    def _expand(self, value: Any, no: int, raw: str, acc: _Acc, *, top: bool) -> list[LineBase]:
        """Lines for one parsed JSON value; ``top`` marks a value that was a whole line."""
        if isinstance(value, list) and value and isinstance(value[0], str):
            return self._one(value, no, raw, acc, canonical_ok=top)
        if isinstance(value, list) and value and isinstance(value[0], list | dict):
            acc.repairs["json_array"] += 1
            return self._elements(value, no, acc)
        if isinstance(value, dict):
            if len(value) == 1:
                ((key, inner),) = value.items()
                if isinstance(key, str) and key.strip().lower() in _CONTAINER_KEYS:
                    if isinstance(inner, list):
                        acc.repairs["json_array"] += 1
                        return self._elements(inner, no, acc)
            try:
                line = normalize_obj(value, default_addressee=self.default_addressee)
            except NormalizationError as exc:
                lines = self._message_object(value, no, acc)
                if lines is not None:
                    acc.repairs["container"] += 1
                    return lines
                return self._invalid(no, raw, exc, acc)
            acc.repairs["normalized"] += 1
            return [line]
        if isinstance(value, str):
            acc.repairs["normalized"] += 1
            return [TextLine(text=replace_surrogates(value))]
        if isinstance(value, list):
            return self._invalid(
                no, raw, NormalizationError("an array must start with a tag or hold lines"), acc
            )
        acc.repairs["prose"] += 1  # a bare number, true/false/null: keep the text as written
        return [TextLine(text=replace_surrogates(raw))]

    def _elements(self, items: list[Any], no: int, acc: _Acc) -> list[LineBase]:
        out: list[LineBase] = []
        for item in items:
            if isinstance(item, str):
                out.append(TextLine(text=replace_surrogates(item)))
            elif isinstance(item, list | dict) and item:
                if isinstance(item, list) and not isinstance(item[0], str):
                    out += self._invalid(no, _compact(item), NormalizationError("not a line"), acc)
                    continue
                out += self._expand(item, no, _compact(item), acc, top=False)
            else:
                out += self._invalid(no, _compact(item), NormalizationError("not a line"), acc)
        return out

    def _one(
        self, value: list[Any], no: int, raw: str, acc: _Acc, *, canonical_ok: bool
    ) -> list[LineBase]:
        try:
            line = normalize_obj(value, default_addressee=self.default_addressee)
        except NormalizationError as exc:
            tag = tag_for(value[0])
            if tag is not None:
                arity = len(LINE_TYPES[tag].payload_fields)
                if len(value) - 1 > arity:
                    try:
                        head = normalize_obj(
                            value[: 1 + arity], default_addressee=self.default_addressee
                        )
                    except NormalizationError:
                        pass
                    else:
                        rest = " ".join(
                            v if isinstance(v, str) else _compact(v) for v in value[1 + arity :]
                        )
                        acc.repairs["split_extra"] += 1
                        return [head, TextLine(text=replace_surrogates(rest))]
            return self._invalid(no, raw, exc, acc)
        if value != line.to_array():
            acc.repairs["normalized"] += 1
        elif canonical_ok:
            acc.canonical += 1
        return [line]

    def _message_object(self, obj: dict[Any, Any], no: int, acc: _Acc) -> list[LineBase] | None:
        """``{"role": "manager", "goal": "...", "facts": [...]}``: one line per key."""
        keys = []
        for key in obj:
            low = " ".join(key.strip().lower().split()) if isinstance(key, str) else None
            if low is None or not (tag_for(low) or low in _MESSAGE_TEXT_KEYS):
                return None
            keys.append(low)
        out: list[LineBase] = []
        for low, (key, value) in zip(keys, obj.items(), strict=True):
            tag = tag_for(low) or "t"
            many = isinstance(value, list) and low in PLURAL_ALIASES
            for item in value if many else [value]:
                try:
                    out.append(normalize_obj({tag: item}, default_addressee=self.default_addressee))
                except NormalizationError as exc:
                    out += self._invalid(no, _compact({key: item}), exc, acc)
        return out

    def _invalid(self, no: int, raw: str, exc: NormalizationError, acc: _Acc) -> list[LineBase]:
        acc.repairs["invalid_line"] += 1
        acc.errors.append(NormalizationError(exc.problem, line_no=no, snippet=raw))
        return [TextLine(text=replace_surrogates(raw))]


def parse_lenient(text: str | bytes, *, default_addressee: str | None = None) -> ParseResult:
    """Parse a possibly messy message; never raises for any ``str`` or ``bytes`` input.

    Bytes are split on ``\\n`` before decoding, so a bad byte only affects its own
    line (exactly as in :class:`~tersetalk.protocol.stream.StreamReader`).
    """
    if default_addressee is None or default_addressee in ("M", "W", "C"):
        lines = _fast.parse_message(text, lenient=True)
        if lines is not None:  # canonical throughout: nothing to repair
            return ParseResult(lines=lines, canonical_lines=len(lines))
    machine = LenientMachine(default_addressee=default_addressee)
    for _, raw in physical_lines(text):
        if isinstance(raw, bytes):
            machine.push_bytes(raw)
        else:
            machine.push(raw)
    machine.finish()
    return machine.result()


def parse_lenient_lines(
    raw_lines: Iterable[str], *, default_addressee: str | None = None
) -> ParseResult:
    """Lenient parse of already split physical lines (no ``\\n`` inside)."""
    machine = LenientMachine(default_addressee=default_addressee)
    for raw in raw_lines:
        machine.push(raw)
    machine.finish()
    return machine.result()
