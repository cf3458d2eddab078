"""What a Manager's brief asks for, read from its content whichever protocol carried it.

The router decides star or chain from the brief as it went on the wire. Both protocols
carry the same parts of a brief: the question, context passages (a BoolQ passage, a
Social IQa situation, a tool response), answer options, facts (evidence sentences, a word
problem's statements), program text and plan steps; a situation (Social IQa's) is a
context part of its own, for it tells what happened rather than what to look up.
:func:`typed_parts` finds them in TerseTalk-JSONL lines (``q``, ``x`` keyed ``passage``/
``situation``/an option label/``code``, ``f`` and the summaries of ``o`` pointers, ``p``),
:func:`prose_parts` in the
free-form rendering (its headings, bullets, fences and numbered steps, or, for prose
without headings, its sentences). :func:`content_signals` then counts the same things in
both, from the words, never from which part a sentence sat in:

- ``hops``: bridging structure in the question — a restrictive relative clause about a
  particular thing (*the woman who portrayed ...*; not *a fox that is made up* in a
  question that names nothing, nor *that* after *decided* or *is*), a participial link
  (*the film directed by ...*), a description through another entity (*the author of
  ...*, *the first woman to ...*), a comparison of two things (*both*, *either*, *X or
  Y* between names, a comparative with *than*, two dates), a chain of *of the* or
  possessives. Each is one more lookup the answer depends on (multi-hop). None when one
  sentence of the facts or context holds every content word of the question (two or
  more): the answer is then stated whole, one lookup. And one for each premise that
  builds on an earlier one (:func:`premises`): in what the brief tells happened (a
  situation, and the sentences a question opens with before it asks), a sentence that
  takes up something an earlier sentence told of (a shared word of four letters or more,
  names aside: *lent her only umbrella ... the colleague had gone home*): each is an
  inference step the answer depends on. The sentence that asks is no premise;
- ``quantities``: numbers a computation could use (digits, number words, *twice*,
  *half*, *dozen*, a clock time, a day of the week), years and ordinals left out, in
  every part; a program's doctest examples left out;
- ``arithmetic``: sentences that hold a quantity and an operation word (*each*, *per*,
  *total*, *more than*, *older than*, *left*, *percent*, a transfer such as *gave*, a
  part of a whole such as *of them* or *the rest*, a step along a clock or calendar such
  as *after* or *from now*, ...): each is a step of a multi-step computation. A
  passage's or a situation's sentences count only for a question that computes (holds
  an operation word): its dates and sizes alone are not steps;
- ``conditions``: constraints to verify (*if*, *unless*, *otherwise*, *must*, *at
  least*, *except*, *only*), in the question, facts, context and a program's
  description;
- ``code``: the kinds of work a program's description, or a request to write one, names
  beyond one expression (going over parts: *each*, *runs*, *digits*; repeating:
  *until*, *again*; ordering and counting: *sorted*, *distinct*; structure: *matching*,
  *nested*), at most three. A one-line job (a sum, a comparison, one format, one
  built-in) counts 0: it needs no second pass to verify;
- ``plans``: plan steps (``p`` lines, numbered lines).

By the TerseTalk design's intent, multi-hop, multi-step and verification-heavy work goes
down the chain and single-hop work to the star; each signal counts one of those kinds of
work. The counts are plain regular expressions over words, so a reader can check any
row's signals by hand, and the two protocols differ only in how the parts are found.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from tersetalk.protocol import parse_lenient
from tersetalk.tasks.base import split_sentences
from tersetalk.topology.rule import SIGNALS

__all__ = [
    "CONTENT_SIGNALS",
    "MAX_PROGRAM_WORK",
    "BriefParts",
    "content_signals",
    "premises",
    "has_code",
    "program_prose",
    "program_work",
    "prose_parts",
    "typed_parts",
]

#: the signals :func:`content_signals` counts, in the order records list them
CONTENT_SIGNALS: tuple[str, ...] = SIGNALS


@dataclass
class BriefParts:
    """A brief's parts as the router reads them (each a list of texts)."""

    question: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    #: what happened (a Social IQa situation): context whose sentences are premises
    situation: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    plans: list[str] = field(default_factory=list)

    def texts(self) -> list[str]:
        """Every part's texts, question first."""
        return [*self.question, *self.facts, *self.context, *self.situation, *self.options,
                *self.code]  # fmt: skip


