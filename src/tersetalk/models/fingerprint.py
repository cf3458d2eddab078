"""What a model *is*, for the call cache and the run records: a fingerprint of its weights.

Why: the call cache used to key on where a model lives (the server's URL, or the GGUF
file's name and size). The same model behind another address then missed every entry,
and new weights served under an old name (``ollama pull`` of a retagged model, a file
replaced in place) hit the old answers. A fingerprint names the model itself, where
something identifies it:

=============  ===============================  =============================================
kind           value                            how it is obtained
=============  ===============================  =============================================
file-sha256    ``sha256:<hex>``                 the GGUF file's sha256: the embedded model's
                                                ``describe()["model_path"]``, or the file a
                                                server on this machine (loopback) says it
                                                loaded (llama.cpp's ``/props`` model_path,
                                                llama-cpp-python's model id when it is a path,
                                                vLLM's ``root``). Memoised, see below.
ollama-digest  ``ollama:<digest>``              Ollama's digest of the model (``/api/tags``):
                                                a hash of its manifest (weights, template,
                                                parameters)
server-report  ``report:<hex>``                 sha256 of what an OpenAI-compatible server
                                                says about the weights in ``GET /v1/models``:
                                                the model's id and ``owned_by`` with llama.cpp's
                                                ``meta`` (parameters, size, vocabulary; not the
                                                slot ``n_ctx``, a serving setting) or vLLM's
                                                ``root``/``parent``. The server's word, not a
                                                content hash. ``created`` is left out: vLLM and
                                                llama.cpp's server stamp each listing with the
                                                time of the request.
script         ``script:<hex>``                 the scripted test double: sha256 of its list of
                                                answers, or of its responder's source code (not
                                                of the responder's state); with the double's name
declared       ``declared:<text>``              nothing above could be had and the config
                                                declares what the model is: ``models.key`` (its
                                                results folder) with ``models.fingerprint`` (text
                                                the user changes whenever the weights change)
weak           ``weak:<backend>:<model>@<at>``  nothing above could be had (the server lists the
                                                model with nothing but its id, it has no
                                                listing, the file cannot be read) and the config
                                                allows it (``models.allow_weak_identity: true``):
                                                the key stays the model's name and address, and
                                                the row says why in ``model_fingerprint_source``
=============  ===============================  =============================================

A client built from a config (:func:`tersetalk.models.make_client`) carries that
config's :class:`IdentityPolicy`: with nothing identifying the weights, no declared
fingerprint and no opt-in, :func:`model_fingerprint` raises :class:`ModelIdentityError`
saying how to declare one, so no run files results or cached answers under a name that
may stand for other weights tomorrow. A configured model name the server does not list
in ``GET /v1/models`` is a :class:`ModelIdentityError` naming the listed ones (servers
such as llama-cpp-python's answer any name with whatever model they have loaded).
``python -m tersetalk.models.llamacpp_server`` lists each served file's ``sha256`` in
``GET /v1/models``; a 64-digit hex ``sha256`` there is read as the file's digest.

The cache key's ``client`` part is :attr:`Fingerprint.identity`: ``{"backend",
"fingerprint"}`` for the first three kinds and the declared one (the model's name and
address left out, so the same weights hit under any name and at any address; the backend
kept, since another serving stack may answer differently), ``{"backend", "model",
"fingerprint"}`` for the scripted double (it has no weights: its name and script are
what it is), and for the weak kind exactly the identity the cache used before
fingerprints, so those entries still hit.

Hashing a GGUF costs about 0.12 s per 100 MB here (the embedded SmolLM2, 98 MB, from
the page cache), once per job; with a cache folder the digest is memoised in a small
sidecar file per (resolved path, size, mtime_ns, inode) under ``<cache>/fingerprints/``
(named ``*.sha256``, so tools that read ``*/*.json`` cache entries never see one), and
a file changed in place or replaced gets a new sidecar and is hashed again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import ipaddress
import json
import logging
import os
import sys
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from tersetalk.core.io import file_sha256 as bytes_sha256

from .base import (
    ModelClient,
    ModelEnvironmentError,
    ModelError,
    ModelIdentityError,
    ModelUnavailableError,
)

__all__ = [
    "FINGERPRINT_DIR",
    "KINDS",
    "Fingerprint",
    "IdentityPolicy",
    "address_identity",
    "file_sha256",
    "model_fingerprint",
]

log = logging.getLogger(__name__)

#: the kinds of fingerprint, strongest first
KINDS = ("file-sha256", "ollama-digest", "server-report", "script", "declared", "weak")

#: the folder, inside a call-cache folder, of the memoised file digests
FINGERPRINT_DIR = "fingerprints"

#: fields of llama.cpp's ``meta`` that are serving settings, not properties of the weights
_SERVING_META = ("n_ctx",)


@dataclass(frozen=True)
class Fingerprint:
    """A model's fingerprint: ``kind`` (one of :data:`KINDS`), ``value`` (recorded per
    row), ``source`` (how it was obtained, or why it is weak) and ``identity`` (the
    ``client`` part of the call cache's key)."""

    kind: str
    value: str
    source: str
    identity: dict[str, Any] = field(compare=False)
    #: weak because the server could not be reached or refused the key: the calls fail
    #: the same way and say so, so the identity policy does not speak first
    unreachable: bool = field(default=False, compare=False)

    @property
    def weak(self) -> bool:
        return self.kind == "weak"

    @property
    def short(self) -> str:
        """Eight hex digits naming the fingerprint (a results folder's suffix): the
        digest's first eight when the value is ``<kind>:<hex>``, else those of the
        value's sha256."""
        _, _, rest = self.value.partition(":")
        if len(rest) >= 8 and all(c in "0123456789abcdef" for c in rest[:8].lower()):
            return rest[:8].lower()
        return hashlib.sha256(self.value.encode("utf-8", "surrogatepass")).hexdigest()[:8]


@dataclass(frozen=True)
class IdentityPolicy:
    """What a config says about the model's identity: ``declared`` (``models.fingerprint``),
    ``key`` (``models.key``) and ``allow_weak`` (``models.allow_weak_identity``)."""

    declared: str | None = None
    key: str | None = None
    allow_weak: bool = False

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> IdentityPolicy:
        declared = cfg.get("fingerprint")
        return cls(
            declared=str(declared) if declared not in (None, "") else None,
            key=cfg.get("key") or None,
            allow_weak=bool(cfg.get("allow_weak_identity")),
        )


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha256_text(obj: Any) -> str:
    return hashlib.sha256(canonical(obj).encode("utf-8", "surrogatepass")).hexdigest()


# -- the address-based identity (what the cache keyed on before fingerprints) ---------------


def address_identity(client: ModelClient) -> dict[str, Any]:
    """Backend, model name, and where the model lives (server URL, or the model file's
    name and size: not its absolute path, so a cache moves between machines).

    The cache key of a model without a fingerprint, unchanged from before fingerprints
    so that their entries still hit.
    """
    d = client.describe()
    ident: dict[str, Any] = {"backend": client.backend, "model": client.model}
    if d.get("base_url"):
        ident["base_url"] = str(d["base_url"]).rstrip("/")
    if d.get("model_path"):
        ident["model_file"] = d.get("model_file") or Path(d["model_path"]).name
        ident["model_size"] = d.get("model_size")
    return ident


def _weak(client: ModelClient, why: str) -> Fingerprint:
    ident = address_identity(client)
    where = ident.get("base_url") or ident.get("model_file") or "?"
    return Fingerprint(
        "weak",
        f"weak:{client.backend}:{client.model}@{where}",
        f"weak: {why}; the cache keys on the model's name and address",
        ident,
    )


def _strong(client: ModelClient, kind: str, value: str, source: str) -> Fingerprint:
    return Fingerprint(kind, value, source, {"backend": client.backend, "fingerprint": value})


# -- files ---------------------------------------------------------------------------------


_file_memo: dict[tuple, str] = {}
_file_lock = threading.Lock()


def _write_sidecar(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` to ``path`` atomically; a failure only costs a later rehash."""
    from tersetalk.core.io import write_text_atomic

    try:
        write_text_atomic(canonical(record), path)
    except OSError as exc:
        log.warning("model fingerprint: could not memoise the digest in %s: %s", path, exc)


def file_sha256(path: str | Path, memo_dir: str | Path | None = None) -> str:
    """The sha256 (hex) of the file at ``path``, memoised by (resolved path, size,
    mtime_ns, inode): in this process, and in ``memo_dir`` when given.

    Raises ``OSError`` when the file cannot be read.
    """
    resolved = Path(path).resolve(strict=True)
    st = resolved.stat()
    stamp = (str(resolved), st.st_size, st.st_mtime_ns, st.st_ino)
    sidecar = None
    if memo_dir is not None:
        sidecar = Path(memo_dir) / f"{_sha256_text(list(stamp))}.sha256"
    with _file_lock:
        known = _file_memo.get(stamp)
    if known is not None:
        if sidecar is not None and not sidecar.exists():
            # hashed earlier in this process for another cache: memoise it in this one too
            _write_sidecar(sidecar, {"stamp": list(stamp), "sha256": known})
        return known
    if sidecar is not None:
        try:
            record = json.loads(sidecar.read_text(encoding="utf-8"))
            if record.get("stamp") == list(stamp) and isinstance(record.get("sha256"), str):
                with _file_lock:
                    _file_memo[stamp] = record["sha256"]
                return record["sha256"]
        except (OSError, ValueError, AttributeError):
            pass  # absent or unreadable: hash the file
    digest = bytes_sha256(resolved)  # the one file digest, read in blocks
    after = resolved.stat()
    if (after.st_size, after.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
        return digest  # changed while being read: right for what was read, not memoised
    with _file_lock:
        _file_memo[stamp] = digest
    if sidecar is not None:
        _write_sidecar(sidecar, {"stamp": list(stamp), "sha256": digest})
    return digest


def folder_sha256(folder: str | Path, memo_dir: str | Path | None = None) -> str:
    """``sha256:<hex>`` of a model folder: every file's relative name and sha256
    (:func:`file_sha256`, memoised under ``memo_dir``), hidden files left out.

    Raises ``OSError`` when the folder or a file cannot be read."""
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"no model folder {root}")
    listing = [
        [p.relative_to(root).as_posix(), file_sha256(p, memo_dir)]
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(s.startswith(".") for s in p.relative_to(root).parts)
    ]
    return "sha256:" + _sha256_text(listing)


def _gguf(client: ModelClient, memo_dir: Path | None) -> Fingerprint:
    path = client.describe().get("model_path")
    if not path:
        return _weak(client, "the in-process model names no file")
    try:
        digest = file_sha256(path, memo_dir)
    except OSError as exc:
        return _weak(client, f"its file {path} cannot be read ({exc.strerror or exc})")
    return _strong(
        client, "file-sha256", f"sha256:{digest}", f"file-sha256: sha256 of {Path(path).name}"
    )


# -- servers -------------------------------------------------------------------------------


def _on_this_machine(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _ollama(client: Any) -> Fingerprint:
    try:
        digest = client.model_digest()
    except ModelEnvironmentError:
        raise  # Ollama answered but keeps failing: a fault to fix, not a weaker key
    except ModelError as exc:
        fp = _weak(client, f"Ollama did not give the model's digest ({exc})")
        if isinstance(exc.__cause__, ModelUnavailableError):
            fp = dataclasses.replace(fp, unreachable=True)
        return fp
    return _strong(
        client,
        "ollama-digest",
        f"ollama:{digest}",
        f"ollama-digest: Ollama's digest of {client.model} (/api/tags)",
    )


def _served_file(client: Any, report: dict[str, Any], memo_dir: Path | None) -> Fingerprint | None:
    """The sha256 of the file a server on this machine says it serves, if readable here."""
    if not _on_this_machine(client.base_url):
        return None
    entry, props = report["entry"] or {}, report.get("props") or {}
    for where, path in (
        ("/props model_path", props.get("model_path")),
        ("/v1/models root", entry.get("root")),
        ("/v1/models path", entry.get("path")),
        ("/v1/models id", entry.get("id")),
    ):
        if not isinstance(path, str) or not os.path.isabs(path) or not os.path.isfile(path):
            continue
        try:
            digest = file_sha256(path, memo_dir)
        except OSError:
            continue
        return _strong(
            client,
            "file-sha256",
            f"sha256:{digest}",
            f"file-sha256: sha256 of {Path(path).name}, the file the server on this machine "
            f"names ({where})",
        )
    return None


def _openai(client: Any, memo_dir: Path | None) -> Fingerprint:
    try:
        report = client.model_report()
    except ModelEnvironmentError:
        raise  # the server answered but keeps failing: a fault to fix, not a weaker key
    except ModelError as exc:
        fp = _weak(client, f"the server's model listing could not be read ({exc})")
        if isinstance(exc.__cause__, ModelUnavailableError):
            fp = dataclasses.replace(fp, unreachable=True)
        return fp
    entry = report["entry"]
    if entry is None:
        listed = report["listed"]
        shown = ", ".join(repr(n) for n in listed[:20]) + (" ..." if len(listed) > 20 else "")
        raise ModelIdentityError(
            f"models.model {client.model!r} is not served at {client.base_url}: GET "
            f"{client.base_url}/models lists {shown or 'no model'}; set models.model to one "
            "of those (a server may answer a name it does not list with whatever model it "
            "has loaded, and the results would be filed under the wrong name)"
        )
    found = _served_file(client, report, memo_dir)
    if found is not None:
        return found
    sha = entry.get("sha256")
    if isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha):
        named = entry.get("file") if isinstance(entry.get("file"), str) else "the served file"
        return _strong(
            client, "file-sha256", f"sha256:{sha}",
            f"file-sha256: sha256 of {named}, as the server reports it (GET /v1/models sha256)",
        )  # fmt: skip
    for name in ("digest", "sha256"):  # a server that reports a content hash
        if isinstance(entry.get(name), str) and entry[name]:
            return _strong(
                client, "server-report", f"report:{entry[name]}",
                f"server-report: the {name} GET /v1/models gives for {entry.get('id')!r}",
            )  # fmt: skip
    described: dict[str, Any] = {}
    meta = entry.get("meta")
    if isinstance(meta, dict) and meta:
        described["meta"] = {k: v for k, v in meta.items() if k not in _SERVING_META}
    for name in ("root", "parent"):
        if entry.get(name):
            described[name] = entry[name]
    if not described:
        shown = ", ".join(sorted(k for k in entry if entry[k] not in (None, "", [], {})))
        return _weak(
            client,
            f"GET /v1/models reports nothing that identifies the weights (only {shown})",
        )
    report_id = {"id": entry.get("id"), "owned_by": entry.get("owned_by"), **described}
    return _strong(
        client,
        "server-report",
        f"report:{_sha256_text(report_id)}",
        "server-report: GET /v1/models id, owned_by and "
        + ", ".join(sorted(described))
        + " (the server's description, not a content hash)",
    )


# -- the scripted double -------------------------------------------------------------------


def _script(client: Any) -> Fingerprint:
    responses = client._responses  # the double's script, read as it stands
    if callable(responses):
        target = getattr(responses, "__func__", responses)
        if not (inspect.isfunction(target) or inspect.isclass(target)):
            target = type(target)  # a callable object: its class's code
        name = getattr(target, "__qualname__", repr(target))
        try:
            code = inspect.getsource(target)
        except (OSError, TypeError):
            return _weak(client, f"the responder {name} has no source to hash")
        digest = _sha256_text({"responder": name, "source": code})
        source = f"script: sha256 of the responder's source ({name}; not of its state)"
    else:
        script = [
            {"raise": type(r).__name__, "message": str(r)} if isinstance(r, Exception) else r
            for r in responses
        ]
        digest = _sha256_text(script)
        source = f"script: sha256 of the {len(script)} scripted answers"
    value = f"script:{digest}"
    return Fingerprint(
        "script", value, source, {"backend": client.backend, "model": client.model,
                                  "fingerprint": value},
    )  # fmt: skip


# -- any client ----------------------------------------------------------------------------

_client_memo: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_client_lock = threading.Lock()


def _innermost(client: ModelClient) -> ModelClient:
    """The backend under wrappers that delegate to ``inner`` (rate limiter, recorder)."""
    seen = 0
    while isinstance(getattr(client, "inner", None), ModelClient) and seen < 32:
        client, seen = client.inner, seen + 1
    return client


def _is(client: ModelClient, module: str, name: str) -> bool:
    """``isinstance(client, tersetalk.models.<module>.<name>)``, without importing the
    module: a client of a class never imported cannot be one."""
    mod = sys.modules.get(f"{__package__}.{module}")
    return mod is not None and isinstance(client, getattr(mod, name))


def _compute(client: ModelClient, memo_dir: Path | None) -> Fingerprint:
    if _is(client, "scripted", "ScriptedClient"):
        return _script(client)
    if _is(client, "ollama_backend", "OllamaClient"):
        return _ollama(client)
    if _is(client, "openai_compat", "OpenAICompatClient"):
        return _openai(client, memo_dir)
    if client.backend == "llamacpp":
        return _gguf(client, memo_dir)
    return _weak(client, f"the {client.backend} backend gives no fingerprint")


def _settle(client: ModelClient, fp: Fingerprint) -> Fingerprint:
    """``fp`` under the client's :class:`IdentityPolicy` (none: as it is): a weak one
    becomes the declared fingerprint, stays weak when allowed, or stops the run."""
    policy = getattr(client, "identity_policy", None)
    if not isinstance(policy, IdentityPolicy) or not fp.weak or fp.unreachable:
        return fp
    why = fp.source.removeprefix("weak: ").split("; the cache keys on")[0]
    if policy.declared:
        value = f"declared:{policy.declared}"
        return Fingerprint(
            "declared",
            value,
            f"declared: models.fingerprint of models.key {policy.key!r} (the config's word; "
            f"nothing the model's source reports identifies it: {why})",
            {"backend": client.backend, "fingerprint": value},
        )
    if policy.allow_weak:
        return Fingerprint(
            fp.kind, fp.value, f"{fp.source} (allowed by models.allow_weak_identity)", fp.identity
        )
    where = client.describe().get("base_url") or client.describe().get("model_path") or "?"
    raise ModelIdentityError(
        f"model {client.model!r} ({client.backend}, {where}): nothing identifies the weights "
        f"it serves ({why}), so its results and cached answers could be filed under another "
        "model's. Serve it so that it reports them (python -m tersetalk.models.llamacpp_server "
        "lists the file's sha256; Ollama and vLLM report theirs), or declare it: set "
        "models.key (its results folder) and models.fingerprint (text you change whenever the "
        "weights change, e.g. the file's sha256), or accept the name and address as its "
        "identity with models.allow_weak_identity: true (every row's model_fingerprint_source "
        "then says weak)"
    )


def model_fingerprint(client: ModelClient, memo_dir: str | Path | None = None) -> Fingerprint:
    """The fingerprint of the model behind ``client`` (see the module docstring).

    Worked out once per backend client and kept for its life, so every row of a run
    records the same one and a scripted double's list of answers is read before it is
    used up. A :class:`~tersetalk.models.cache.CachedClient` gives the one its keys use.
    What cannot be had (no server, no listing, a file not readable here) makes a weak
    fingerprint that says why. A server that answers but keeps failing its side
    requests (HTTP 5xx, a reply past its deadline or byte cap) raises
    :class:`ModelEnvironmentError` instead: a weak key for one run and a strong one for
    the next would split the call cache, so the run stops with what to fix.
    """
    outer = client
    while True:  # the first call cache on the way down decides (its memo folder)
        # a CachedClient (models.cache, which imports this module) is the one with a
        # fingerprint() of its own: asked by that, not by class, so no import cycle
        if callable(getattr(type(outer), "fingerprint", None)):
            return outer.fingerprint()
        inner = getattr(outer, "inner", None)
        if not isinstance(inner, ModelClient):
            break
        outer = inner
    raw = _innermost(client)
    with _client_lock:
        try:
            known = _client_memo.get(raw)
        except TypeError:  # not weakly referenceable
            known = None
    if known is not None:
        return known
    fp = _settle(raw, _compute(raw, Path(memo_dir) if memo_dir is not None else None))
    with _client_lock, contextlib.suppress(TypeError):
        fp = _client_memo.setdefault(raw, fp)
    log.info("model fingerprint of %s/%s: %s (%s)", raw.backend, raw.model, fp.value, fp.source)
    return fp
