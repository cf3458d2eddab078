"""Every reference and elision the proxy sends names, on its own line, the one
``tersetalk_get`` call that returns what it points at, so a reader that never saw the
earlier result (another chat or a sub-agent sharing the proxy) fetches it in one call."""

from __future__ import annotations

import json
import re

from tersetalk.mcp import config as C
from tersetalk.mcp.session import SessionPipeline

_CALL = re.compile(r"^> \[(ref|near-ref|\+\d+ more)[: ].*\. call tersetalk_get (\{.*\})\]$")


def _rows(n: int, status: str = "ok") -> str:
    return json.dumps({"status": status, "rows": [{"id": i, "name": f"user-{i}", "team": "core"}
                                                  for i in range(n)]})  # fmt: skip


def _hint_lines(text: str) -> list[str]:
    return [x for x in text.split("\n") if x.startswith(("> [ref", "> [near-ref", "> [+"))]


def test_each_hint_names_the_call_that_returns_what_it_points_at():
    cfg = {"budget": 120, "budget_within_lossless": False, "hints": {"near_ref": True}}
    p = SessionPipeline(C.parse(cfg))
    first = p.process("list", {}, _rows(40))  # elided for the budget
    again = p.process("list", {}, _rows(40))  # a byte-identical repeat
    near = p.process("list", {}, _rows(40, "stale"))  # one scalar changed
    assert (first.kind, again.kind, near.kind) == ("encoded", "ref", "near-ref")
    seen = 0
    for out in (first, again, near):
        for line in _hint_lines(out.text):
            m = _CALL.match(line)
            assert m, line  # the call is on the hint's own line
            args = json.loads(m.group(2))
            got = p.retrieve(**args)
            if m.group(1) == "ref":
                assert got == _rows(40)  # the server's text, whole, in one call
            elif m.group(1) == "near-ref":
                assert got == _rows(40, "stale")
            seen += 1
    assert seen >= 3