# -- finding the parts ---------------------------------------------------------------------
_CODE = re.compile(
    r"```|^\s*(?:def|class|import|return|from\s+[\w.]+\s+import|async\s+def)\b|^\s*>>>",
    re.MULTILINE,
)
#: ``x`` keys (and free-form headings) that name a passage to read
_CONTEXT_KEYS = frozenset(("passage", "situation", "context", "payload", "tool response"))
_OPTION_KEY = re.compile(r"^[A-Za-z0-9]{1,2}$")


def has_code(text: str) -> bool:
    """Whether ``text`` holds program text: a fence, a ``def``/``class``/``import``/
    ``return`` line or a doctest prompt."""
    return _CODE.search(text) is not None


def typed_parts(wire: str | Iterable[tuple[str, tuple[str, ...]]]) -> BriefParts:
    """The parts of a TerseTalk-JSONL brief: its text (lenient parse: never raises), or
    its lines as ``(tag, payload fields)``."""
    if isinstance(wire, str):
        wire = [
            (line.tag, tuple(str(x) for x in line.payload() if x is not None))
            for line in parse_lenient(wire).lines
        ]
    parts = BriefParts()
    for tag, fields in wire:
        if not fields:
            continue
        text = fields[-1]
        if tag == "q":  # (addressee, text)
            parts.question.append(text)
        elif tag in ("f", "u", "t"):
            parts.facts.append(fields[0])
        elif tag == "o":  # (summary, pointer, method): the summary went on the wire
            parts.facts.append(fields[0])
        elif tag == "p":
            parts.plans.append(fields[0])
        elif tag == "x":  # (key, value)
            key = fields[0] if len(fields) > 1 else ""
            if key.lower() == "code" or has_code(text):
                parts.code.append(text)
            elif _OPTION_KEY.match(key) and key.lower() not in _CONTEXT_KEYS:
                parts.options.append(text)
            elif key.lower() == "situation":
                parts.situation.append(text)
            else:
                parts.context.append(text)
    return parts


_HEADING = re.compile(r"^([A-Za-z][A-Za-z ]{0,30}):\s*(.*)$")
_BULLET = re.compile(r"^\s*[-*•]\s+")
_STEP = re.compile(r"^\s*(?:\d+[.)]|step\s*\d+\s*[:.)-]?)\s+", re.IGNORECASE)
_OPTION_LINE = re.compile(r"^([A-Za-z0-9]{1,2})[:.)]\s+(.*)$")
_SECTIONS = {
    "goal": None, "facts": "facts", "fact": "facts", "options": "options",
    "question": "question", "code": "code", "plan": "plans", "steps": "plans",
    **{k: "context" for k in _CONTEXT_KEYS}, "situation": "situation",
}  # fmt: skip


