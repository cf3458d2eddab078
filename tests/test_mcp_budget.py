"""Budget mode never costs a session more than lossless: what the proxy sends under a
budget, and every ``tersetalk_get`` answer a reader needs to get all that it left out,
add up to at most what lossless mode sends for the same results (the budget rule of
:mod:`tersetalk.mcp.session`)."""

from __future__ import annotations

import json
import random
import re

import pytest

from tersetalk.core.tokens import count_tokens
from tersetalk.mcp import config as C
from tersetalk.mcp.session import RETRIEVAL_TOOL, SessionPipeline, fallback_kind

CALL = re.compile(rf"call {RETRIEVAL_TOOL} (\{{.*\}})\]$")
_WORDS = "north south river city album station county league season member".split()


def _rows(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [{"id": i, "question": " ".join(rng.choices(_WORDS, k=8)) + "?",
             "answer": rng.choice(_WORDS), "type": rng.choice(["bridge", "comparison"]),
             "level": rng.choice(["easy", "medium", "hard"]), "n_supporting": rng.randint(2, 4)}
            for i in range(n)]  # fmt: skip


def _results() -> list[tuple[str, str]]:
    """(tool, text): an sqlite read (a Python literal of rows, as mcp-server-sqlite
    writes it), a JSON object with a long string and a list, a Markdown table, a JSON
    page of a larger set, and a result small enough for any budget."""
    table = "| id | name |\n|---|---|\n" + "".join(f"| {i} | name {i} |\n" for i in range(60))
    return [
        ("read_query", str(_rows(120))),
        (
            "get_repo",
            json.dumps(
                {
                    "repo": "octo/x",
                    "description": "d " * 400,
                    "items": _rows(40, 1),
                    "owner": {"login": "octo"},
                }
            ),
        ),  # fmt: skip
        ("read_doc", "# Users\n\n" + table + "\nThe end.\n"),
        ("search", json.dumps({"total_count": 900, "items": _rows(30, 2)})),
        ("read_query", str(_rows(3, 3))),
    ]


def _fetch_all(pipe: SessionPipeline, text: str) -> int:
    """The tokens of every answer a reader gets by making each call ``text`` names (and
    each call those answers name: further pages)."""
    total, todo = 0, [text]
    while todo:
        for line in todo.pop().splitlines():
            m = CALL.search(line)
            if m is None:
                continue
            args = json.loads(m.group(1))
            answer = pipe.retrieve(args.pop("ref"), args.pop("path", None), args.pop("keys", None),
                                   page=args.pop("page", None),
                                   original=args.pop("original", False))  # fmt: skip
            assert not args
            total += count_tokens(answer, "o200k_base")
            todo.append(answer)
    return total


def _session(settings: dict) -> tuple[int, int, list]:
    """(tokens sent, tokens fetched, the Processed of each result) over one session."""
    pipe = SessionPipeline(C.parse({"dedup": {"enabled": False}, **settings}))
    sent = fetched = 0
    outs = []
    for tool, text in _results():
        out = pipe.process(tool, {}, text)
        sent += out.sent_tokens
        fetched += _fetch_all(pipe, out.text)
        outs.append(out)
    return sent, fetched, outs


@pytest.mark.parametrize("budget", [150, 400, 1000])
def test_a_session_under_a_budget_never_costs_more_than_lossless(budget):
    lossless_sent, lossless_fetched, _ = _session({})
    sent, fetched, outs = _session({"budget": budget})
    assert lossless_fetched == 0  # nothing here is over a page
    assert sent + fetched <= lossless_sent, [(o.kind, o.sent_tokens, o.fallback) for o in outs]


def test_a_result_whose_rest_would_cost_more_goes_lossless_and_says_why():
    lossless = SessionPipeline(C.parse({"dedup": {"enabled": False}}))
    tool, text = _results()[0]
    want = lossless.process(tool, {}, text)
    pipe = SessionPipeline(C.parse({"dedup": {"enabled": False}, "tools": {
        "read_query": {"budget": 800}}}))  # fmt: skip
    out = pipe.process(tool, {}, text)
    assert out.text == want.text and out.lossless
    assert fallback_kind(out.fallback) == "budget"
    assert "more than lossless" in out.fallback and f"({want.sent_tokens})" in out.fallback


@pytest.mark.parametrize("page_tokens", [None, 200])
def test_the_rest_is_counted_as_a_reader_fetches_it(page_tokens):
    # the count the rule compares: every overflow call's answer, and its further pages
    from tersetalk.formats.solver import SolveCache
    from tersetalk.formats.tree import from_python
    from tersetalk.mcp.session import _Counts

    pipe = SessionPipeline(C.parse({"dedup": {"enabled": False}, "page_tokens": page_tokens}))
    _, text = _results()[1]
    value = json.loads(text)
    ref = pipe.process("get_repo", {}, text).ref  # held: the calls below can be made
    counts = _Counts("o200k_base", text, lambda: count_tokens(text, "o200k_base"))
    budgeted, _, lossless, _ = pipe._encode_within(
        from_python(value), value, ref, None, 300, SolveCache("o200k_base"), counts
    )
    assert not lossless and budgeted.count(RETRIEVAL_TOOL) >= 2
    want = _fetch_all(pipe, budgeted)
    assert pipe._rest_tokens(budgeted, value, counts) == want > 0


def test_a_budget_whose_rest_alone_costs_more_than_lossless_is_not_solved(monkeypatch):
    tool, text = _results()[0]
    lossless = SessionPipeline(C.parse({"dedup": {"enabled": False}})).process(tool, {}, text)
    solved: list = []

    def run(budget: int):
        pipe = SessionPipeline(C.parse({"dedup": {"enabled": False}, "budget": budget}))
        real = pipe._encode_within
        solved.clear()

        def spy(node, value, ref, meta, within, *args, **kwargs):
            solved.append(within)
            return real(node, value, ref, meta, within, *args, **kwargs)

        monkeypatch.setattr(pipe, "_encode_within", spy)
        return pipe.process(tool, {}, text)

    # the budget keeps about a sixth: the rest's compact JSON alone passes lossless
    out = run(lossless.sent_tokens // 6)
    assert solved == [None] and out.text == lossless.text
    assert "fetching what it would leave out costs about" in out.fallback
    # a budget just under lossless leaves out little: it is solved, and the rule decides
    out = run(lossless.sent_tokens - 10)
    assert solved == [None, lossless.sent_tokens - 10]
    assert out.text == lossless.text and "sending it" in out.fallback
