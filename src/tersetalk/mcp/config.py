"""The proxy's settings: one YAML or TOML file, validated before the proxy starts.

Every knob has a default, so the file is optional and may set only what it changes::

    budget: null            # tokens per tool result; null = lossless (nothing left out)
    tokenizer: o200k_base   # what tokens are counted in
    max_result_chars: 1000000   # larger results pass through untouched (no dedup either)
    page_tokens: 25000      # a result over this many tokens is sent a page at a time; null: never
    edit_safe: true         # text a client may quote back (file reads, diffs) passes as it came
    hints:
      metadata: true        # '> [query: ... | total=N | returned=M]' on a page of a set
      near_ref: false       # '> [near-ref: h, key: a→b]' for a body equal but a few scalars
    dedup:
      enabled: true
      lru_size: 5           # earlier results a reference hint may point at
      min_body_chars: 200   # shorter results are never replaced by a hint
      write_tools: []       # tools that change what other tools read (invalidate)
      resource_args: [path, repo_path, file, uri, table, table_name]
      compact_every: 0      # a compaction boundary every N calls (0: never)
    retrieval:
      keep: 32              # results whose elided parts tersetalk_get can return
    tools:                  # per-tool overrides
      write_query: {write: true}
      read_query: {budget: 800}
      read_text_file: {encode: true}   # re-encode it although edit_safe keeps it as it came

``edit_safe`` and ``encode`` decide, per tool, whether its structured results are
re-encoded (:mod:`tersetalk.mcp.editsafe`; ``tersetalk mcp-proxy --explain`` shows each
tool's decision): ``encode`` unset lets the tool's name, annotations and description
decide, ``true`` or ``false`` overrides them.

A tool is write-class if it is named in ``dedup.write_tools``, has ``write: true``, or
its MCP annotations say ``readOnlyHint: false``; before a write-class call runs, every
cached result that shares a resource with it (the values of its ``resource_args``) is
forgotten, and a write with no resource argument forgets them all.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tersetalk.core.io import load_yaml_text
from tersetalk.core.tokens import ENCODINGS


class ProxyConfigError(ValueError):
    """The proxy's config file is missing, unreadable or invalid; the message says what."""


class _RefusedYAML(yaml.YAMLError):
    """A settings file refused by :func:`tersetalk.core.io.load_yaml_text` (too deep, or
    aliases that expand too far), caught where any other YAML error is."""


def read_yaml(text: str) -> Any:
    """``yaml.safe_load`` of a settings file through the workflow's bounded loader
    (:func:`tersetalk.core.io.load_yaml_text`: its nesting and alias limits); anything past
    them is a :class:`yaml.YAMLError` saying so."""
    return load_yaml_text(text, "the document", error=_RefusedYAML)


def read_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads``, with a document nested too deeply for its parser refused as a
    :class:`tomllib.TOMLDecodeError`."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError(
            "nested too deeply to read; settings are a few levels deep, so write them out flat"
        ) from None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Hints(_Strict):
    metadata: bool = True
    near_ref: bool = False
    #: near-ref only for bodies at least this long, and when the changed values (old and
    #: new, as compact JSON) add up to at most this many bytes
    near_ref_min_body_chars: int = Field(500, ge=1)
    near_ref_max_delta_chars: int = Field(50, ge=1)


class Dedup(_Strict):
    enabled: bool = True
    lru_size: int = Field(5, ge=1, le=100_000)
    min_body_chars: int = Field(200, ge=0)
    write_tools: tuple[str, ...] = ()
    resource_args: tuple[str, ...] = ("path", "repo_path", "file", "uri", "table", "table_name")
    compact_every: int = Field(0, ge=0)


class Retrieval(_Strict):
    keep: int = Field(32, ge=1, le=100_000)


class ToolOverride(_Strict):
    budget: int | None = Field(None, ge=1)
    dedup: bool | None = None
    write: bool | None = None
    #: None: decided by edit_safe from what the server says of the tool; true/false: this
    encode: bool | None = None
    resource_args: tuple[str, ...] | None = None


class ProxyConfig(_Strict):
    budget: int | None = Field(None, ge=1)
    #: budget mode never costs a session more than lossless (session.py: the budget
    #: rule): a budgeted text goes only when it and fetching all it leaves out cost at
    #: most what lossless sends. False: the budget caps every result, and fetching what
    #: it leaves out may cost more than lossless would have sent
    budget_within_lossless: bool = True
    tokenizer: str = "o200k_base"
    max_result_chars: int = Field(1_000_000, ge=1)
    #: a result (or a tersetalk_get answer) over this many tokens is sent a page at a time,
    #: each page naming the tersetalk_get call for the next; None: never paged
    page_tokens: int | None = Field(25_000, ge=200)
    #: the results of a tool a client may quote back (file reads, diffs) pass byte-exact
    edit_safe: bool = True
    #: the knapsack's sampled search (tersetalk.formats.solver.solve): a list of more
    #: than twice this many items is given up once this many, extrapolated, cost more
    #: than a whole format such as a table, and no object below the root is weighed as
    #: TOON; None: the exact search (slower on long lists and large objects)
    search_sample: int | None = Field(16, ge=1)
    #: count long results (and weigh a long array's first rows) in a helper process on
    #: another core (about 100 MB of memory; tersetalk.core.counter); False: in the proxy
    count_helper: bool = True
    hints: Hints = Hints()
    dedup: Dedup = Dedup()
    retrieval: Retrieval = Retrieval()
    tools: dict[str, ToolOverride] = {}

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str) -> str:
        if value not in ENCODINGS:
            raise ValueError(f"use one of {', '.join(ENCODINGS)}")
        return value

    def tool(self, name: str) -> ToolOverride:
        return self.tools.get(name, ToolOverride())

    def budget_for(self, name: str) -> int | None:
        own = self.tool(name).budget
        return own if own is not None else self.budget

    def dedup_for(self, name: str) -> bool:
        own = self.tool(name).dedup
        return self.dedup.enabled if own is None else own

    def resource_args_for(self, name: str) -> tuple[str, ...]:
        own = self.tool(name).resource_args
        return self.dedup.resource_args if own is None else own


def load(path: str | Path | None) -> ProxyConfig:
    """The config in ``path`` (.yaml/.yml/.toml), or the defaults for None."""
    if path is None:
        return ProxyConfig()
    p = Path(path)
    if not p.is_file():
        raise ProxyConfigError(f"{p}: no such config file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProxyConfigError(f"{p}: cannot read it ({exc})") from None
    raw: Any
    try:
        if p.suffix == ".toml":
            raw = read_toml(text)
        elif p.suffix in (".yaml", ".yml"):
            raw = read_yaml(text)
        else:
            raise ProxyConfigError(f"{p}: give a .yaml, .yml or .toml file")
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ProxyConfigError(f"{p}: not valid {p.suffix[1:].upper()}: {exc}") from None
    return parse(raw if raw is not None else {}, str(p))


def parse(raw: Any, where: str = "config") -> ProxyConfig:
    if not isinstance(raw, dict):
        raise ProxyConfigError(f"{where}: the top level must be a mapping of settings")
    try:
        return ProxyConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()
        )
        raise ProxyConfigError(f"{where}: {problems}") from None


def json_schema() -> dict[str, Any]:
    """The file's JSON Schema (``tersetalk mcp-proxy --print-schema``)."""
    return ProxyConfig.model_json_schema()
