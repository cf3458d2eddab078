"""The protocol's counted names: its tags and the lenient parser's repair kinds.

Tables only, read by the protocol (:mod:`tersetalk.protocol.tags`,
:mod:`tersetalk.protocol.repair`, which import them from here) and by the data
dictionary (:mod:`tersetalk.core.columns`, which names a column per tag and per repair
kind), so that the dictionary stands on the core alone and each table has one definition.
"""

from __future__ import annotations

#: Every tag in canonical order (the order used for counters and docs).
TAGS: tuple[str, ...] = ("r", "g", "f", "u", "p", "q", "d", "v", "o", "t", "x")
#: What each tag means, used by docs, errors and prose rendering.
TAG_NAMES: dict[str, str] = {
    "r": "role",
    "g": "subgoal",
    "f": "fact",
    "u": "assumption",
    "p": "plan step",
    "q": "question",
    "d": "delta reference",
    "v": "verdict",
    "o": "overflow",
    "t": "free text",
    "x": "context",
}

#: Tags whose main text can be soft-capped. r/d/v carry single codes and o lines
#: are already the product of capping, so capping them would be meaningless.
CAPPABLE_TAGS: tuple[str, ...] = ("g", "f", "u", "p", "q", "t", "x")

#: Every repair kind, in a fixed order (counters use these names).
REPAIR_KINDS: tuple[str, ...] = (
    "bom",  # a UTF-8 byte-order mark before the first line was dropped
    "invalid_utf8",  # undecodable bytes in a line were replaced by U+FFFD
    "code_fence",  # a ``` / ~~~ fence line was dropped
    "prose",  # a non-JSON line (or prose around JSON) was kept as a t line
    "key_value",  # a "Goal: ..." style prose line was read as a typed line
    "normalized",  # a JSON value was not canonical (object, long tag, role word, ...)
    "json_array",  # one JSON array (or {"lines": [...]}) holding several lines was split
    "container",  # one object holding several lines ({"role": .., "facts": [..]}) was split
    "multiline_json",  # a JSON value spread over several physical lines was joined
    "concatenated_json",  # several JSON values on one physical line were split
    "embedded_json",  # JSON found inside a prose line was extracted
    "trailing_comma",  # a comma after a line's JSON value was dropped
    "python_literal",  # a Python literal (single quotes, None/True) was read as JSON
    "control_chars",  # raw control characters inside JSON strings were escaped
    "truncated_line",  # a truncated JSON value was closed (strings, brackets)
    "split_extra",  # extra payload items after a complete line became a t line
    "invalid_line",  # JSON that fits no line shape was kept verbatim as a t line
)
