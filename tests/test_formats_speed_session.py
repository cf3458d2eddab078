"""The session pipeline's own speed-ups change nothing but time: the collector is paused
for one result's work and left as it was."""

from __future__ import annotations

import gc
import json

import pytest

from tersetalk.mcp import session as S
from tersetalk.mcp.config import ProxyConfig


def _rows(n: int) -> str:
    return json.dumps([{"id": i, "name": f"user {i}", "team": i % 3} for i in range(n)])


def test_the_collector_is_paused_while_a_result_is_processed_and_restored(monkeypatch):
    seen: list[bool] = []
    real = S.SessionPipeline._process

    def watched(self, tool, arguments, text):
        seen.append(gc.isenabled())
        return real(self, tool, arguments, text)

    monkeypatch.setattr(S.SessionPipeline, "_process", watched)
    pipe = S.SessionPipeline(ProxyConfig())
    assert gc.isenabled()
    out = pipe.process("rows", {}, _rows(40))
    assert out.kind == "encoded" and seen == [False] and gc.isenabled()
    gc.disable()  # a caller that had it off keeps it off
    try:
        pipe.process("rows", {}, _rows(41))
        assert not gc.isenabled() and seen == [False, False]
    finally:
        gc.enable()

    def broken(self, tool, arguments, text):
        seen.append(gc.isenabled())
        raise RuntimeError("boom")

    monkeypatch.setattr(S.SessionPipeline, "_process", broken)
    with pytest.raises(RuntimeError, match="boom"):  # an error restores it too
        pipe.process("rows", {}, _rows(3))
    assert seen[-1] is False and gc.isenabled()
