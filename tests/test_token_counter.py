"""The token-count helper process: tiktoken's counts, in order, and none lost when it dies."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tersetalk.core import counter
from tersetalk.core.tokens import (
    ASIDE_MIN_CHARS,
    count_tokens,
    count_tokens_aside,
    start_count_helper,
    stop_count_helper,
)

TOK = "o200k_base"


@pytest.fixture
def helper():
    assert start_count_helper([TOK])
    yield counter._HELPER
    stop_count_helper()
    assert counter._HELPER is None


def _texts() -> list[str]:
    return [f"word {i}, " * (ASIDE_MIN_CHARS // 7 + i) for i in range(4)]


def test_long_texts_are_counted_by_the_helper_as_tiktoken_counts_them(helper, monkeypatch):
    texts = _texts()
    pending = [count_tokens_aside(t, TOK) for t in texts]  # all asked before any is read
    assert helper.sent == len(texts)
    got = [p() for p in reversed(pending)]  # read in any order
    assert got[::-1] == [count_tokens(t, TOK) for t in texts]
    assert helper.got == len(texts) and not helper.answers


def test_short_texts_stay_in_this_process(helper):
    assert count_tokens_aside("a short text", TOK)() == count_tokens("a short text", TOK)
    assert helper.sent == 0


def test_a_helper_that_dies_owes_nothing(helper, caplog):
    texts = _texts()
    first = count_tokens_aside(texts[0], TOK)
    assert first() == count_tokens(texts[0], TOK)
    pending = count_tokens_aside(texts[1], TOK)
    helper.proc.kill()
    helper.proc.join(5)
    with caplog.at_level(logging.WARNING, logger="tersetalk.core.counter"):
        # the count it owed is made here; later ones are not sent to it
        assert pending() == count_tokens(texts[1], TOK)
        assert count_tokens_aside(texts[2], TOK)() == count_tokens(texts[2], TOK)
    assert helper.broken and helper.sent == 2
    assert "counting in this process" in caplog.text


def test_an_error_in_counting_is_raised_to_the_caller(helper):
    from tersetalk.core.tokens import TokenizerError

    with pytest.raises(TokenizerError, match="unknown tokenizer"):
        count_tokens_aside("x" * ASIDE_MIN_CHARS, "no_such_encoding")()
    # the helper goes on answering
    assert count_tokens_aside(_texts()[0], TOK)() == count_tokens(_texts()[0], TOK)
    assert not helper.broken


def test_without_a_helper_long_texts_are_counted_on_a_thread():
    assert counter._HELPER is None and counter.submit("x", TOK) is None
    text = _texts()[0]
    assert count_tokens_aside(text, TOK)() == count_tokens(text, TOK)


def _twice(x: int) -> int:
    return 2 * x


def test_other_calls_are_answered_in_order_and_run_here_where_the_helper_cannot(helper):
    pending = [counter.call(_twice, i) for i in range(3)]
    count = count_tokens_aside(_texts()[0], TOK)
    assert [p() for p in pending] == [0, 2, 4] and count() == count_tokens(_texts()[0], TOK)
    assert counter.call(lambda: 1) is None  # nothing the helper can import: run it here
    with pytest.raises(ZeroDivisionError):  # it raised there: run here, where it raises
        counter.call(divmod, 1, 0)()
    assert not helper.broken


def _say(text: str) -> int:
    print(text)  # what a library might print in the helper
    return len(text)


def test_the_helper_writes_nothing_on_standard_output(tmp_path):
    # the MCP proxy's standard output is its client's channel
    code = (
        "from tersetalk.core import counter\n"
        "from tersetalk.core.tokens import start_count_helper, stop_count_helper\n"
        "import test_token_counter as t\n"
        "start_count_helper(['o200k_base'])\n"
        "assert counter.call(t._say, 'from the helper')() == 15\n"
        "stop_count_helper()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and "from the helper" in out.stderr


def test_inside_here_this_thread_asks_the_helper_nothing(helper):
    text = _texts()[0]
    with counter.here():
        assert counter.submit(text, TOK) is None and counter.call(len, "abc") is None
        assert count_tokens_aside(text, TOK)() == count_tokens(text, TOK)  # counted here
    assert helper.sent == 0
    assert counter.call(len, "abc")() == 3 and helper.sent == 1  # asked again after it


def _api_page() -> list:
    """A page of API objects whose URLs share prefixes (the alias layer names them)."""
    base = "https://api.example.com/repos/octo-org/project"
    return [{"id": i, "url": f"{base}/issues/{i}", "comments_url": f"{base}/issues/{i}/comments",
             "user": {"login": f"user{i % 4}", "avatar": f"https://img.example.com/u/{i % 4}"},
             "labels": [{"name": "bug", "url": f"{base}/labels/bug"}] * (i % 3),
             "body": f"text {i}, " * (i % 5)} for i in range(28)]  # fmt: skip


def test_the_aliased_solve_runs_in_the_helper_and_finds_the_same_encoding(helper):
    from tersetalk.formats.container import compact_json
    from tersetalk.formats.solver import ASIDE_SOLVE_MIN_CHARS, solve
    from tersetalk.formats.tree import from_python

    value = _api_page()
    assert len(compact_json(value)) >= ASIDE_SOLVE_MIN_CHARS
    asked = helper.sent
    helped = solve(from_python(value), tokenizer=TOK, sample=16)
    assert helper.sent == asked + 1 and helped.aliases > 0  # that one question: no count
    stop_count_helper()
    alone = solve(from_python(value), tokenizer=TOK, sample=16)
    assert helped == alone
