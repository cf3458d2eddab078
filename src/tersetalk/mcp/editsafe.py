"""Which tools' results the proxy may re-encode: edit-safe by default.

An agent quotes back what it read: the ``oldText`` of an edit is copied from a file it
read, a hunk from a diff it was shown. Re-encoding such text (a Markdown table of a
README, a ``package.json``, a Python file that is one big literal) breaks the edit
("Could not find exact match"), however exactly the encoding decodes. So the text of a
tool whose results a client may quote back passes byte-exact unless the config opts in,
and structured data (JSON, Python literals, tables out of a database) is re-encoded.

The decision is per tool, from what the server says of it when it lists its tools and
from the config, in this order:

1. ``tools.<name>.encode`` in the config: ``true`` re-encodes, ``false`` never does.
2. ``edit_safe: false`` in the config: every tool's structured results are re-encoded.
3. The tool's name or its annotations' title says it returns a diff, a patch or a blame
   (``git_diff_staged``), or that it reads a file's text (a reading verb and a noun such
   as file, source, code, content: ``read_text_file``, ``get_file_contents``), but not
   a listing or metadata (``get_file_info``, ``list_files``).
4. Its description says so: "contents of a file", "file's contents", "source code",
   "diff", "patch".

Anything else is re-encoded where its output is JSON, a Python literal or Markdown with
tables; all other text passes as it came whatever the decision (the pipeline touches
only those three), and a result that looks like a diff is never re-encoded.
The annotations' ``readOnlyHint`` and ``destructiveHint`` are shown beside the decision
(``tersetalk mcp-proxy --explain``); a tool the proxy never saw listed is decided from
its name alone. A byte-exact tool still takes part in dedup: a result byte-identical to
an earlier one of the session becomes a reference naming the ``tersetalk_get`` call
that returns it (``tools.<name>.dedup: false`` turns that off too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tersetalk.mcp.config import ProxyConfig

#: name words that make a tool's output a diff (quoted back hunk by hunk)
DIFF_WORDS = frozenset({"diff", "diffs", "patch", "patches", "blame"})
#: verbs of a tool that reads something out
READ_VERBS = frozenset({"read", "get", "cat", "view", "open", "show", "head", "tail", "print",
                        "load", "dump"})  # fmt: skip
#: what such a verb reads when the result is text a client may quote back
TEXT_NOUNS = frozenset({"file", "files", "source", "sources", "code", "document", "documents",
                        "blob", "content", "contents", "text", "snippet", "lines",
                        "notebook"})  # fmt: skip
#: words that make a reading tool's output a listing or metadata, not the text itself
LISTING_WORDS = frozenset({"info", "metadata", "meta", "stat", "stats", "list", "tree", "search",
                           "find", "size", "sizes", "status", "exists", "count", "names",
                           "directory", "directories", "dir", "dirs"})  # fmt: skip
_DESCRIPTION = re.compile(
    r"contents? of (?:an? |the |one or more |multiple |several |each |that |this )?"
    r"(?:text |source |single )?(?:files?|commits?|blobs?|documents?)\b"
    r"|\bfiles?'s? (?:contents?|text)\b"
    r"|\b(?:reads?|returns?|shows?|gets?|prints?|outputs?) (?:the )?(?:\w+ )?files?'? contents?\b"
    r"|\bsource code\b|\bdiffs?\b|\bpatch(?:es)?\b",
    re.IGNORECASE,
)
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


@dataclass(frozen=True)
class Decision:
    """Whether a tool's structured results are re-encoded, and why (one line)."""

    tool: str
    encode: bool
    why: str
    hints: str = ""  # the annotations' read-only and destructive hints, as shown

    @property
    def label(self) -> str:
        return "re-encoded" if self.encode else "byte-exact"


def words(name: str) -> list[str]:
    """A tool name's words, lower case: ``readTextFile`` and ``read_text_file`` alike."""
    return [w.lower() for w in _WORDS.findall(name or "")]


def _field(annotations: Any, key: str, alias: str) -> Any:
    if annotations is None:
        return None
    if isinstance(annotations, dict):
        return annotations.get(key, annotations.get(alias))
    return getattr(annotations, key, None)


def _hints(annotations: Any) -> str:
    shown = []
    for key, alias in (("read_only_hint", "readOnlyHint"), ("destructive_hint", "destructiveHint")):
        value = _field(annotations, key, alias)
        if value is not None:
            shown.append(f"{alias}={str(value).lower()}")
    return ", ".join(shown)


def quote_back_reason(name: str, description: str | None = None,
                      annotations: Any = None) -> str | None:  # fmt: skip
    """Why a tool's results are text a client may quote back, or None if nothing says so."""
    title = _field(annotations, "title", "title")
    for label, text in (("name", name), ("title", title)):
        w = set(words(text or ""))
        if not w:
            continue
        diff = sorted(w & DIFF_WORDS)
        if diff:
            return f"its {label} says it returns a {diff[0]}"
        if w & READ_VERBS and w & TEXT_NOUNS and not w & LISTING_WORDS:
            return f"its {label} says it reads a file's text"
    m = _DESCRIPTION.search(description or "")
    if m is not None:
        return f"its description says {m.group(0)!r}"
    return None


def decide(config: ProxyConfig, name: str, description: str | None = None,
           annotations: Any = None) -> Decision:  # fmt: skip
    """The decision for one tool (see the module's docstring for the order)."""
    hints = _hints(annotations)
    own = config.tools[name].encode if name in config.tools else None
    if own is not None:
        return Decision(name, own, f"the config sets tools.{name}.encode: {str(own).lower()}",
                        hints)  # fmt: skip
    if not config.edit_safe:
        return Decision(name, True, "edit_safe is off in the config: structured results are "
                        "re-encoded whatever the tool", hints)  # fmt: skip
    why = quote_back_reason(name, description, annotations)
    if why is not None:
        return Decision(name, False, f"{why}: a client may quote it back in an edit",
                        hints)  # fmt: skip
    return Decision(name, True, "nothing says a client quotes it back: JSON, Python "
                    "literals and Markdown tables in it are re-encoded", hints)  # fmt: skip


def decide_tool(config: ProxyConfig, tool: Any) -> Decision:
    """:func:`decide` for an MCP ``Tool`` as the downstream listed it."""
    return decide(config, tool.name, tool.description, tool.annotations)


def explain_lines(server: str, version: str | None, decisions: list[Decision],
                  config: ProxyConfig, own_tool: str) -> list[str]:  # fmt: skip
    """What ``tersetalk mcp-proxy --explain`` prints: a header, then one line per tool."""
    state = "on" if config.edit_safe else "off"
    head = (f"server {server!r}{' ' + version if version else ''}: {len(decisions)} tool(s); "
            f"edit_safe is {state}; byte-exact: results pass as they came (dedup references "
            "aside); tools.<name>.encode: true or false in the config overrides "
            "a line")  # fmt: skip
    width = max([len(d.tool) for d in decisions] + [len(own_tool)])
    lines = [head]
    for d in decisions:
        extra = f" [{d.hints}]" if d.hints else ""
        lines.append(f"{d.tool:<{width}}  {d.label:<10}  {d.why}{extra}")
    lines.append(f"{own_tool:<{width}}  {'added':<10}  the proxy's own tool: returns what a "
                 "reference or an elision names")  # fmt: skip
    return lines
