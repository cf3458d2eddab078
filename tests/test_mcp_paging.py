"""A size bound with pages: a result over ``page_tokens`` goes a page at a time, each
page within the bound and ending with the ``tersetalk_get`` call for the next; the pages
joined are the text exactly, never cut."""

from __future__ import annotations

import json
import re
import sys

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_support import ROOT

from tersetalk.core.tokens import count_tokens
from tersetalk.formats.solver import decode
from tersetalk.formats.tree import same_value
from tersetalk.mcp.config import ProxyConfig, parse
from tersetalk.mcp.session import RETRIEVAL_TOOL, SessionPipeline, split_pages

LINE = re.compile(r"\n> \[page (\d+) of (\d+)[^\n]*\]$")
CALL = re.compile(rf"call {RETRIEVAL_TOOL} (\{{.*\}})\]$")


def _log(n: int) -> str:
    """A git log of ``n`` entries, as mcp-server-git's git_log writes one."""
    return "".join(
        f"Commit: {i:040x}\nAuthor: Dev Eloper <dev{i % 7}@example.org>\n"
        f"Date: 2026-0{1 + i % 9}-1{i % 10} 12:0{i % 10}:00+00:00\n"
        f"Message: change number {i}: touch module_{i % 13}.py and its tests\n\n"
        for i in range(n)
    )  # fmt: skip


def _strip(page: str) -> tuple[str, int, int, dict | None]:
    """A page's text without its page line; the page, the count and the next call."""
    m = LINE.search(page)
    assert m, page[-300:]
    nxt = CALL.search(page)
    return page[: m.start()], int(m[1]), int(m[2]), json.loads(nxt[1]) if nxt else None


def _walk(pipeline: SessionPipeline, first: str) -> list[str]:
    """Every page, following the call each names, as a reader would."""
    pages = [first]
    while (call := _strip(pages[-1])[3]) is not None:
        args = dict(call)
        pages.append(pipeline.retrieve(args.pop("ref"), args.pop("path", None),
                                       args.pop("keys", None), page=args.pop("page"),
                                       original=args.pop("original", False)))  # fmt: skip
        assert not args
    return pages


def test_the_default_bound_is_25000_tokens():
    assert ProxyConfig().page_tokens == 25_000
    text = _log(500)
    assert count_tokens(text, "o200k_base") > 25_000  # the text is over it
    p = SessionPipeline().process("git_log", {}, text)
    assert p.pages >= 2 and p.sent_tokens <= 25_000
    assert f'call {RETRIEVAL_TOOL} {{"ref":"{p.ref}","page":2}}]' in p.text.splitlines()[-1]


def test_a_text_under_the_bound_is_sent_whole():
    text = _log(40)
    p = SessionPipeline(parse({"page_tokens": 5000})).process("git_log", {}, text)
    assert (p.text, p.pages) == (text, 1)


def test_every_page_is_within_the_bound_and_the_pages_are_the_text_exactly():
    text = _log(200)
    pipeline = SessionPipeline(parse({"page_tokens": 1000}))
    p = pipeline.process("git_log", {}, text)
    pages = _walk(pipeline, p.text)
    assert len(pages) == p.pages > 5
    assert all(count_tokens(page, "o200k_base") <= 1000 for page in pages)
    assert [_strip(page)[1:3] for page in pages] == [(k, p.pages) for k in range(1, p.pages + 1)]
    assert "".join(_strip(page)[0] for page in pages) == text
    assert pages[-1].endswith("the last (pages of at most 1000 tokens)]")


def test_a_re_encoded_result_is_paged_as_sent_and_decodes_to_the_original():
    rows = [{"id": i, "name": f"user number {i}", "email": f"u{i}@example.org",
             "active": i % 3 == 0} for i in range(400)]  # fmt: skip
    text = json.dumps(rows)
    pipeline = SessionPipeline(parse({"page_tokens": 800}))
    p = pipeline.process("list_users", {}, text)
    assert p.kind == "encoded" and p.pages > 1
    sent = "".join(_strip(page)[0] for page in _walk(pipeline, p.text))
    assert same_value(decode(sent), rows)
    # the original, asked for by ref alone, is over the bound too: paged the same way
    first = pipeline.retrieve(p.ref)
    assert _strip(first)[3] == {"ref": p.ref, "original": True, "page": 2}
    assert "".join(_strip(page)[0] for page in _walk(pipeline, first)) == text


def test_a_line_longer_than_a_page_is_cut_between_characters():
    text = " ".join(f"word{i}" for i in range(3000))  # one line, no line end
    pieces = split_pages(text, 300, "o200k_base")
    assert len(pieces) > 1 and "".join(pieces) == text
    assert all(count_tokens(piece, "o200k_base") <= 300 - 80 for piece in pieces)


def test_asking_for_a_page_past_the_end_says_how_many_there_are():
    from tersetalk.mcp.session import RetrievalError

    pipeline = SessionPipeline(parse({"page_tokens": 1000}))
    p = pipeline.process("git_log", {}, _log(100))
    with pytest.raises(RetrievalError, match=f"there are {p.pages} pages"):
        pipeline.retrieve(p.ref, page=p.pages + 1)


@settings(max_examples=40, deadline=None)
@given(st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=3000),
       st.integers(min_value=200, max_value=400))  # fmt: skip
def test_pages_are_always_within_the_bound_and_exact(text, limit):
    pieces = split_pages(text, limit, "o200k_base")
    assert "".join(pieces) == text
    assert all(count_tokens(piece, "o200k_base") <= limit - 80 for piece in pieces)


def test_through_the_proxy_a_long_result_comes_in_pages_a_reader_can_follow(tmp_path):
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    fixture = ROOT / "tests" / "mcp_fixture_server.py"
    cfg = tmp_path / "proxy.yaml"
    cfg.write_text("page_tokens: 1500\n")
    args = ["-m", "tersetalk", "mcp-proxy", "--call-timeout", "60", "--proxy-config",
            str(cfg), "--", sys.executable, str(fixture)]  # fmt: skip

    async def run():
        direct = StdioServerParameters(command=sys.executable, args=[str(fixture)])
        proxied = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
        with anyio.fail_after(120):  # a hang detector, not a speed check
            async with stdio_client(direct) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                want = (await s.call_tool("rows", {"n": 300})).content[0].text
            async with stdio_client(proxied) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                pages = [(await s.call_tool("rows", {"n": 300})).content[0].text]
                while (call := _strip(pages[-1])[3]) is not None:
                    pages.append((await s.call_tool(RETRIEVAL_TOOL, call)).content[0].text)
        return want, pages

    want, pages = anyio.run(run)
    assert len(pages) > 2
    assert all(count_tokens(page, "o200k_base") <= 1500 for page in pages)
    assert same_value(decode("".join(_strip(page)[0] for page in pages)), json.loads(want))