def prose_parts(text: str) -> BriefParts:
    """The parts of a free-form brief: under its headings (``Passage:``, ``Facts:``,
    ``Options:``, ``Code:`` with a fence, ``Question:``), or, for prose without
    headings, numbered lines as plan steps, sentences ending in ``?`` as the question,
    fenced or program text as code and every other sentence as a fact."""
    parts = BriefParts()
    section: str | None = "facts"
    in_fence, fence = False, []
    for raw in text.splitlines():
        if raw.strip().startswith("```"):
            if in_fence:
                parts.code.append("\n".join(fence))
                fence = []
            in_fence = not in_fence
            continue
        if in_fence:
            fence.append(raw)
            continue
        heading = _HEADING.match(raw.strip())
        if heading and heading.group(1).lower() in _SECTIONS:
            section = _SECTIONS[heading.group(1).lower()]
            rest = heading.group(2).strip()
            if rest and section is not None:
                _add(parts, section, rest)
            continue
        line = _BULLET.sub("", raw).strip()
        if not line or section is None:
            continue
        if _STEP.match(line) and section != "code":
            parts.plans.append(_STEP.sub("", line))
        elif section == "options":
            option = _OPTION_LINE.match(line)
            parts.options.append(option.group(2) if option else line)
        elif section == "facts" and has_code(raw):
            parts.code.append(raw)
        else:
            _add(parts, section, line)
    if fence:
        parts.code.append("\n".join(fence))
    return parts


def _add(parts: BriefParts, section: str, text: str) -> None:
    if section == "facts":
        # prose without a question heading: its questions are the sentences ending in ?
        for sentence in split_sentences(text):
            (parts.question if sentence.endswith("?") else parts.facts).append(sentence)
    else:
        getattr(parts, section).append(text)


# -- counting ------------------------------------------------------------------------------
def _words(*alternatives: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)


#: a relative word that opens a restrictive clause about a noun: the clause picks out the
#: thing the question goes on to ask about (*the woman who portrayed ...*). Not counted:
#: ``, where were they?``; *so that*; *that of* (a pronoun); a clause set off by a comma
#: (*Frankenstein, in which ...*, *the railway, which crosses ...*), which describes a
#: thing already named; and *which* asking for the answer itself, its noun phrase
#: running to the question's end without a verb in *-ed* (*... by which English
#: author?*, not *the film in which Pat Ashton starred?*). *When* is a time.
_RELATIVE = re.compile(
    r"(?<![,;])(?<!\bso)(?<!,\s(?:in|of|by|at|on|to))(?<!,\s(?:for|via))(?<!,\sfrom)"
    r"(?<!,\swith)\s\b(?:(?:who|whom|where)\b|that\b(?!\s+of\b)|"
    r"whose\b|which\b(?!(?:\s+(?!(?:is|are|was|were|has|have|had)\b)[\w'&.-]+){0,3}"
    r"\s+(?!(?:is|are|was|were|has|have|had)\b)(?![\w'&-]*ed\b)[\w'&.-]+\s*\??\s*$))",
    re.IGNORECASE,
)
#: a participle that links a description to another entity: *directed by the ...*
_LINK = re.compile(
    r"\b(?:directed|written|founded|created|produced|owned|played|starring|starred|born|"
    r"based|named|located|released|published|performed|portrayed|formed|designed|built|"
    r"composed|hosted|voiced|invented|discovered|won|led|coached|sung|recorded|drafted|"
    r"developed|headquartered|acted|appeared|featured|represented|signed|married|"
    r"operated|managed)\s+(?:by|in|at|for|from|with)\s+(?:(?:the|a|an)\s+\w|[A-Z0-9\"])",
)
#: a name: capitalised words (case-sensitive inside the case-blind patterns below)
_NAME = r"(?-i:[A-Z0-9\"][\w'&.-]*(?:[ \t]+(?:(?:of|the|de|la|von)[ \t]+)?[A-Z0-9][\w'&.-]*)*)"
#: two named things compared: *both*, *in common*, *X or Y*, *X and Y ... the same*, a
#: comparative (not a superlative's *than any other*), two dates (*still alive at the
#: time of ...*)
_COMPARISON = re.compile(
    r"\b(?:both|either|neither|in common|shared|between)\b|"
    rf"{_NAME}\s*,?\s+or\s+{_NAME}|"
    rf"{_NAME}\s+and\s+{_NAME}\b[^?]*\b(?:same|different)\b|"
    r"\b(?:\w+er|more|less|fewer|earlier|later)\b[^?.]{0,60}\bthan\b"
    r"(?!\s+(?:(?:that|those)\s+of\s+)?any\b)|"
    r"\bat the time of\b|\bstill (?:alive|living)\b|"
    r"\b(?:born|founded|released|built|formed|opened|published|died|established|written|"
    r"made|invented|discovered)\s+(?:before|after)\b|"
    r"\b(?:which|who)\b[^?.]{0,60}\b(?:first|earlier|older|younger|longer|larger|more)\b",
    re.IGNORECASE,
)
#: a description that names the thing through another: *the star of 127 Hours*
_DESCRIPTION = re.compile(
    r"\b[Tt]he\s+(?:[a-z-]+\s+){0,3}?(?:of|in|from|for|at|on)\s+"
    r"(?:the\s+)?(?:[A-Z0-9\"]|(?:his|her|their|its)\s)"
)
#: a person picked out by a first or a record: *the first woman to win a Nobel Prize*
_RECORD_HOLDER = re.compile(
    r"\bthe\s+(?:first|last|only|youngest|oldest|earliest|latest)\s+(?:[a-z-]+\s+){0,2}?"
    r"to\s+(?!be\b)[a-z]+",
    re.IGNORECASE,
)
#: a relation reached through a possessive: *his father's brother*, *Jaws's director*, or
#: through *of* whatever the case: *the author of pride and prejudice*
_RELATION_NOUNS = (
    r"(?:father|mother|parent|brother|sister|sibling|son|daughter|child|uncle|aunt|cousin|"
    r"nephew|niece|wife|husband|spouse|grandfather|grandmother|grandson|granddaughter|"
    r"director|author|writer|founder|creator|owner|capital|successor|predecessor|producer|"
    r"composer|singer|coach|captain|leader|president|mayor|ceo|headquarters|birthplace|"
    r"hometown|architect|painter|inventor|discoverer|designer)"
)
_RELATION = re.compile(
    r"(?:\b(?:his|her|their|its)|\w's|\w')\s+(?:(?:only|eldest|oldest|youngest|first|"
    rf"late|former|current)\s+)?{_RELATION_NOUNS}\b|"
    # a lower-case name (BoolQ's questions); a capitalised one or a possessive is a
    # _DESCRIPTION
    rf"\bthe\s+{_RELATION_NOUNS}s?\s+of\s+(?:the\s+)?(?!(?:his|her|their|its)\s)(?-i:[a-z])",
    re.IGNORECASE,
)


