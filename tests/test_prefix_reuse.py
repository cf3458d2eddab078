"""Prompt prefix reuse in the embedded backend: the KV cache of a prefix shared
with an earlier call is kept only where the answer stays byte-identical to evaluating
the whole prompt from an empty cache.

The plan (which tokens may be kept) is checked on its own, exhaustively on small sizes;
the integration tests run real call sequences (a star exchange on real GSM8K problems,
a revise round that quotes the Worker's answer, a structured call under a grammar, a
prompt longer than one ubatch, and two threads sharing one client) through a client
with reuse and one without, and compare every answer byte for byte.
"""

from __future__ import annotations

import gzip
import json
import threading
from itertools import product
from pathlib import Path

import numpy as np
import pydantic
import pytest

from tersetalk.models.base import GenerationConfig
from tersetalk.models.llamacpp import (
    SPAN_INVARIANT_MIN,
    _PrefixStore,
    _Snapshot,
    reusable_prefix,
    ubatch_spans,
)

# -- the plan -----------------------------------------------------------------------


def test_ubatch_spans_cut_chunks_then_ubatches():
    assert ubatch_spans(0, 1100, 512, 512) == [(0, 512), (512, 1024), (1024, 1100)]
    assert ubatch_spans(300, 1100, 512, 512) == [(300, 812), (812, 1100)]
    assert ubatch_spans(0, 600, 512, 256) == [(0, 256), (256, 512), (512, 600)]
    assert ubatch_spans(5, 5, 512, 512) == []


def _small(spans):
    return [s for s in spans if s[1] - s[0] < SPAN_INVARIANT_MIN]


def _allowed(k, n_prompt, n_batch, n_ubatch):
    """The rule the plan must follow, stated directly: the reused tokens sit in large
    ubatches from scratch too, and the rest is cut into the same small ubatches."""
    scratch = ubatch_spans(0, n_prompt, n_batch, n_ubatch)
    if any(b < k for b, _ in _small(scratch)):
        return False
    return _small(ubatch_spans(k, n_prompt, n_batch, n_ubatch)) == _small(scratch)


@pytest.mark.parametrize("n_batch,n_ubatch", [(64, 64), (64, 32), (96, 48), (40, 40)])
def test_reusable_prefix_is_the_longest_allowed(n_batch, n_ubatch):
    for n_prompt, common, invariant in product(range(1, 150), range(0, 150, 7), (0, 50, 149)):
        k = reusable_prefix(common, invariant, n_prompt, n_batch, n_ubatch)
        top = min(common, invariant, n_prompt - 1)
        assert 0 <= k <= max(top, 0)
        assert k == 0 or _allowed(k, n_prompt, n_batch, n_ubatch)
        assert not any(_allowed(j, n_prompt, n_batch, n_ubatch) for j in range(k + 1, top + 1))


def test_reusable_prefix_keeps_the_last_ubatch_as_large_as_from_scratch():
    # from scratch 300 tokens are one ubatch; 10 tokens alone would be a small one
    assert reusable_prefix(290, 290, 300, 512, 512) == 300 - SPAN_INVARIANT_MIN
    # from scratch the 513th token is alone: reuse must leave it alone too
    assert reusable_prefix(512, 512, 513, 512, 512) == 512
    assert reusable_prefix(511, 511, 513, 512, 512) == 0
    # never the whole prompt: the last token is evaluated so that there are logits
    assert reusable_prefix(400, 400, 400, 512, 512) == 400 - SPAN_INVARIANT_MIN
    # nothing more than what was evaluated in large ubatches
    assert reusable_prefix(200, 100, 300, 512, 512) == 100


def test_prefix_store_keeps_the_longest_and_stays_within_budget():
    def snap(tokens, size=10):
        return _Snapshot(np.array(tokens), b"x" * size)

    store = _PrefixStore(max_bytes=30)
    store.add(snap([1, 2]))
    store.add(snap([1, 2, 3]))  # covers [1, 2]
    assert [list(s.tokens) for s in store.items] == [[1, 2, 3]]
    assert store.covering(np.array([1, 2])) is store.items[0]
    assert store.covering(np.array([1, 3])) is None
    store.add(snap([7]))
    store.add(snap([8]))
    store.add(snap([9]))  # 40 bytes: the oldest goes
    assert [list(s.tokens) for s in store.items] == [[7], [8], [9]]
    store.add(snap([5], size=31))  # larger than the whole budget: not kept
    assert store.items == []


# -- real calls with the embedded model ---------------------------------------------

llama_cpp = pytest.importorskip("llama_cpp")

DATA = Path(__file__).resolve().parents[1] / "data"


def _gsm8k(n: int) -> list[dict]:
    with gzip.open(DATA / "gsm8k" / "test.jsonl.gz", "rt") as fh:
        return [json.loads(next(fh)) for _ in range(n)]


class Verdict(pydantic.BaseModel):
    verdict: str = pydantic.Field(pattern="^(accept|revise)$")
    reason: str = pydantic.Field(max_length=60)


