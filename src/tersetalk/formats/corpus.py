"""The tool-response corpus of the format study: real JSON bodies and Markdown documents.

``data/toolresponses/json.jsonl`` holds 135 GitHub REST API response bodies with their
request and shape label; ``markdown.jsonl`` 29 Markdown documents holding 139 GFM
tables. See that folder's README for provenance and licences.

``data/mastodon/json.jsonl`` is the held-out set of the nested-record encoders:
134 Mastodon API response bodies (nested objects in arrays, HTML strings,
optional keys) recorded by Mastodon.py's test suite; its checksum is registered in
:data:`SHA256` and checked whenever it is loaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tersetalk.core.io import file_sha256
from tersetalk.formats.tree import Node, Table, parse_json, parse_markdown, walk

KINDS = ("json", "markdown")
_FILES = {"json": "json.jsonl", "markdown": "markdown.jsonl"}

#: sha256 of shipped corpus files, by ``<folder>/<file>``: a file registered here is
#: checked before it is read (the held-out set's numbers are quoted in the README)
SHA256 = {
    "mastodon/json.jsonl": "350e6fd124d25ee0554d274e313c84dac115a01f40a2578a14f4c98c3f01a161",
}


class CorpusError(ValueError):
    """A corpus file that is missing or has a malformed line (the message names both)."""


@dataclass(frozen=True)
class Payload:
    """One payload as a tool returns it.

    ``text``: JSON bodies pretty-printed (indent 2, as APIs and tools usually return
    them), Markdown as is; ``value``: the JSON body (None for Markdown).
    """

    id: str
    kind: str  # json | markdown
    shape: str  # json: the corpus's shape label; markdown: "markdown"
    source: str
    where: str  # json: the request ("GET /repos/..."); markdown: the file path
    text: str
    value: Any = None

    def tree(self) -> Node:
        return parse_json(self.text) if self.kind == "json" else parse_markdown(self.text)


def _check_sha256(path: Path) -> None:
    want = SHA256.get(f"{path.parent.name}/{path.name}")
    if want is None:
        return
    got = file_sha256(path)
    if got != want:
        raise CorpusError(
            f"checksum mismatch for {path}: got {got}, expected {want}; rebuild it with "
            f"the build.py beside it (see {path.parent / 'README.md'}) or restore the "
            "shipped file"
        )


def _lines(path: Path):
    if not path.exists():
        raise CorpusError(f"corpus file {path} does not exist; see data/toolresponses/README.md")
    _check_sha256(path)
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(f"{path}, line {n}: not JSON ({exc})") from exc
            if not isinstance(rec, dict):
                raise CorpusError(f"{path}, line {n}: expected a JSON object")
            yield n, rec


def load_corpus(data_dir: str | Path = "data/toolresponses", kinds=KINDS) -> list[Payload]:
    """The corpus's payloads in file order (JSON first), deterministic."""
    data_dir = Path(data_dir)
    out: list[Payload] = []
    for kind in kinds:
        if kind not in _FILES:
            raise CorpusError(f"unknown payload kind {kind!r}; use {' or '.join(KINDS)}")
        path = data_dir / _FILES[kind]
        for n, rec in _lines(path):
            need = ("id", "shape", "body") if kind == "json" else ("id", "text")
            missing = [k for k in need if k not in rec]
            if missing:
                raise CorpusError(f"{path}, line {n}: missing {', '.join(missing)}")
            if kind == "json":
                out.append(
                    Payload(
                        rec["id"],
                        "json",
                        rec["shape"],
                        rec.get("source", ""),
                        rec.get("request", ""),
                        json.dumps(rec["body"], indent=2, ensure_ascii=False),
                        rec["body"],
                    )
                )
            else:
                out.append(
                    Payload(
                        rec["id"],
                        "markdown",
                        "markdown",
                        rec.get("repo", ""),
                        rec.get("path", ""),
                        rec["text"],
                    )
                )
    return out


def markdown_tables(payload: Payload) -> list[Table]:
    """The GFM tables of a Markdown payload, in document order."""
    if payload.kind != "markdown":
        return []
    return [n for n in walk(payload.tree()) if isinstance(n, Table)]