#: the longest question the bridge patterns read (a question is a sentence or two; a
#: record can hold anything, and a pattern's cost grows with the text it scans)
MAX_QUESTION_CHARS = 1000


#: the words a noun phrase may open with that pick out no particular thing (*a fox that
#: ...*, *something which ...*): a clause about it describes, there is nothing to look up
_INDEFINITE = frozenset(
    "a an some any someone something somewhere somebody anyone anything anybody one you "
    "people person place thing things".split()
)
#: the words a noun phrase may open with that pick out one thing
_DEFINITE = frozenset("the this these those his her its their".split())
#: verbs after which *that* opens what is said or known, not a clause about a noun
_SAYING = frozenset(
    "is was are were be been decided said says think thinks thought know knows knew "
    "believe believes believed felt feel feels realised realized noticed saw shows "
    "showed mean means meant hope hoped so such than now".split()
)


def _names_something(question: str) -> bool:
    """Whether the question names a particular thing: a capitalised word after its first
    word, or a number."""
    words = re.findall(r"[\w'&.-]+", question)
    return any(w[:1].isupper() and w != "I" for w in words[1:]) or bool(re.search(r"\d", question))


def _bridging_clauses(question: str) -> int:
    """Restrictive relative clauses (``_RELATIVE``) that bridge: not a *that* after a verb
    of saying or being (*decided that ...*, *is that man ...*), and, in a question that
    names nothing particular, not a clause about an indefinite noun phrase (*a fox that
    is made up*, *a person who ...*): such a clause describes, there is nothing to look
    up. In a question with names, *a team that competes in ...* still bridges."""
    named = _names_something(question)
    count = 0
    for match in _RELATIVE.finditer(question):
        before = re.findall(r"[\w'&.-]+", question[: match.start()])[-5:]
        if not before or before[-1].lower() in _SAYING:
            continue
        if not named:
            head = next((w.lower() for w in reversed(before)
                         if w.lower() in _INDEFINITE or w.lower() in _DEFINITE), None)  # fmt: skip
            if head is None or head in _INDEFINITE:
                continue
        count += 1
    return count


