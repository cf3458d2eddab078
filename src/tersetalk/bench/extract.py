"""Field extractors for MB-1: every one maps a message to the same :data:`Key` tuple.

JSONL side:

* ``jsonl_pydantic`` -- the package's strict parser (:func:`parse_strict`), which
  validates every line into a Pydantic model; what the workflow itself runs.
* ``jsonl_strict_arrays`` -- the same validation (:func:`validate_strict`: same
  lines accepted, same errors) returning the canonical arrays instead of models.
* ``jsonl_json`` / ``jsonl_orjson`` -- one ``loads`` per line and a dispatch on
  the tag: what a consumer that trusts canonical lines would write.
* ``jsonl_orjson_whole`` -- the whole message as one JSON array (lines joined
  with commas): a single C call, valid because canonical lines never hold a raw
  newline and a canonical message has no blank line. Nothing is checked: this is
  the limit (:data:`LIMIT`) a validating parser is measured against.
* ``jsonl_models_floor`` -- the limit's one call, then line models assembled with
  no check at all (:func:`~tersetalk.protocol.fast.assemble_trusted`): the floor
  (:data:`FLOOR`) of any parser that returns models, which ``jsonl_pydantic``
  cannot beat.

Free-form side (the baselines), each the best regex parser we could write:

* ``regex_freeform`` -- the line layout of the ``freeform`` system (``Goal:``,
  ``- fact``, ``1. step``, ``Question:``...), one multiline regex, one pass;
* ``regex_prose`` -- one paragraph of sentences (``jsonl_to_prose``): labels are
  found only right after sentence-final punctuation, so abbreviations
  ("Dr.", "U.S."), decimals ("3.5") and quotes inside a text do not split it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import orjson

from tersetalk.protocol import parse_strict, validate_strict
from tersetalk.protocol.fast import assemble_trusted

from .fields import DEFAULT_ADDRESSEE, ROLE_LETTERS, VERDICT_LETTERS, Key, key_from_lines

Extractor = Callable[[str], Key]


def _key_from_arrays(arrays: Iterable[list]) -> Key:
    role = goal = verdict = None
    facts: list[str] = []
    plan: list[str] = []
    questions: list[tuple[str, str]] = []
    for arr in arrays:
        tag = arr[0]
        if tag == "f":
            facts.append(arr[1])
        elif tag == "p":
            plan.append(arr[1])
        elif tag == "q":
            questions.append((arr[1], arr[2]))
        elif tag == "g":
            goal = arr[1]
        elif tag == "r":
            role = arr[1]
        elif tag == "v":
            verdict = arr[1]
    return (role, goal, tuple(facts), tuple(plan), tuple(questions), verdict)


def extract_jsonl_pydantic(text: str) -> Key:
    """Strict parse into validated line models, then pick the fields."""
    return key_from_lines(parse_strict(text))


def extract_jsonl_strict_arrays(text: str) -> Key:
    """Strict validation without models (:func:`validate_strict`), then pick the fields."""
    return _key_from_arrays(validate_strict(text))


def extract_jsonl_json(text: str, _loads=json.loads) -> Key:
    """``json.loads`` per non-blank line (stdlib), dispatch on the tag."""
    return _key_from_arrays(map(_loads, filter(None, text.split("\n"))))


def extract_jsonl_orjson(text: str, _loads=orjson.loads) -> Key:
    """``orjson.loads`` per non-blank line, dispatch on the tag."""
    return _key_from_arrays(map(_loads, filter(None, text.split("\n"))))


def extract_jsonl_orjson_whole(text: str, _loads=orjson.loads) -> Key:
    """The canonical message as one JSON array: ``[line,line,...]`` in one call."""
    return _key_from_arrays(_loads("[" + text.replace("\n", ",") + "]"))


def extract_jsonl_models_floor(text: str, _loads=orjson.loads) -> Key:
    """The limit's one call, then models assembled without any check, then the fields."""
    return key_from_lines(assemble_trusted(_loads("[" + text.replace("\n", ",") + "]")))


_ROLE = "Manager|Worker|Critic"
_FREEFORM_RE = re.compile(
    r"^(?:- (?P<fact>.+)"
    r"|\d+\. (?P<step>.+)"
    r"|Goal: (?P<goal>.+)"
    rf"|Question(?: for the (?P<to>{_ROLE}))?: (?P<question>.+)"
    rf"|Role: (?P<role>{_ROLE})"
    r"|Verdict: (?P<verdict>accept|revise|escalate)"
    r")$",
    re.M,
)


