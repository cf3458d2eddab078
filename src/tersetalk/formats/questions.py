"""Questions over a payload with gold answers by construction, for the comprehension study.

Each question is read off the data itself, so its gold answer is exact and needs no
annotator. The kinds follow the failures the design's encoder postmortem found:

- ``kth_field``: a scalar field of the k-th item of the main array;
- ``count``: how many items the main array has;
- ``find_item``: the item whose field ``a`` has a value unique in that column -> its field ``b``;
- ``wrapper_field``: a scalar field of the object that wraps the main array (a table-only
  encoder drops it);
- ``nested_in_item``: a field nested inside an array item (``items[k].user.login``; a
  primitive-columns-only table drops it);
- ``top_field``: a scalar field of an object payload, possibly nested (``owner.login``).

Choices are seeded per payload (``random.Random(f"{seed}:{payload.id}")``). Fields whose
value is empty, longer than 80 characters, or shared by many leaves (an ambiguous
answer, such as a URL prefix repeated everywhere) are not asked about.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

KINDS = ("kth_field", "count", "find_item", "wrapper_field", "nested_in_item", "top_field")
MAX_GOLD_CHARS = 80


@dataclass(frozen=True)
class Question:
    payload_id: str
    qid: str
    kind: str
    text: str
    gold: str
    path: tuple[str | int, ...]


def render_gold(value: Any) -> str:
    """A JSON scalar as the answer text: strings as is, numbers as JSON, true/false, null."""
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _leaf_counts(value: Any, out: Counter) -> Counter:
    if isinstance(value, dict):
        for v in value.values():
            _leaf_counts(v, out)
    elif isinstance(value, list):
        for v in value:
            _leaf_counts(v, out)
    else:
        out[render_gold(value)] += 1
    return out


def _askable(value: Any, counts: Counter) -> bool:
    if isinstance(value, dict | list) or value is None:
        return False
    text = render_gold(value)
    return 0 < len(text) <= MAX_GOLD_CHARS and counts[text] <= 2 and "\n" not in text


def _main_array(body: Any) -> tuple[tuple[str | int, ...], list] | None:
    """The payload's main array of objects: the root, or the largest one under the root."""
    if isinstance(body, list) and body and all(isinstance(x, dict) for x in body):
        return (), body
    if isinstance(body, dict):
        best = None
        for k, v in body.items():
            if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                if best is None or len(v) > len(best[1]):
                    best = ((k,), v)
        return best
    return None


def _describe(path: tuple[str | int, ...]) -> str:
    """A path in words: "login" inside "user" of item 3 (counting from 1) of the array "items"."""
    parts: list[str] = []
    for i, p in enumerate(path):
        if isinstance(p, int):
            parts.append(f"item {p + 1} (counting from 1) of {_array_name(path[:i])}")
        else:
            parts.append(f'"{p}"')
    return " inside ".join(reversed(parts))


def _array_name(path: tuple[str | int, ...]) -> str:
    return (
        f'the array "{path[-1]}"' if path and isinstance(path[-1], str) else "the top-level array"
    )


