"""Reading configuration files: YAML in, a mapping or a validated Pydantic model out.

Why one loader: the workflow config, the mediator's file and MSP's file are all YAML
that a person edits by hand, and all must fail the same way, at startup, with the
file, the key, what is wrong and what to write instead. Each caller keeps its own
error type and words ("mediator config file ...", "invalid MSP configuration"), so
its messages and the tests that match on them stay as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from tersetalk.core.io import load_yaml_text


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key and the fix (raised by
    :mod:`tersetalk.pipeline.config` and by every reader of a config section, whatever its
    floor)."""


class UnknownNameError(ConfigError, KeyError):
    """A task, system or variant name that is not registered or configured; the message
    lists the valid ones. A :class:`ConfigError` (a command says it in one line) and a
    ``KeyError`` (what a lookup by name raises), printed without KeyError's quotes."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


__all__ = ["UnknownNameError", "describe_errors", "load_model", "read_yaml"]

M = TypeVar("M", bound=BaseModel)


def read_yaml(
    path: str | Path,
    *,
    what: str,
    error: type[Exception],
    expect: str = "a mapping of settings",
) -> dict[str, Any]:
    """One YAML file as a mapping (an empty file is ``{}``).

    Every failure raises ``error`` with a message that starts with ``what`` and the
    path: ``<what> <path> not found``, ``... is not valid YAML: <parser message>`` (the
    parser names line and column), ``...: expected <expect>, got <type>``.
    """
    path = Path(path)
    if not path.is_file():
        raise error(f"{what} {path} not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {path} is not UTF-8 text ({exc.reason}); save it as UTF-8") from None
    except OSError as exc:
        raise error(f"{what} {path} cannot be read: {exc.strerror}") from None
    try:
        data = load_yaml_text(text, f"{what} {path}", error)
    except yaml.YAMLError as exc:
        raise error(f"{what} {path} is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(f"{what} {path}: expected {expect}, got {type(data).__name__}")
    return data


def describe_errors(
    exc: ValidationError,
    where: str,
    *,
    fixes: Mapping[str, str] | None = None,
    example: str | None = None,
) -> list[str]:
    """One line per problem: ``<where> key '<a.b.c>': <what is wrong> (got <value>); <fix>``.

    ``fixes`` maps a field name to what to write instead; ``example`` is the file to
    look at for a key that does not exist.
    """
    fixes = fixes or {}
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<top level>"
        field = str(err["loc"][-1]) if err["loc"] else ""
        got = err.get("input")
        line = f"{where} key '{loc}': {err['msg']}"
        if err["type"] != "missing" and not isinstance(got, dict):
            line += f" (got {got!r})"
        if err["type"] == "extra_forbidden":
            line += "; remove or rename it" + (f" (see {example})" if example else "")
        elif field in fixes:
            line += f"; fix: {fixes[field]}"
        lines.append(line)
    return lines


def load_model(
    data: Mapping[str, Any] | None,
    model: type[M],
    *,
    where: str,
    error: type[Exception],
    title: str,
    fixes: Mapping[str, str] | None = None,
    example: str | None = None,
) -> M:
    """Validate ``data`` as ``model``; a failure raises ``error`` listing every problem.

    The message is ``<title>:`` followed by one indented line per problem (see
    :func:`describe_errors`), so a person fixes them all in one go.
    """
    try:
        return model.model_validate(dict(data or {}))
    except ValidationError as exc:
        lines = describe_errors(exc, where, fixes=fixes, example=example)
        raise error(f"{title}:\n  " + "\n  ".join(lines)) from None