def extract_regex_freeform(text: str) -> Key:
    """One pass of one multiline regex over the free-form line layout.

    ``Facts:`` and ``Plan:`` headers match no alternative and are skipped; each
    item's kind is known from its line prefix, so no section state is needed.
    """
    role = goal = verdict = None
    facts: list[str] = []
    plan: list[str] = []
    questions: list[tuple[str, str]] = []
    for m in _FREEFORM_RE.finditer(text):
        kind = m.lastgroup
        if kind == "fact":
            facts.append(m["fact"])
        elif kind == "step":
            plan.append(m["step"])
        elif kind == "question":
            to = m["to"]
            questions.append((ROLE_LETTERS[to] if to else DEFAULT_ADDRESSEE, m["question"]))
        elif kind == "goal":
            goal = m["goal"]
        elif kind == "role":
            role = ROLE_LETTERS[m["role"]]
        elif kind == "verdict":
            verdict = VERDICT_LETTERS[m["verdict"]]
    return (role, goal, tuple(facts), tuple(plan), tuple(questions), verdict)


#: A label starts the text or follows sentence-final punctuation and one space.
_PROSE_LABEL_RE = re.compile(
    r"(?:^|(?<=[.!?…:;] ))"
    rf"(?:(?P<fact>Fact)|(?P<step>Plan step) [0-9]+|Question for the (?P<to>{_ROLE})"
    r"|(?P<goal>Goal)|(?P<role>Role)|(?P<verdict>Verdict)): "
)


def extract_regex_prose(text: str) -> Key:
    """Find every label with one regex, and take the text up to the next label.

    The text keeps the period the renderer added (compare with
    :func:`~tersetalk.bench.fields.prose_key`).
    """
    role = goal = verdict = None
    facts: list[str] = []
    plan: list[str] = []
    questions: list[tuple[str, str]] = []
    matches = list(_PROSE_LABEL_RE.finditer(text))
    ends = [m.start() - 1 for m in matches[1:]]
    ends.append(len(text))
    for m, end in zip(matches, ends, strict=False):  # no label: no ends are used
        kind = m.lastgroup
        value = text[m.end() : end]
        if kind == "fact":
            facts.append(value)
        elif kind == "step":
            plan.append(value)
        elif kind == "to":
            questions.append((ROLE_LETTERS[m["to"]], value))
        elif kind == "goal":
            goal = value
        elif kind == "role":
            role = ROLE_LETTERS[value.rstrip(".")]
        elif kind == "verdict":
            verdict = VERDICT_LETTERS[value.rstrip(".")]
    return (role, goal, tuple(facts), tuple(plan), tuple(questions), verdict)


@dataclass(frozen=True)
class Method:
    """One MB-1 method: which representation it reads and how."""

    name: str
    representation: str  # corpus column: jsonl | freeform | prose
    extract: Extractor
    family: str  # jsonl | regex
    describe: str


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("regex_freeform", "freeform", extract_regex_freeform, "regex",
               "one multiline regex over the freeform system's line layout"),
        Method("regex_prose", "prose", extract_regex_prose, "regex",
               "label regex after sentence-final punctuation over jsonl_to_prose text"),
        Method("jsonl_pydantic", "jsonl", extract_jsonl_pydantic, "jsonl",
               "tersetalk.protocol.parse_strict (Pydantic line models)"),
        Method("jsonl_strict_arrays", "jsonl", extract_jsonl_strict_arrays, "jsonl",
               "tersetalk.protocol.validate_strict (strict checks, canonical arrays)"),
        Method("jsonl_json", "jsonl", extract_jsonl_json, "jsonl",
               "json.loads per line, dispatch on the tag"),
        Method("jsonl_orjson", "jsonl", extract_jsonl_orjson, "jsonl",
               "orjson.loads per line, dispatch on the tag"),
        Method("jsonl_orjson_whole", "jsonl", extract_jsonl_orjson_whole, "jsonl",
               "orjson.loads of the message as one array"),
        Method("jsonl_models_floor", "jsonl", extract_jsonl_models_floor, "jsonl",
               "orjson.loads of the message as one array, models assembled unchecked"),
    )
}  # fmt: skip

#: MB-1's baseline: the free-form message as the freeform system really sends it.
BASELINE = "regex_freeform"
#: The limit: raw orjson over the whole message, no validation at all.
LIMIT = "jsonl_orjson_whole"
#: The floor of a model-returning parser: the limit plus model assembly, nothing checked.
FLOOR = "jsonl_models_floor"
#: The regex over prose (jsonl_to_prose), the design's other free-text comparison.
PROSE = "regex_prose"
#: The protocol's validating parsers, held to a share of the limit.
VALIDATING = ("jsonl_pydantic", "jsonl_strict_arrays")