def _scalars(value: Any, path: tuple[str | int, ...] = ()):
    """(path, scalar) of every leaf of objects (not descending into arrays)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, dict):
                yield from _scalars(v, (*path, k))
            elif not isinstance(v, list):
                yield (*path, k), v


def _get(body: Any, path: tuple[str | int, ...]) -> Any:
    for p in path:
        body = body[p]
    return body


def questions_for(payload, seed: int = 0, per_kind: int = 1) -> list[Question]:
    """Questions about a JSON payload (Markdown payloads get none here), deterministic."""
    if payload.kind != "json":
        return []
    body = payload.value
    rng = random.Random(f"{seed}:{payload.id}")
    counts = _leaf_counts(body, Counter())
    found: dict[str, list[tuple[str, str, tuple]]] = {k: [] for k in KINDS}
    main = _main_array(body)
    if main is not None:
        apath, arr = main
        name = _array_name(apath) if apath else "the top-level array"
        found["count"].append((f"How many items does {name} have?", str(len(arr)), apath))
        flat = [
            (i, k) for i, item in enumerate(arr) for k, v in item.items() if _askable(v, counts)
        ]
        rng.shuffle(flat)
        for i, k in flat[:per_kind]:
            path = (*apath, i, k)
            found["kth_field"].append(
                (f"What is the value of {_describe(path)}?", render_gold(arr[i][k]), path)
            )
        nested = [
            (i, p)
            for i, item in enumerate(arr)
            for p, v in _scalars(item)
            if len(p) > 1 and _askable(v, counts)
        ]
        rng.shuffle(nested)
        for i, p in nested[:per_kind]:
            path = (*apath, i, *p)
            found["nested_in_item"].append(
                (f"What is the value of {_describe(path)}?", render_gold(_get(body, path)), path)
            )
        columns = sorted({k for item in arr for k in item})
        pairs = []
        for a in columns:
            col = [render_gold(item.get(a)) for item in arr if _askable(item.get(a), counts)]
            unique = {v for v, n in Counter(col).items() if n == 1}
            for i, item in enumerate(arr):
                if a in item and _askable(item[a], counts) and render_gold(item[a]) in unique:
                    for b, v in item.items():
                        if b != a and _askable(v, counts):
                            pairs.append((i, a, b))
        rng.shuffle(pairs)
        for i, a, b in pairs[:per_kind]:
            q = (
                f'In {name}, which item has "{a}" equal to {json.dumps(arr[i][a])}? '
                f'Give the value of its "{b}".'
            )
            found["find_item"].append((q, render_gold(arr[i][b]), (*apath, i, b)))
        if apath:
            wrapper = [(p, v) for p, v in _scalars(body) if _askable(v, counts)]
            rng.shuffle(wrapper)
            for p, v in wrapper[:per_kind]:
                found["wrapper_field"].append(
                    (f"Outside {name}, what is the value of {_describe(p)}?", render_gold(v), p)
                )
    elif isinstance(body, dict):
        top = [(p, v) for p, v in _scalars(body) if _askable(v, counts)]
        rng.shuffle(top)
        for p, v in top[:per_kind]:
            found["top_field"].append((f"What is the value of {_describe(p)}?", render_gold(v), p))
    out = []
    for kind in KINDS:
        for n, (text, gold, path) in enumerate(found[kind][:per_kind]):
            out.append(Question(payload.id, f"{payload.id}:{kind}:{n}", kind, text, gold, path))
    return out


def question_set(payloads, seed: int = 0, per_kind: int = 1) -> list[Question]:
    return [q for p in payloads for q in questions_for(p, seed, per_kind)]


_WRAP = re.compile(r"^[\s\"'`*]+|[\s\"'`*.]+$")


def _norm(text: str) -> str:
    return _WRAP.sub("", text.strip()).lower()


#: "has 3 items" / "contains 3 elements" / "have 1 entry": the count a sentence states
_COUNT_SENTENCE = re.compile(
    r"\b(?:has|have|contains|holds)\s+(\d+)\s+(?:items?|elements?|entries|entry|objects?|rows?)\b"
)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def answer_matches(prediction: str, gold: str) -> bool:
    """Whether the model's answer is the gold value.

    The prediction's first line, stripped of quotes, backticks, asterisks and a final
    period, must equal the gold (case-insensitive; numbers compared as numbers, so 7
    and 7.0 match; "null"/"none" match null; "yes"/"no" match true/false). A sentence
    counts only if the gold is its last token span ("The id is 42." -> "42"), or, for a
    number, the count it states ("The top-level array has 3 items."): rules strict enough
    that a neighbouring row's value never matches.
    """
    lines = [x for x in prediction.strip().splitlines() if x.strip()]
    if not lines:
        return False
    cand = _norm(lines[0])
    g = _norm(gold)
    synonyms = {"true": {"true", "yes"}, "false": {"false", "no"}, "null": {"null", "none"}}
    if g in synonyms:
        options = synonyms[g]
        return cand in options or cand.rsplit(" ", 1)[-1] in options
    if cand == g:
        return True
    gn, cn = _number(g), _number(cand)
    if gn is not None and cn is not None:
        return gn == cn
    # "The value of "id" of item 1 is 31898046." -> the span after the last " is "
    tail = re.split(r"\b(?:is|are|=|:)\s+", cand)[-1] if " " in cand else cand
    tail = _norm(tail)
    if tail == g:
        return True
    tn = _number(tail)
    if gn is not None and tn is not None and gn == tn:
        return True
    # a count said as a sentence: "The top-level array has 3 items." -> 3
    said = _COUNT_SENTENCE.search(cand)
    return gn is not None and said is not None and _number(said.group(1)) == gn


def prompt_for(question: Question, encoded_payload: str) -> str:
    """The user prompt: the payload in some encoding, then the question."""
    return (
        f"Tool response:\n{encoded_payload}\n\n"
        f"Question: {question.text}\nAnswer with the value only."
    )
