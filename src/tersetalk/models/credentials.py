"""Credentials never travel inside a server URL.

Kept apart from :mod:`tersetalk.models` so the backends can check a URL without
importing the package that imports them.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit, urlunsplit

from .base import ModelError

__all__ = ["SECRET_QUERY_KEYS", "check_base_url", "redact_url", "refused_key_message"]

#: query parameters that carry a secret (compared lower-case, without ``-`` and ``_``)
SECRET_QUERY_KEYS = frozenset(
    {"apikey", "key", "token", "accesstoken", "authtoken", "auth", "authorization",
     "password", "passwd", "pwd", "secret", "clientsecret", "sig", "signature", "xapikey"}
)  # fmt: skip


def redact_url(url: str) -> str:
    """``url`` with any user info and query replaced by ``***``, safe to print or log."""
    parts = urlsplit(url)
    _userinfo, at, host = parts.netloc.rpartition("@")  # host[:port], never parsed further
    netloc = f"***@{host}" if at else host
    query = "***" if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def check_base_url(url: str | None, where: str = "models.base_url") -> None:
    """Refuse a server URL that carries credentials, like a literal ``api_key``.

    ``http://user:KEY@host`` or ``...?api_key=KEY`` would be copied, as the server's
    identity, into run specs (every job's command line), result metadata, the call
    cache's keys and entries, and the logs. The message never repeats the secret.
    """
    if not url:
        return
    try:
        parts = urlsplit(str(url))
        has_userinfo = bool(parts.username or parts.password)
    except ValueError as exc:  # e.g. an unparsable port
        raise ModelError(
            f"{where}: not a valid URL ({exc}); e.g. http://127.0.0.1:8000/v1"
        ) from None
    secret_params = sorted(
        {name for name, _ in parse_qsl(parts.query, keep_blank_values=True)
         if name.lower().replace("-", "").replace("_", "") in SECRET_QUERY_KEYS}
    )  # fmt: skip
    if not (has_userinfo or secret_params):
        return
    what = (
        "a user name or password before '@'"
        if has_userinfo
        else f"the query parameter(s) {', '.join(secret_params)}"
    )
    env_key = "models.api_key_env" if where.startswith("models.") else "api_key_env"
    raise ModelError(
        f"{where} ({redact_url(str(url))}) carries credentials in {what}: a URL is copied "
        "into run specs, job command lines, result metadata, the call cache and the logs, "
        f"so keys never go in it. Remove them from the URL, set {env_key} to the name of "
        "an environment variable (e.g. OPENAI_API_KEY) and export OPENAI_API_KEY=<your key>; "
        "the key is then sent as a Bearer token"
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
    if key:
        detail = detail.replace(key, "***")
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