def question_hops(question: str) -> int:
    """Bridging structures in a question (the ``hops`` signal; module docstring): each
    relative clause, participial link and description through another entity, and one
    for a comparison of two things. Only the first :data:`MAX_QUESTION_CHARS` characters
    are read."""
    question = question[:MAX_QUESTION_CHARS]
    hops = _bridging_clauses(question) + len(_LINK.findall(question))
    hops += len(_DESCRIPTION.findall(question)) + len(_RELATION.findall(question))
    hops += len(_RECORD_HOLDER.findall(question))
    hops += int(bool(_COMPARISON.search(question)))
    return hops


_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    "fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|"
    "eighty|ninety|hundred|thousand|million|dozen|twice|thrice|half|double|triple|"
    "quarter|third"
)
#: a day of the week is a position on a calendar a step can move along
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_QUANTITY = re.compile(
    rf"(?<![\w.:-])(?:\d{{1,2}}:\d\d|\$?\d+(?:[.,]\d+)*%?|"
    rf"(?:{_NUMBER_WORDS})(?:-(?:{_NUMBER_WORDS}))?|(?:{_DAYS}))(?![\w])",
    re.IGNORECASE,
)
_YEAR = re.compile(r"^(?:1[5-9]\d\d|20\d\d)$")
_OPERATION = _words(
    "each",
    "per",
    "every",
    "total",
    "totals",
    "altogether",
    "in all",
    "combined",
    "sum",
    "difference",
    "product",
    "average",
    "times",
    "twice",
    "half",
    "more than",
    "less than",
    # an amount told as a difference from another (*4 years older than his sister*)
    "(?:old|young|tall|short|long|heavi|light|cheap|fast|slow|bigg|small|larg|high|low)er than",
    "fewer",
    "left",
    "remain",
    "remaining",
    "remains",
    "spend",
    "spends",
    "spent",
    "cost",
    "costs",
    "earn",
    "earns",
    "earned",
    "pay",
    "pays",
    "paid",
    "divide",
    "divided",
    "split",
    "share",
    "shared",
    "multiply",
    "multiplied",
    "add",
    "adds",
    "added",
    "subtract",
    "increase",
    "increased",
    "decrease",
    "decreased",
    "percent",
    "rate",
    "profit",
    "discount",
    "change",
    "return",
    "returns",
    "count",
    "sorted",
    "compute",
    # a transfer changes an amount (the change schema of word problems)
    "gives",
    "gave",
    "buys",
    "bought",
    "sells",
    "sold",
    "loses",
    "lost",
    "receives",
    "received",
    "brings",
    "brought",
    "saves",
    "saved",
    "owes",
    "owed",
    # a part of a whole taken away or left (*two fifths of them*, *a third of the rest*)
    "of them",
    "the rest",
    "the others",
    "the remainder",
    # a step along a clock or a calendar
    "from now",
    "ago",
    "later",
    "after",
    "before",
    "until",
    "late",
    "early",
)
_CONDITION = _words(
    "if",
    "only",
    "on the condition",
    "unless",
    "otherwise",
    "only if",
    "must",
    "should",
    "at least",
    "at most",
    "except",
    "provided",
    "such that",
    "so that",
    "not less",
    "not more",
    "exactly",
    "whenever",
    "else",
)
_WRITE_CODE = re.compile(
    r"\b(?:write|implement|define|complete|code|create)\b[^.?]{0,40}"
    r"\b(?:function|program|method|class|script|procedure|code)\b",
    re.IGNORECASE,
)


