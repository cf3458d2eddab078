"""The session pipeline's own speed-ups change nothing but time: the collector is paused
for one result's work and left as it was; a long list of flat records is laid out by the
table path as the knapsack would lay it out, with or without a budget."""

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


def _processed(text: str, config: ProxyConfig, tables: bool, monkeypatch) -> S.Processed:
    from tersetalk.formats import records

    tabled = []

    def encode_records(*args, **kwargs):
        out = records.encode_records(*args, **kwargs) if tables else None
        tabled.append(out is not None)
        return out

    monkeypatch.setattr(S, "encode_records", encode_records)
    out = S.SessionPipeline(config).process("rows", {}, text)
    assert tabled == ([] if '"short"' in text else [tables])  # 30 rows: no table path
    return out


@pytest.mark.parametrize(
    "text",
    [
        _rows(200),
        repr([{"id": i, "name": f"user {i}", "ok": i % 2 == 0} for i in range(60)]),  # literal
        json.dumps([{"id": i, "path": f"/srv/app/src/pkg/mod{i % 5}/f{i}.py"} for i in range(80)]),
        json.dumps([{"id": i, "owner": {"login": f"u{i % 7}", "id": i * 3}} for i in range(50)]),
        json.dumps([{"id": i, "n": "short"} for i in range(30)]),  # the knapsack's alone
    ],
    ids=["json", "literal", "aliased", "nested", "short"],
)
@pytest.mark.parametrize("budget", [None, 150])
def test_the_table_path_sends_what_the_knapsack_sends(text, budget, monkeypatch):
    config = ProxyConfig.model_validate({"dedup": {"enabled": False}, "budget": budget})
    fast = _processed(text, config, True, monkeypatch)
    slow = _processed(text, config, False, monkeypatch)
    assert fast.kind == slow.kind == "encoded"
    same = ("text", "source", "raw_tokens", "sent_tokens", "hints", "lossless", "fallback")
    assert {k: getattr(fast, k) for k in same} == {k: getattr(slow, k) for k in same}


def test_a_long_list_of_flat_records_is_tabled_without_a_tree(monkeypatch):
    from tersetalk.formats import tree
    from tersetalk.formats.solver import decode

    built = []
    real = S.from_python
    monkeypatch.setattr(S, "from_python", lambda v: built.append(1) or real(v))
    out = S.SessionPipeline(ProxyConfig()).process("rows", {}, _rows(200))
    assert out.kind == "encoded" and out.text.startswith("> [encoded: csv]") and not built
    assert tree.same_value(decode(out.text), json.loads(_rows(200)))
