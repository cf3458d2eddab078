#!/usr/bin/env python3
"""Build the held-out corpus (json.jsonl) from Mastodon.py's recorded API cassettes.

Usage:
    python3 build.py --gitdir /path/to/halcy+Mastodon.py/repo [--out DIR]

The source is read straight out of a git directory with ``git ls-tree -r HEAD`` /
``git show HEAD:<path>``; nothing is checked out or executed. Needs Python 3, PyYAML
(a dependency of tersetalk) and ``git``. The output is deterministic for a fixed
source commit: cassettes in path order, interactions in recorded order, one body per
endpoint (the first one recorded), each body in its original key order.

Selection rules (see README.md):

- every ``tests/cassettes/*.yaml`` at HEAD (VCR.py cassettes of the test suite run
  against a real Mastodon server), every interaction's ``response.body.string``;
- kept: bodies that are a non-empty JSON object or array, with no key named like a
  credential (``access_token``, ``client_secret``, ``client_id``, ``vapid_key``), at
  most ``MAX_CHARS`` characters of compact JSON;
- one body per endpoint: ``METHOD /path`` with every all-digit path segment written
  ``:id`` (the first body in recorded order wins); duplicates by canonical sha256 go.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import yaml

SOURCE = "halcy/Mastodon.py"
LICENCE = "MIT"
MAX_CHARS = 24_000
SECRET_KEYS = {"access_token", "client_secret", "client_id", "vapid_key"}
SCALARS = (str, int, float, bool, type(None))


def git(gitdir: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", gitdir, *args], check=True, capture_output=True).stdout


def shape(value):
    """The shape label, by the rules of data/toolresponses (same names)."""
    if isinstance(value, list):
        if value and all(isinstance(x, dict) for x in value):
            return "array_of_objects"
        if value and all(isinstance(x, SCALARS) for x in value):
            return "array_of_scalars"
        return "other"
    if isinstance(value, dict):
        if all(isinstance(v, SCALARS) for v in value.values()):
            return "flat_object"
        return "nested_object"
    return "other"


def keys_of(value):
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            yield from v
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def compact(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def canonical_id(value) -> str:
    canon = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:12]


def endpoint(method: str, uri: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(uri)
    request = f"{method.upper()} {parts.path}" + (f"?{parts.query}" if parts.query else "")
    return request, f"{method.upper()} " + re.sub(r"/\d+(?=/|$)", "/:id", parts.path)


def build(gitdir: str) -> tuple[list[dict], dict]:
    commit = git(gitdir, "rev-parse", "HEAD").decode().strip()
    names = git(gitdir, "ls-tree", "-r", "--name-only", "HEAD", "tests/cassettes/").decode()
    files = sorted(n for n in names.split("\n") if n.endswith(".yaml"))
    seen_ids: set[str] = set()
    seen_endpoints: set[str] = set()
    out: list[dict] = []
    stats = dict.fromkeys(
        ("interactions", "not_json", "empty", "secret", "too_big", "duplicate", "same_endpoint"),
        0,
    )
    for path in files:
        doc = yaml.load(git(gitdir, "show", f"HEAD:{path}"), Loader=yaml.SafeLoader) or {}
        for index, it in enumerate(doc.get("interactions") or []):
            stats["interactions"] += 1
            text = (it.get("response", {}).get("body") or {}).get("string")
            try:
                body = json.loads(text) if isinstance(text, str) else None
            except json.JSONDecodeError:
                body = None
            if not isinstance(body, dict | list):
                stats["not_json"] += 1
                continue
            if not body:
                stats["empty"] += 1
                continue
            if SECRET_KEYS & set(keys_of(body)):
                stats["secret"] += 1
                continue
            if len(compact(body)) > MAX_CHARS:
                stats["too_big"] += 1
                continue
            rid = canonical_id(body)
            if rid in seen_ids:
                stats["duplicate"] += 1
                continue
            request, where = endpoint(it["request"]["method"], it["request"]["uri"])
            if where in seen_endpoints:
                stats["same_endpoint"] += 1
                continue
            seen_ids.add(rid)
            seen_endpoints.add(where)
            out.append(
                {
                    "id": rid,
                    "source": SOURCE,
                    "commit": commit,
                    "path": path,
                    "index": index,
                    "request": request,
                    "endpoint": where,
                    "status": it.get("response", {}).get("status", {}).get("code"),
                    "shape": shape(body),
                    "n_chars": len(compact(body)),
                    "body": body,
                }
            )
    stats["kept"] = len(out)
    return out, stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gitdir", required=True, help=f"a git directory of {SOURCE}")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent))
    args = ap.parse_args()
    records, stats = build(args.gitdir)
    target = Path(args.out) / "json.jsonl"
    with target.open("w", encoding="utf-8", newline="\n") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    shapes: dict[str, int] = {}
    for rec in records:
        shapes[rec["shape"]] = shapes.get(rec["shape"], 0) + 1
    json.dump({**stats, "shapes": shapes, "sha256": digest}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