#: the work a program's description asks of it beyond one expression: going over the
#: parts of its input (*each*, *every*, *runs*, *pairs*, *digits*), repeating (*until*,
#: *again*), ordering and counting (*sorted*, *distinct*, *how many*), and structure to
#: keep track of (*matching*, *nested*, *overlapping*, *wrapping*). A one-line function
#: (a sum, a comparison, one string format, one built-in over a list) names none.
_PROGRAM_WORK = re.compile(
    r"\b(?:each|every|all|any|until|again|repeat(?:ed|edly|s)?|while|loop\w*|iterat\w*|"
    r"recursi\w*|sort(?:s|ed|ing)?|order(?:ed|s)?|count(?:s|ed|ing)?(?!\s+as\b)|"
    r"frequen\w*|distinct|unique|duplicates?|consecutive|runs?|pairs?|ranges?|merg\w*|"
    r"overlap\w*|match(?:es|ing)|wrap(?:s|ping)?|nested|balanced|primes?|factors?|"
    r"digits|divisible|substrings?|subsequences?|prefix(?:es)?|suffix(?:es)?|adjacent|"
    r"number of|how many|second|kth|nth|n-th|closest|nearest|longest|shortest|"
    r"fewer than|more than one)\b",
    re.IGNORECASE,
)
#: the most kinds of program work counted (the ``code`` signal's ceiling)
MAX_PROGRAM_WORK = 3
#: program lines that are not its description: a doctest prompt, a signature, an import
_PROGRAM_SYNTAX = re.compile(
    r"^\s*(?:>>>|\.\.\.\s|def\s|class\s|import\s|from\s+[\w.]+\s+import\s|return\b|@)"
)


def program_prose(code: str) -> str:
    """A program text's description: its docstrings and comments, without the doctest
    examples (a ``>>>`` line and the output line after it), signatures and imports."""
    kept: list[str] = []
    after_prompt = False
    for line in code.splitlines():
        stripped = line.strip()
        if _PROGRAM_SYNTAX.match(line):
            after_prompt = stripped.startswith(">>>")
            continue
        if after_prompt and stripped:  # the example's expected output
            after_prompt = False
            continue
        after_prompt = False
        kept.append(stripped.lstrip("#").strip().strip('"').strip("'"))
    return "\n".join(k for k in kept if k)


def program_work(parts: BriefParts) -> int:
    """The ``code`` signal: the kinds of program work (:data:`_PROGRAM_WORK`) the
    description of a program in the brief, or a request to write one, names, at most
    :data:`MAX_PROGRAM_WORK`. A one-line job (a sum, a comparison, one format, one
    built-in) names none and counts 0, like a brief with no program."""
    requests = [t for t in (*parts.question, *parts.facts) if _WRITE_CODE.search(t)]
    if not parts.code and not requests:
        return 0
    prose = [program_prose(c) for c in parts.code] + requests
    kinds = {m.group(0).lower() for text in prose for m in _PROGRAM_WORK.finditer(text)}
    return min(len(kinds), MAX_PROGRAM_WORK)


#: words a question's content is not read from (function words and question words)
_FUNCTION_WORDS = frozenset(
    "a an the of in on at to for from by with and or but not no is are was were be been "
    "being do does did has have had it its this that these those which who whom whose what "
    "when where why how than then there their they he she his her him as into about over "
    "under can could will would should may might must any some all more most less very "
    "also just only both either neither one".split()
)


def _content_words(text: str) -> set[str]:
    """A text's content words, lower case, a plural's or a verb's ending cut (numbers
    are not: a question compares them with what a sentence states)."""
    words = re.findall(r"[a-z]+", text.lower())
    return {re.sub(r"(?:es|s|ed|ing)$", "", w) if len(w) > 4 else w
            for w in words if w not in _FUNCTION_WORDS}  # fmt: skip


