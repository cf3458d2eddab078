"""Where a message's tokens go: payload against protocol overhead, line by line.

The audit asks why the TerseTalk brief is not shorter than the prose brief at equal
information, and where the Worker's and Critic's replies spend their tokens. This
module re-tokenises every message of one or more run files and splits each line's
tokens into the **payload** (the text values that carry the example's information)
and named kinds of **overhead**.

How tokens are attributed
-------------------------
BPE is not additive: ``tokens(a + b)`` is not ``tokens(a) + tokens(b)``. So no single
token is ever assigned to a category; every number is a count of one whole string,
and every overhead figure is a *difference* of two such counts:

* A message is split into lines on ``\\n`` (as the codec does). Each non-blank line is
  counted whole: ``total``. The message count minus the sum of its line counts is one
  ``newlines`` row, so the rows of a message add up to exactly its token count (which
  is the record's ``tokens_cl100k`` for the default tokenizer; :func:`audit_runs` checks).
  cl100k merges ``"]\\n`` into one token, so for JSONL this row is usually 0.
* Each value of a line (a JSON string, decoded: no quotes, no escapes) is counted
  alone. Payload values give ``payload``; the others give their overhead category.
* ``overhead = total - payload``, split into these categories (columns ``oh_*``):

  ``role``      a whole role line ``["r","M"]``: the channel already says who speaks.
  ``goal``      a whole goal line (``["g",...]`` or prose ``Goal: ...``): the same
                instruction in every example, already in the receiver's system prompt.
  ``ref``       ``M#`` ids and overflow method names: the id and method of an ``o``
                line, ``d`` lines, a fact's source ref, the key of a re-injected
                (deref) ``["x","M#1",text]`` line.
  ``label``     keys and addressees inside a line: the ``x`` key (``"answer"``), the
                ``q`` line's addressee.
  ``title``     a HotpotQA fact is ``Title: sentence``; when every word of the title
                also occurs in the sentence, the title repeats it:
                ``tokens(fact) - tokens(sentence)``.
  ``question``  in a reply (draft, verdict, final): spans of at least
                :data:`MIN_REPEAT_WORDS` words copied from the brief's question (or a
                value that is the whole question): ``tokens(value) - tokens(value with
                the spans cut out)``.
  ``echo``      in a reply: spans (same rule) copied from a reply the *receiver itself*
                sent earlier, e.g. the Critic repeating the Worker's answer back to
                it. Briefs are not echo sources: an answer is meant to be copied
                from the facts.
  ``escape``    JSON string escaping: ``tokens(json-escaped value) - tokens(value)``,
                per value (``\\"`` inside a question, ``\\n`` inside an answer).
  ``syntax``    the remainder: tag letters, brackets, quotes, commas; the prose
                scaffolding ``Facts:``, ``- ``, ``Question: ``; the ``newlines`` row.

  Within a line, ``payload`` plus every category equals ``total`` exactly, because
  ``syntax`` is the remainder (in principle it can be slightly negative when a merge
  across a boundary makes the whole line cheaper than its parts). Within a value,
  ``payload + title + question + echo`` equals the value's count exactly: each cut
  is measured on what the previous cut left.

An ``o`` (overflow) line in a brief is ``part=question`` when its summary is the start
of the brief's question, else ``part=fact``; a deref line ``["x","M#1",text]`` is
``part=deref``; ``["x","answer",text]`` is ``part=answer``.

Prose messages (anything strict parsing does not accept as TerseTalk-JSONL, decided
as :func:`tersetalk.metrics.preservation.as_prose` decides) are audited per line
when they are briefs in :func:`tersetalk.agents.roles.render_brief`'s layout
(``Goal:``, ``Facts:``, ``- fact``, ``Question: q``) and as one block otherwise (a
free-text reply: its payload is the whole stripped text, less question and echo).

Averages are per example over the run's examples without an error, the same
denominator as ``tokens_total_cl100k_mean`` in the run metrics, so the rows of one
run add up to its mean tokens per example.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import pandas as pd

from tersetalk.core.io import message_list
from tersetalk.tasks.registry import get as get_task

log = logging.getLogger(__name__)

__all__ = [
    "GROUP_COLUMNS",
    "MIN_REPEAT_WORDS",
    "OVERHEAD_KINDS",
    "REPLY_KINDS",
    "LineAudit",
    "audit_message",
    "audit_runs",
    "audit_table",
    "audit_summary",
    "brief_question",
    "render_markdown",
    "strip_title",
]

#: Overhead categories, in the order tables show them (see the module docstring).
OVERHEAD_KINDS: tuple[str, ...] = (
    "syntax",
    "escape",
    "label",
    "ref",
    "role",
    "goal",
    "title",
    "question",
    "echo",
)
OH_COLUMNS: tuple[str, ...] = tuple(f"oh_{k}" for k in OVERHEAD_KINDS)
TOKEN_COLUMNS: tuple[str, ...] = ("total", "payload", "overhead", *OH_COLUMNS)
RUN_KEYS: tuple[str, ...] = ("task", "system", "variant")
#: One row of the tidy table per these keys.
GROUP_COLUMNS: tuple[str, ...] = (*RUN_KEYS, "kind", "direction", "format", "tag", "part")

#: Message kinds that are replies: where repeated question text and echoes are looked for.
REPLY_KINDS: frozenset[str] = frozenset({"draft", "verdict", "final"})
#: A copied span must be at least this many words long (or be the whole source value).
MIN_REPEAT_WORDS = 4

#: What each TerseTalk tag carries, as the ``part`` column names it.
_PART_OF_TAG = {
    "r": "role",
    "g": "goal",
    "f": "fact",
    "u": "assumption",
    "p": "plan",
    "q": "question",
    "d": "delta",
    "v": "verdict",
    "o": "fact",
    "t": "text",
    "x": "context",
}
#: Reading order of the parts in the per-line tables.
_PART_ORDER = {p: i for i, p in enumerate(
    ("role", "goal", "header", "fact", "question", "deref", "answer", "verdict", "text",
     "context", "assumption", "plan", "delta", "newlines"))}  # fmt: skip
#: Tags whose values are free text (where titles, repeats and echoes can occur).
_TEXT_TAGS = frozenset("fuopqtx")

_WORD = re.compile(r"\w+")
_REF = re.compile(r"^M#[1-9][0-9]*$")

Count = Callable[[str], int]


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def brief_question(task: str, question: str | None) -> str:
    """The question line the Manager's brief carries for a record's question text.

    The task's own rule (``Task.brief_question``, the one its brief builder uses):
    HotpotQA sends the question as is; GSM8K sends the problem's last sentence (the
    other sentences are the facts).
    """
    if not question:
        return ""
    return get_task(task).brief_question(question)


def strip_title(task: str, fact: str) -> str | None:
    """The sentence of a ``Title: sentence`` fact whose sentence already names its title.

    The rule TerseTalk's brief uses to drop a title (``titled_facts.dedup_title``, exact
    words, a parenthetical aside such as "(album)" not part of the name). ``None`` when
    the task's facts have no titles, the fact has none, or the title says something the
    sentence does not (then the title is payload, not overhead).
    """
    titled = get_task(task).titled_facts
    return titled.title_overhead(fact) if titled is not None else None


class _Repeats:
    """Texts a value may repeat: their word n-grams and their whole word sequences."""

    def __init__(self, texts: Iterable[str], n: int = MIN_REPEAT_WORDS) -> None:
        self.n = n
        self.grams: set[tuple[str, ...]] = set()
        self.wholes: set[tuple[str, ...]] = set()
        for text in texts:
            words = _words(text)
            if words:
                self.wholes.add(tuple(words))
            for i in range(len(words) - n + 1):
                self.grams.add(tuple(words[i : i + n]))

    def __bool__(self) -> bool:
        return bool(self.wholes)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of ``text`` that repeat a source (maximal runs of covered words)."""
        matches = list(_WORD.finditer(text))
        words = tuple(m.group().lower() for m in matches)
        if not words:
            return []
        if words in self.wholes:
            return [(matches[0].start(), matches[-1].end())]
        covered = [False] * len(words)
        for i in range(len(words) - self.n + 1):
            if words[i : i + self.n] in self.grams:
                covered[i : i + self.n] = [True] * self.n
        out: list[tuple[int, int]] = []
        i = 0
        while i < len(words):
            if not covered[i]:
                i += 1
                continue
            j = i
            while j + 1 < len(words) and covered[j + 1]:
                j += 1
            out.append((matches[i].start(), matches[j].end()))
            i = j + 1
        return out


