"""Credentials never travel inside a server URL, and never out of an error message.

Kept apart from :mod:`tersetalk.models` so the backends can check a URL without
importing the package that imports them.

A URL is refused by rule rather than by a list of known parameter names: user info,
any query parameter whose name looks like it names a secret, a path segment or query
value that looks like a key, and a fragment. :func:`mask_secrets` is the one place
where what a server said is cleaned before it is quoted in an error, a log line or a
run record.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from .base import ModelEnvironmentError

__all__ = [
    "PLACEHOLDER_KEYS",
    "SECRET_NAME_PARTS",
    "check_base_url",
    "looks_like_key",
    "mask_secrets",
    "redact_url",
    "refused_key_message",
]

#: parts of a query parameter's name that say it carries a secret (case-insensitive,
#: anywhere in the name: ``key[]``, ``X-Amz-Signature``, ``private_token``)
SECRET_NAME_PARTS = (
    "key", "token", "secret", "signature", "sig", "code", "auth", "bearer", "password",
    "pass", "credential", "session",
)  # fmt: skip

#: the api_key values the backends send when none is configured: not secrets
PLACEHOLDER_KEYS = frozenset({"not-needed", "ollama"})

_SECRET_NAME = re.compile("|".join(SECRET_NAME_PARTS), re.IGNORECASE)

#: well-known key formats: OpenAI-style ``sk-``, GitHub, Slack, GitLab, Hugging Face,
#: Groq, Replicate, Perplexity, AWS and Google keys, JSON web tokens
_KEY_FORMATS = (
    r"(?:sk|pk|rk)[-_][A-Za-z0-9_\-]{8,}",
    r"gh[pousr]_[A-Za-z0-9]{16,}",
    r"github_pat_[A-Za-z0-9_]{16,}",
    r"xox[abposr]-[A-Za-z0-9\-]{8,}",
    r"glpat-[A-Za-z0-9_\-]{16,}",
    r"(?:hf|gsk|r8)_[A-Za-z0-9]{16,}",
    r"pplx-[A-Za-z0-9]{16,}",
    r"AKIA[0-9A-Z]{16}",
    r"AIza[0-9A-Za-z_\-]{30,}",
    r"eyJ[A-Za-z0-9_\-]{10,}(?:\.[A-Za-z0-9_\-]*)*",
)
_KEY_FORMAT = re.compile(r"(?<![A-Za-z0-9_\-])(?:" + "|".join(_KEY_FORMATS) + ")")
#: a run of 20+ letters and digits mixing upper case, lower case and digits, or 40+ hex
_MIXED_RUN = re.compile(r"[A-Za-z0-9]{20,}")
_HEX_RUN = re.compile(r"[0-9a-fA-F]{40,}")
#: ``Bearer <token>`` / ``Basic <credentials>`` as an Authorization header carries them
_SCHEME_TOKEN = re.compile(r"(?i)\b(bearer|basic)(\s+)(?!\*\*\*)[A-Za-z0-9\-._~+/=:]{8,}")
#: a header or field that carries a key, echoed with its value (``x-api-key: ...``)
_KEY_FIELD = re.compile(
    r"(?i)((?:x-)?api[-_]?key|x-goog-api-key|(?:proxy-)?authorization)"
    r"([\"']?\s*[:=]\s*[\"']?)(?!(?:bearer|basic)\b|\*\*\*)([^\s\"',;}]+)"
)


def looks_like_key(text: str) -> bool:
    """Whether ``text`` (a path segment or a query value) looks like a key: a well-known
    key format (``sk-...``, ``ghp_...``, ``xoxb-...``, ...), a run of 20 or more letters
    and digits mixing upper case, lower case and digits, or 40 or more hex digits.

    Names of models (``Meta-Llama-3.1-8B-Instruct``), versions, UUIDs and account ids
    of 32 hex digits do not.
    """
    text = unquote(text)
    if _KEY_FORMAT.search(text) or _HEX_RUN.search(text):
        return True
    return any(
        re.search("[a-z]", run) and re.search("[A-Z]", run) and re.search("[0-9]", run)
        for run in _MIXED_RUN.findall(text)
    )


def mask_secrets(text: str, *keys: str | None) -> str:
    """``text`` with every secret replaced by ``***``: the ``keys`` given (the configured
    API key), bearer and basic credentials, values of key-carrying headers or fields,
    and tokens in well-known key formats.

    What a server or a proxy says in an error body is quoted in error messages, logs,
    events and the ``error`` column of run records; some echo the request's headers,
    the Authorization header included.
    """
    for key in keys:
        if key and len(key) >= 4 and key not in PLACEHOLDER_KEYS:
            text = text.replace(key, "***")
    text = _SCHEME_TOKEN.sub(r"\1\2***", text)
    text = _KEY_FIELD.sub(r"\1\2***", text)
    return _KEY_FORMAT.sub("***", text)


def redact_url(url: str) -> str:
    """``url`` with any user info, query, fragment and key-like path segment replaced
    by ``***``, safe to print or log."""
    parts = urlsplit(url)
    _userinfo, at, host = parts.netloc.rpartition("@")  # host[:port], never parsed further
    netloc = f"***@{host}" if at else host
    path = "/".join("***" if looks_like_key(seg) else seg for seg in parts.path.split("/"))
    query = "***" if parts.query else ""
    return urlunsplit((parts.scheme, netloc, path, query, "***" if parts.fragment else ""))


def _credential_parts(url: str) -> list[str]:
    """What in ``url`` carries, or may carry, a credential, in words (empty: nothing)."""
    parts = urlsplit(url)
    found: list[str] = []
    if "@" in parts.netloc:
        found.append("a user name or password before '@'")
    query = parse_qsl(parts.query, keep_blank_values=True)
    names = sorted({n for n, _ in query if _SECRET_NAME.search(n)})
    if names:
        found.append(f"the query parameter(s) {', '.join(names)} (a name that says secret)")
    valued = sorted({n for n, v in query if n not in names and looks_like_key(v)})
    if valued:
        found.append(f"the value of the query parameter(s) {', '.join(valued)} (a key)")
    if any(looks_like_key(seg) for seg in parts.path.split("/")):
        found.append("a path segment that looks like a key")
    if "#" in url:
        found.append("a fragment after '#' (never sent to a server; tokens travel there)")
    return found


def check_base_url(url: str | None, where: str = "models.base_url") -> None:
    """Refuse a server URL that carries credentials, like a literal ``api_key``.

    ``http://user:KEY@host``, ``...?api_key=KEY``, ``.../sk-KEY/v1`` or ``...#token=KEY``
    would be copied, as the server's identity, into run specs (every job's command
    line), result metadata, the call cache's keys and entries, and the logs. Refused by
    rule (see :func:`_credential_parts`), with a :class:`ModelEnvironmentError` that
    never repeats the secret.
    """
    if not url:
        return
    try:
        urlsplit(str(url)).port  # noqa: B018 - raises on an unparsable port
        found = _credential_parts(str(url))
    except ValueError as exc:
        raise ModelEnvironmentError(
            f"{where}: not a valid URL ({exc}); e.g. http://127.0.0.1:8000/v1"
        ) from None
    if not found:
        return
    env_key = "models.api_key_env" if where.startswith("models.") else "api_key_env"
    raise ModelEnvironmentError(
        f"{where} ({redact_url(str(url))}) carries credentials in {'; '.join(found)}: a URL "
        "is copied into run specs, job command lines, result metadata, the call cache and "
        "the logs, so keys never go in it. Remove them from the URL and put the key in the "
        f"environment variable named by {env_key} (e.g. set {env_key}: OPENAI_API_KEY and "
        "export OPENAI_API_KEY=<your key>); the key is then sent as a Bearer token"
    )


def refused_key_message(
    where: str,
    api_key_env: str | None,
    status: int,
    detail: str,
    example_env: str,
    key: str | None = None,
) -> str:
    """What to do about a refused key (HTTP 401/403): name the variable it came from, or
    say that none is set and how to set one (``example_env``, e.g. ``OPENAI_API_KEY``).

    The server's own words are quoted with ``key`` masked: some proxies echo the key
    they refuse, and this message goes to the logs and the terminal.
    """
    detail = mask_secrets(detail, key)
    said = f"HTTP {status}: {detail[:200]}"
    if api_key_env:
        return (
            f"{where}: the server refused the API key ({said}). The key is read from the "
            f"environment variable {api_key_env} (models.api_key_env): check that it holds "
            f"a valid key for this server, e.g. export {api_key_env}=<your key>"
        )
    return (
        f"{where}: the server wants an API key ({said}) and none is set "
        "(models.api_key_env is not set): set models.api_key_env to the name of an "
        f"environment variable, e.g. {example_env}, and export {example_env}=<your key>"
    )