def _stated_whole(question: str, evidence: list[str]) -> bool:
    """Whether one sentence of the evidence (facts, context) holds every content word of
    the question (it has at least two): the answer is then one lookup,
    whatever bridges the question's wording has. Two facts to combine are never in one
    sentence."""
    asked = _content_words(question[:MAX_QUESTION_CHARS])
    if len(asked) < 2:
        return False
    return any(asked <= _content_words(s) for s in evidence)


def quantities(text: str) -> int:
    """Numbers a computation could use in ``text`` (years left out)."""
    return sum(1 for m in _QUANTITY.finditer(text) if not _YEAR.match(m.group(0)))


#: the shortest word :func:`premises` links two sentences by (*out*, *day* link nothing)
MIN_PREMISE_WORD = 4
#: the most sentences :func:`premises` reads (a record can hold anything)
MAX_PREMISES_READ = 50


def _told_words(sentence: str) -> set[str]:
    """The words a premise may take up: lower case in the text (names aside), at least
    :data:`MIN_PREMISE_WORD` letters, no function word; a plural's or a verb's ending cut
    as :func:`_content_words` cuts it."""
    words = (w for w in re.findall(r"[A-Za-z]+", sentence) if not w[0].isupper())
    return {re.sub(r"(?:es|s|ed|ing)$", "", w) if len(w) > 4 else w
            for w in words
            if len(w) >= MIN_PREMISE_WORD and w not in _FUNCTION_WORDS}  # fmt: skip


def premises(parts: BriefParts) -> int:
    """Premises that build on an earlier one (part of the ``hops`` signal): the sentences
    of the situation and of the question but its last (the one that asks), in order; each
    after the first that shares a word (:func:`_told_words`) with a sentence before it
    counts one. A lone event, or events that share nothing, count 0."""
    told = [s for text in (*parts.situation, *parts.question) for s in split_sentences(text)]
    if parts.question:
        told = told[:-1]
    seen: set[str] = set()
    count = 0
    for sentence in told[:MAX_PREMISES_READ]:
        words = _told_words(sentence)
        count += bool(seen) and bool(words & seen)
        seen |= words
    return count


def content_signals(parts: BriefParts) -> dict[str, int]:
    """The router's six signals of a brief's parts (module docstring), in
    :data:`CONTENT_SIGNALS` order."""
    # a program counts by its description: its examples' numbers are not amounts to use
    context = [*parts.context, *parts.situation]
    texts = [*parts.question, *parts.facts, *context, *parts.options,
             *(program_prose(c) for c in parts.code)]  # fmt: skip
    evidence = [s for text in (*parts.facts, *context) for s in split_sentences(text)]
    work = [*parts.question, *parts.facts, *context, *parts.plans,
            *(program_prose(c) for c in parts.code)]  # fmt: skip
    n_quantities = sum(quantities(text) for text in texts)
    # a passage's (or a situation's) amounts are steps only for a question that computes
    # (one with an operation word; *does the heart have four chambers* reads a number)
    computes = any(_OPERATION.search(q) for q in parts.question)
    read = texts if computes else [t for t in texts if t not in context]
    sentences = [s for text in read for s in split_sentences(text.replace("\n", " "))]
    steps = sum(1 for s in sentences if quantities(s) and _OPERATION.search(s))
    # a question that asks to combine amounts given elsewhere (*how many legs altogether?*)
    combines = sum(
        1 for q in parts.question
        if not quantities(q) and n_quantities >= 2 and _OPERATION.search(q)
    )  # fmt: skip
    return {
        "hops": premises(parts)
        + sum(0 if _stated_whole(q, evidence) else question_hops(q) for q in parts.question),
        "quantities": n_quantities,
        "arithmetic": combines + steps,
        "conditions": sum(len(_CONDITION.findall(text)) for text in work),
        "code": program_work(parts),
        "plans": len(parts.plans),
    }