def _conversation(client, problems) -> list[tuple]:
    """The star exchange on each problem, as the star topology sends it: the Worker,
    the Critic (free text, then structured under the grammar), and a revise round that
    quotes the Worker's answer (generated tokens, which must never be reused)."""
    from tersetalk.agents.roles import CRITIC_SYSTEM, REVISE_INSTRUCTION, render_brief
    from tersetalk.tasks.gsm8k import WORKER_SYSTEM, brief

    gen = GenerationConfig(max_tokens=48, seed=1234)
    out = []

    def log(role, r):
        out.append((role, r.text, r.parsed, r.prompt_tokens, r.completion_tokens, r.extra))

    for problem in problems:
        text = render_brief(brief(problem, {}))
        worker = [{"role": "system", "content": WORKER_SYSTEM}, {"role": "user", "content": text}]
        answer = client.chat(worker, gen)
        log("worker", answer)
        critic = [
            {"role": "system", "content": CRITIC_SYSTEM},
            {"role": "user", "content": f"{text}\nWorker's answer: {answer.text}"},
        ]
        log("critic", client.chat(critic, GenerationConfig(max_tokens=16, seed=1234)))
        log("verdict", client.structured(critic, Verdict, gen))
        revise = [
            *worker,
            {"role": "assistant", "content": answer.text},
            {"role": "user", "content": REVISE_INSTRUCTION.format(feedback="Check it.")},
        ]
        log("revise", client.chat(revise, gen))
    return out


@pytest.fixture(scope="module")
def twins():
    from tersetalk.models.llamacpp import LlamaCppClient

    off = LlamaCppClient(n_threads=1, seed=1234, reuse_prefix=False)
    on = LlamaCppClient(n_threads=1, seed=1234, reuse_prefix=True)
    yield off, on
    off.close()
    on.close()


@pytest.fixture(scope="module")
def problems():
    return _gsm8k(2)


@pytest.fixture(scope="module")
def expected(twins, problems):
    """Each problem's calls without reuse (they depend on nothing that came before)."""
    off, _ = twins
    return [_conversation(off, [p]) for p in problems]


def _answers(calls):
    return [c[:5] for c in calls]


@pytest.mark.integration
def test_reused_prefixes_give_the_same_answers(twins, problems, expected):
    _, on = twins
    reused = _conversation(on, problems)
    assert _answers(reused) == [a for e in expected for a in _answers(e)]  # byte for byte
    assert all(c[5]["prompt_tokens_reused"] == 0 for e in expected for c in e)
    assert all(c[5]["reuse_prefix"] for c in reused)
    kept = sum(c[5]["prompt_tokens_reused"] for c in reused)
    assert kept > 0.3 * sum(c[3] for c in reused)  # the system prompts, the briefs
    # the revise round's prompt starts with the Worker's prompt and its answer: only the
    # prompt part may be kept, never the answer's (generated, evaluated one by one)
    for i, call in enumerate(reused):
        if call[0] == "revise":
            assert 0 < call[5]["prompt_tokens_reused"] <= reused[i - 3][3]


@pytest.mark.integration
def test_two_threads_sharing_one_client(problems, expected):
    """Calls of two examples interleave on one client (max_concurrency): the answers
    are still those of each call alone."""
    from tersetalk.models.llamacpp import LlamaCppClient

    on = LlamaCppClient(n_threads=1, seed=1234)
    got: dict[int, list] = {}

    def work(i: int) -> None:
        got[i] = _conversation(on, [problems[i]])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(problems))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    on.close()
    assert [_answers(got[i]) for i in range(len(problems))] == [_answers(e) for e in expected]


@pytest.mark.integration
def test_a_prompt_longer_than_one_ubatch(twins):
    off, on = twins
    facts = "\n".join(p["question"] for p in _gsm8k(15))  # about 900 tokens of real text
    gen = GenerationConfig(max_tokens=12, seed=1234)
    results = {}
    for name, client in (("off", off), ("on", on)):
        results[name] = []
        for tail in ("How many eggs?", "How many dollars?"):
            r = client.chat([{"role": "user", "content": f"{facts}\nQuestion: {tail}"}], gen)
            results[name].append((r.text, r.prompt_tokens, r.extra["prompt_tokens_reused"]))
    assert [r[:2] for r in results["on"]] == [r[:2] for r in results["off"]]
    assert results["on"][0][1] > on._llm.n_batch  # more than one ubatch
    assert results["on"][1][2] > on._llm.n_batch  # kept across a ubatch boundary


@pytest.mark.integration
def test_an_answer_quoted_by_the_next_prompt_is_evaluated_again(twins, problems):
    """The revise round sent right after the Worker's answer (as an Instructor re-ask
    is): its prompt extends the cache by the answer's tokens, which were evaluated one
    by one while generated. Stock llama-cpp-python reuses them, and changed 8 of 12 such
    answers on GSM8K; here only the Worker's prompt is kept.

    A fresh client: the module's one keeps the states of earlier tests' prompts, and one
    of them (the same revise round with a shorter answer, evaluated as a prompt) may
    rightly be reused past the Worker's prompt."""
    from tersetalk.agents.roles import REVISE_INSTRUCTION, render_brief
    from tersetalk.models.llamacpp import LlamaCppClient
    from tersetalk.tasks.gsm8k import WORKER_SYSTEM, brief

    gen = GenerationConfig(max_tokens=64, seed=1234)
    results = {}
    fresh = LlamaCppClient(n_threads=1, seed=1234, reuse_prefix=True)
    for name, client in (("off", twins[0]), ("on", fresh)):
        results[name] = []
        for problem in problems:
            worker = [
                {"role": "system", "content": WORKER_SYSTEM},
                {"role": "user", "content": render_brief(brief(problem, {}))},
            ]
            a = client.chat(worker, gen)
            b = client.chat(
                [*worker, {"role": "assistant", "content": a.text},
                 {"role": "user", "content": REVISE_INSTRUCTION.format(feedback="Check it.")}],
                gen,
            )  # fmt: skip
            results[name].append((a.text, b.text, b.prompt_tokens))
            if name == "on":
                assert 0 < b.extra["prompt_tokens_reused"] <= a.prompt_tokens
    fresh.close()
    assert results["on"] == results["off"]