def _cut(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` with ``spans`` removed; the remaining pieces joined by single spaces."""
    pieces, pos = [], 0
    for start, end in spans:
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    return " ".join(p.strip() for p in pieces if p.strip())


@dataclass
class LineAudit:
    """One line of one message: its whole token count, payload, and overhead by kind."""

    tag: str
    part: str
    format: str
    total: int
    payload: int = 0
    overhead: Counter = field(default_factory=Counter)
    lines: int = 1

    def close(self) -> LineAudit:
        """Put the remainder (total - payload - named overhead) into ``syntax``."""
        named = self.payload + sum(v for k, v in self.overhead.items() if k != "syntax")
        self.overhead["syntax"] = self.total - named
        return self

    @property
    def overhead_total(self) -> int:
        return self.total - self.payload

    def row(self) -> dict:
        out = {"tag": self.tag, "part": self.part, "format": self.format, "lines": self.lines}
        out.update(total=self.total, payload=self.payload, overhead=self.overhead_total)
        out.update({f"oh_{k}": int(self.overhead.get(k, 0)) for k in OVERHEAD_KINDS})
        return out


@dataclass
class _Context:
    """What a value's attribution depends on besides the value itself."""

    count: Count
    task: str = ""
    question: str = ""
    reply: bool = False
    repeats_question: _Repeats | None = None
    repeats_echo: _Repeats | None = None


def _split_value(value: str, ctx: _Context, line: LineAudit, *, title: bool) -> None:
    """Add ``value``'s tokens to ``line``: payload, less title, question and echo cuts."""
    count = ctx.count
    current = value
    if title and ctx.task:
        sentence = strip_title(ctx.task, current)
        if sentence is not None:
            line.overhead["title"] += count(current) - count(sentence)
            current = sentence
    if ctx.reply:
        for name, source in (("question", ctx.repeats_question), ("echo", ctx.repeats_echo)):
            if not source:
                continue
            spans = source.spans(current)
            if spans:
                rest = _cut(current, spans)
                line.overhead[name] += count(current) - count(rest)
                current = rest
    line.payload += count(current) if current else 0


def _is_question(summary: str, question: str) -> bool:
    """Whether an overflow summary is the question's start (caps keep a text's start).

    A prefix, not any piece: a short fact summary such as "Planet Earth Rock and" can
    occur inside a HotpotQA question that names the same entity.
    """
    s, q = _words(summary), _words(question)
    return bool(s) and q[: len(s)] == s


def _audit_jsonl_line(raw: str, line, ctx: _Context) -> LineAudit:
    count = ctx.count
    tag = line.tag
    total = count(raw)
    if tag in ("r", "g"):  # the whole line is overhead
        kind = "role" if tag == "r" else "goal"
        return LineAudit(tag, kind, "jsonl", total, 0, Counter({kind: total})).close()
    part = _PART_OF_TAG.get(tag, "other")
    if tag == "o" and not ctx.reply and _is_question(line.summary, ctx.question):
        part = "question"
    if tag == "x":
        part = "deref" if _REF.match(line.key) else ("answer" if line.key == "answer" else part)
    audit = LineAudit(tag, part, "jsonl", total)
    for name, value in zip(line.payload_fields, line.payload(), strict=False):
        if not isinstance(value, str):
            continue
        audit.overhead["escape"] += count(json.dumps(value, ensure_ascii=False)[1:-1]) - count(
            value
        )
        if name == "ref" or (tag == "o" and name == "method") or (tag == "x" and part == "deref"
                                                                  and name == "key"):  # fmt: skip
            audit.overhead["ref"] += count(value)
        elif (tag == "q" and name == "to") or (tag == "x" and name == "key"):
            audit.overhead["label"] += count(value)
        elif tag in _TEXT_TAGS:
            title = part in ("fact", "deref")
            _split_value(value, ctx, audit, title=title)
        else:  # v: the verdict letter is the Critic's payload
            audit.payload += count(value)
    return audit.close()


def _jsonl_lines(content: str):
    """``[(raw line, parsed line)]`` when ``content`` is strict TerseTalk-JSONL, else None."""
    from tersetalk.protocol import ProtocolError, validate_strict
    from tersetalk.protocol.codec import parse_line_strict, physical_lines

    try:
        validate_strict(content)  # the same verdict as parse_strict, without models
    except ProtocolError:
        return None
    out = []
    for line_no, raw in physical_lines(content):
        parsed = parse_line_strict(raw, line_no)
        if parsed is not None:
            out.append((raw, parsed))
    return out


def _audit_prose_brief_line(raw: str, ctx: _Context) -> LineAudit:
    count = ctx.count
    total = count(raw)
    text = raw.strip()
    if text.startswith("Goal:"):
        return LineAudit("Goal:", "goal", "prose", total, 0, Counter({"goal": total})).close()
    if text == "Facts:":
        return LineAudit("Facts:", "header", "prose", total).close()
    if text.startswith("- "):
        audit = LineAudit("-", "fact", "prose", total)
        _split_value(text[2:].strip(), ctx, audit, title=True)
        return audit.close()
    if text.startswith("Question:"):
        audit = LineAudit("Question:", "question", "prose", total)
        _split_value(text[len("Question:") :].strip(), ctx, audit, title=False)
        return audit.close()
    audit = LineAudit("text", "text", "prose", total)
    _split_value(text, ctx, audit, title=False)
    return audit.close()


def _is_brief_layout(content: str) -> bool:
    return any(
        line.startswith(("Goal:", "Question:", "- ")) or line.strip() == "Facts:"
        for line in content.split("\n")
    )


def audit_message(
    content: str,
    *,
    kind: str,
    task: str = "",
    question: str = "",
    echo_sources: Sequence[str] = (),
    count: Count | None = None,
) -> list[LineAudit]:
    """Audit one message: one :class:`LineAudit` per line, plus a ``newlines`` row if any.

    ``question`` is the brief's question (:func:`brief_question`); in a reply
    (``kind`` in :data:`REPLY_KINDS`), spans copied from it are ``question`` overhead
    and spans copied from ``echo_sources`` (what the receiver itself replied earlier)
    are ``echo`` overhead. ``count`` defaults to cl100k_base. The ``total`` of the
    returned rows adds up to ``count(content)``.
    """
    if count is None:
        count = _counter("cl100k_base")
    reply = kind in REPLY_KINDS
    ctx = _Context(
        count=count,
        task=task,
        question=question,
        reply=reply,
        repeats_question=_Repeats([question]) if reply and question else None,
        repeats_echo=_Repeats(echo_sources) if reply and echo_sources else None,
    )
    parsed = _jsonl_lines(content)
    if parsed is not None:
        rows = [_audit_jsonl_line(raw, line, ctx) for raw, line in parsed]
    elif kind == "brief" and _is_brief_layout(content):
        rows = [_audit_prose_brief_line(raw, ctx) for raw in content.split("\n") if raw.strip()]
    else:
        block = LineAudit("text", "text", "prose", count(content))
        if content.strip():
            _split_value(content.strip(), ctx, block, title=False)
        rows = [block.close()]
    residual = count(content) - sum(r.total for r in rows)
    if residual:
        fmt = rows[0].format if rows else "prose"
        newline = LineAudit("\\n", "newlines", fmt, residual, 0, Counter(), lines=0)
        rows.append(newline.close())
    return rows


def _reply_texts(content: str) -> list[str]:
    """The text values of a reply, as sources of echoes (the whole text for prose)."""
    parsed = _jsonl_lines(content)
    if parsed is None:
        return [content] if content.strip() else []
    out = []
    for _, line in parsed:
        if line.tag not in _TEXT_TAGS:
            continue
        for name, value in zip(line.payload_fields, line.payload(), strict=False):
            if isinstance(value, str) and name not in ("ref", "to", "key", "method"):
                out.append(value)
    return out


def _counter(tokenizer: str) -> Count:
    from tersetalk.core.tokens import count_tokens

    @lru_cache(maxsize=65536)
    def count(text: str) -> int:
        return count_tokens(text, tokenizer)

    return count


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value) or value is pd.NA


def audit_runs(
    runs: Sequence[pd.DataFrame], *, tokenizer: str = "cl100k_base"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Audit every message of every run: (one row per line, one row per run).

    The per-run table has the examples audited (``n``, error rows left out as in the
    run metrics), ``n_errors``, the mean tokens per example as recorded and as
    recounted here, and how many messages' recounts differ from the record (0 expected).
    """
    count = _counter(tokenizer)
    recorded_key = "tokens_" + tokenizer.split("_")[0]
    rows: list[dict] = []
    run_rows: list[dict] = []
    for df in runs:
        if df.empty:
            continue
        missing = [c for c in (*RUN_KEYS, "messages") if c not in df.columns]
        if missing:
            raise ValueError(f"not a run table: no column(s) {', '.join(missing)}")
        keys = {k: str(df[k].iloc[0]) for k in RUN_KEYS}
        has_error = "error" in df.columns
        n = n_errors = mismatched = recorded = audited = 0
        for rec in df.to_dict("records"):
            if has_error and not _is_missing(rec.get("error")):
                n_errors += 1
                continue
            n += 1
            question = brief_question(keys["task"], rec.get("question"))
            sent_replies: dict[str, list[str]] = defaultdict(list)
            for i, msg in enumerate(message_list(rec["messages"])):
                content, kind = msg.get("content") or "", msg.get("kind", "")
                sender, receiver = msg.get("sender", "?"), msg.get("receiver", "?")
                lines = audit_message(content, kind=kind, task=keys["task"], question=question,
                                      echo_sources=sent_replies[receiver], count=count)  # fmt: skip
                msg_total = sum(line.total for line in lines)
                audited += msg_total
                if recorded_key in msg:
                    recorded += int(msg[recorded_key])
                    mismatched += int(msg[recorded_key]) != msg_total
                if kind in REPLY_KINDS:
                    sent_replies[sender].extend(_reply_texts(content))
                for line in lines:
                    rows.append({**keys, "example_id": rec.get("example_id"), "message": i,
                                 "kind": kind, "direction": f"{sender}->{receiver}",
                                 **line.row()})  # fmt: skip
        if mismatched:
            log.warning("%s/%s/%s: %d message(s) whose recount differs from the recorded %s",
                        *keys.values(), mismatched, recorded_key)  # fmt: skip
        run_rows.append({**keys, "n": n, "n_errors": n_errors,
                         "tokens_recorded_mean": recorded / n if n else float("nan"),
                         "tokens_audited_mean": audited / n if n else float("nan"),
                         "messages_recount_differs": mismatched})  # fmt: skip
    cols = [*RUN_KEYS, "example_id", "message", "kind", "direction", "format", "tag", "part",
            "lines", *TOKEN_COLUMNS]  # fmt: skip
    return pd.DataFrame(rows, columns=cols), pd.DataFrame(run_rows)


def _per_example(df: pd.DataFrame, runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    sums = df.groupby(by, sort=False, dropna=False)[["lines", *TOKEN_COLUMNS]].sum().reset_index()
    sums = sums.merge(runs[[*RUN_KEYS, "n"]], on=list(RUN_KEYS), how="left")
    for col in ["lines", *TOKEN_COLUMNS]:
        sums[col] = sums[col] / sums["n"]
    return sums.rename(columns={"n": "n_examples", "lines": "lines_per_example"})


def audit_table(lines: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The tidy table: mean tokens per example per (run, kind, direction, format, tag, part).

    Rows of one run add up to its mean tokens per example; ``lines_per_example`` counts
    the lines (the ``newlines`` rows count none).
    """
    out = _per_example(lines, runs, list(GROUP_COLUMNS))
    return out.sort_values(list(GROUP_COLUMNS), kind="stable").reset_index(drop=True)


def _top_overhead(row: pd.Series, k: int = 3) -> str:
    items = sorted(((row[c], c[3:]) for c in OH_COLUMNS if row[c] > 0.05), reverse=True)[:k]
    return ", ".join(f"{name} {value:.1f}" for value, name in items)


def _top_difference(row: pd.Series, k: int = 3) -> str:
    items = [(row[f"d_{c}"], c[3:]) for c in OH_COLUMNS if abs(row[f"d_{c}"]) > 0.05]
    items = sorted(items, key=lambda item: -abs(item[0]))[:k]
    return ", ".join(f"{name} {value:+.1f}" for value, name in items)


def audit_summary(
    lines: pd.DataFrame, runs: pd.DataFrame, reference: str | None = "freeform/default"
) -> pd.DataFrame:
    """Per (run, kind, direction): tokens per example, the JSONL share, the top overhead.

    With ``reference`` (``system/variant``) among the runs, the ``d_*`` columns are each
    run's difference from it for the same task, kind and direction (negative: fewer
    tokens than the reference), and ``top_d_overhead`` names the three overhead
    categories that differ most. Rows come in conversation order (brief first).
    """
    by = [*RUN_KEYS, "kind", "direction"]
    out = _per_example(lines, runs, by)
    msgs = lines.drop_duplicates([*RUN_KEYS, "example_id", "message"])
    jsonl = msgs.assign(jsonl=msgs["format"].eq("jsonl")).groupby(by, sort=False)["jsonl"]
    out = out.merge(jsonl.mean().rename("jsonl_share").reset_index(), on=by, how="left")
    out = out.merge(jsonl.size().rename("messages").reset_index(), on=by, how="left")
    out["messages_per_example"] = out.pop("messages") / out["n_examples"]
    # where the message comes in the conversation, for a reading order of the tables
    first = msgs.groupby(["task", "kind", "direction"], sort=False)["message"].median()
    out = out.merge(first.rename("position").reset_index(), on=["task", "kind", "direction"])
    out["overhead_share"] = (out["overhead"] / out["total"]).where(out["total"] > 0)
    out["top_overhead"] = out.apply(_top_overhead, axis=1) if len(out) else []
    out["run"] = out["system"] + "/" + out["variant"]
    diffs = ["total", "payload", "overhead", *OH_COLUMNS]
    for col in diffs:
        out[f"d_{col}"] = float("nan")
    if reference:
        ref = out[out["run"] == reference]
        if ref.empty:
            log.info("reference %s is not among the runs: no differences computed", reference)
        for _, r in ref.iterrows():
            same = (
                (out["task"] == r["task"])
                & (out["kind"] == r["kind"])
                & (out["direction"] == r["direction"])
            )
            for col in diffs:
                out.loc[same, f"d_{col}"] = out.loc[same, col] - r[col]
    out["top_d_overhead"] = out.apply(_top_difference, axis=1) if len(out) else []
    cols = [*RUN_KEYS, "run", "kind", "direction", "n_examples", "messages_per_example",
            "jsonl_share", "total", "payload", "overhead", "overhead_share", *OH_COLUMNS,
            "top_overhead", *(f"d_{c}" for c in diffs), "top_d_overhead"]  # fmt: skip
    out = out.sort_values(["task", "position", "kind", "direction", "system", "variant"],
                          kind="stable")  # fmt: skip
    return out[cols].reset_index(drop=True)


# --- markdown -------------------------------------------------------------------------


def _fmt(value) -> str:
    if isinstance(value, float):
        if value != value:
            return ""
        return f"{value:.1f}"
    return str(value)


def _md_table(df: pd.DataFrame, headers: Sequence[str] | None = None) -> str:
    headers = list(headers or df.columns)
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in df.itertuples(index=False):
        out.append("| " + " | ".join(_fmt(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(out)


def _nonzero_oh(df: pd.DataFrame) -> list[str]:
    return [c for c in OH_COLUMNS if (df[c].abs() > 0.05).any()]


def render_markdown(
    summary: pd.DataFrame,
    table: pd.DataFrame,
    runs: pd.DataFrame,
    *,
    tokenizer: str = "cl100k_base",
    reference: str | None = "freeform/default",
    detail_kinds: Iterable[str] = ("brief",),
) -> str:
    """Readable tables: the runs, each (task, kind, direction) side by side, line detail."""
    detail_kinds = set(detail_kinds)
    out = [f"# Token audit ({tokenizer} tokens per example)", ""]
    r = runs.assign(run=runs["system"] + "/" + runs["variant"])
    out += [_md_table(r[["task", "run", "n", "n_errors", "tokens_recorded_mean",
                         "tokens_audited_mean"]],
                      ["task", "run", "examples", "errors", "tokens recorded",
                       "tokens audited"]), ""]  # fmt: skip
    out.append(
        "payload: text values; overhead = total - payload, by source (`oh_*`, see "
        "`tersetalk.metrics.audit`); d_*: difference from "
        f"{reference or 'no reference'} (same task and message)."
    )
    for (task, kind, direction), g in summary.groupby(["task", "kind", "direction"], sort=False):
        oh = _nonzero_oh(g)
        cols = ["run", "jsonl_share", "messages_per_example", "total", "payload", "overhead",
                "overhead_share", *oh, "top_overhead"]  # fmt: skip
        heads = ["run", "JSONL", "msgs", "total", "payload", "overhead", "ovh %",
                 *(c[3:] for c in oh), "top overhead"]  # fmt: skip
        if g["d_total"].notna().any():
            cols += ["d_total", "d_payload", "d_overhead", "top_d_overhead"]
            heads += ["d total", "d payload", "d overhead", "top d overhead"]
        shown = g[cols].copy()
        shown["jsonl_share"] = (shown["jsonl_share"] * 100).map(lambda v: f"{v:.0f}%")
        shown["overhead_share"] = (shown["overhead_share"] * 100).map(
            lambda v: "" if v != v else f"{v:.0f}%"
        )
        shown["messages_per_example"] = shown["messages_per_example"].map(lambda v: f"{v:.2f}")
        out += ["", f"## {task} · {kind} {direction}", "", _md_table(shown, heads)]
        if kind in detail_kinds:
            t = table[(table["task"] == task) & (table["kind"] == kind)
                      & (table["direction"] == direction)].copy()  # fmt: skip
            t["run"] = t["system"] + "/" + t["variant"]
            t["order"] = t["part"].map(_PART_ORDER).fillna(len(_PART_ORDER))
            t = t.sort_values(["system", "variant", "format", "order", "tag"], kind="stable")
            t["top_overhead"] = t.apply(_top_overhead, axis=1) if len(t) else []
            cols = ["run", "format", "tag", "part", "lines_per_example", "total", "payload",
                    "overhead", "top_overhead"]  # fmt: skip
            heads = ["run", "format", "tag", "part", "lines", "total", "payload", "overhead",
                     "top overhead"]  # fmt: skip
            out += ["", f"### per line: {task} · {kind} {direction}", "", _md_table(t[cols], heads)]
    return "\n".join(out) + "\n"
