"""Several examples in flight against a server backend.

Control flow runs against ``fake_openai_server`` (a real HTTP server on loopback whose
answers depend on the question, and which counts the requests it holds at once);
the last test runs the real embedded model behind llama-cpp-python's server and
checks that two examples in flight give the same deterministic columns as one.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import threading
import time

import pandas as pd
import pytest
from fake_openai_server import FakeServer

from tersetalk.agents.context import RunContext
from tersetalk.core.inflight import InFlight
from tersetalk.core.records import deterministic_columns
from tersetalk.models import (
    GenerationConfig,
    ModelUnavailableError,
    ScriptedClient,
    max_in_flight,
)
from tersetalk.models.recording import CallRecorder
from tersetalk.pipeline.config import ConfigError, run_spec, validate_config
from tersetalk.pipeline.runner import RunIncompleteError, checkpoint_path, run
from tersetalk.systems import validate_variant
from tersetalk.tasks.loading import load_records, sample

N = 6


class CountingServer(FakeServer):
    """Answers ``Answer: <digits of the question's hash>`` after a delay that varies per
    question (so examples finish out of order), and counts requests held at once.

    ``gate``: the first requests wait (up to 10 s) until that many are in, so a run
    allowed k in flight reaches k at the server whatever the machine's speed.
    """

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.peak = 0
        self.gate = 0
        self._count = threading.Lock()
        self._arrived = threading.Condition(self._count)
        self.respond_lock = threading.Lock()

    def _content(self, request):  # noqa: ANN001 - FakeServer's signature
        text = "\n".join(str(m.get("content")) for m in request["messages"])
        if str(request["messages"][0]["content"]).startswith("You are the Critic"):
            return "ACCEPT."
        return f"Answer: {int(hashlib.sha256(text.encode()).hexdigest()[:6], 16) % 1000}"

    def respond(self, h, mode, request):  # noqa: ANN001
        text = "\n".join(str(m.get("content")) for m in request.get("messages", []))
        with self._count:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self._arrived.notify_all()
            if self.gate:
                self._arrived.wait_for(lambda: self.in_flight >= self.gate, timeout=10)
                self.gate = 0  # once: later requests are not held
        try:
            time.sleep(0.01 * (int(hashlib.sha256(text.encode()).hexdigest()[:2], 16) % 8))
            super().respond(h, mode, request)
        finally:
            with self._count:
                self.in_flight -= 1


@pytest.fixture
def server():
    srv = CountingServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def setup(tmp_path, base_config, repo, server):
    records = load_records("gsm8k", data_dir=repo / "data")
    ev, _ = sample("gsm8k", records, n=N, calibration_n=0, seed=5)
    path = tmp_path / "sample.parquet"
    ev.to_parquet(path)
    base_config["models"].update(backend="openai", model="fake", base_url=server.base_url,
                                 max_retries=1, timeout_s=30)  # fmt: skip

    def spec(n: int) -> dict:
        cfg = json.loads(json.dumps(base_config))
        cfg["models"]["max_concurrency"] = n
        cfg["cache_dir"] = str(tmp_path / "cache")  # part of spec_hash: the same for all
        return run_spec(cfg, "gsm8k", "freeform", "default")

    return spec, path, tmp_path


def test_examples_in_flight_keep_order_and_deterministic_columns(setup, server):
    spec, sample_path, tmp = setup
    one = run(spec(1), sample_path, tmp / "one.parquet", progress=False)
    assert server.peak == 1  # one example at a time, one call at a time
    shutil.rmtree(tmp / "cache")  # every call reaches the server again
    server.peak, server.gate = 0, 3
    three = run(spec(3), sample_path, tmp / "three.parquet", progress=False)
    assert server.peak == 3  # never more than asked, and really that many
    assert list(three["example_id"]) == list(pd.read_parquet(sample_path)["example_id"])
    assert three["error"].isna().all() and three["prediction"].nunique() > 1
    cols = deterministic_columns(one)
    assert "spec_hash" in cols and "prediction" in cols and "messages" in cols
    pd.testing.assert_frame_equal(one[cols], three[cols])  # spec_hash too: not in the hash
    assert pd.read_parquet(tmp / "three.parquet")[cols].equals(three[cols])


def test_an_example_error_is_a_row_and_a_server_fault_is_retried_next_run(setup, server):
    spec, sample_path, tmp = setup
    questions = list(pd.read_parquet(sample_path)["question"])
    out = tmp / "out.parquet"
    # the first example's calls always get an empty answer (the model's doing: an
    # error row); the fourth's get HTTP 500 (the server's: retried on the next run)
    bad = {questions[0][:40]: "empty_stream", questions[3][:40]: "500"}
    orig = server.respond

    def respond(h, mode, request):  # noqa: ANN001
        text = "\n".join(str(m.get("content")) for m in request.get("messages", []))
        mode = next((m for q, m in bad.items() if q in text), mode)
        orig(h, mode, request)

    server.respond = respond
    with pytest.raises(RunIncompleteError, match="1 of 6 examples failed"):
        run(spec(3), sample_path, out, progress=False)
    kept = [json.loads(line) for line in checkpoint_path(out).read_text().splitlines()]
    assert len(kept) == N - 1 and not out.exists()
    assert sum(r["error"] is not None for r in kept) == 1
    server.respond = orig  # the server recovers; resume at another concurrency
    n_before = len(server.chat_requests())
    df = run(spec(2), sample_path, out, progress=False)
    assert len(df) == N and df["error"].notna().sum() == 1
    assert "empty content" in df["error"].iloc[0]
    assert len(server.chat_requests()) - n_before == 2  # only example 4 ran: Worker, Critic


def test_server_down_stops_submitting_and_keeps_what_was_in_flight(setup):
    spec, sample_path, tmp = setup
    out = tmp / "out.parquet"
    questions = [q[:40] for q in pd.read_parquet(sample_path)["question"]]
    started: list[int] = []  # examples in the order their first call came
    lock, failed = threading.Lock(), threading.Event()

    def model(messages):
        text = "\n".join(m["content"] for m in messages)
        if str(messages[0]["content"]).startswith("You are the Critic"):
            return "ACCEPT."
        with lock:
            i = next(i for i, q in enumerate(questions) if q in text)
            if i not in started:
                started.append(i)
            k = started.index(i)
        if k == 1:
            failed.set()
            raise ModelUnavailableError("no server at http://127.0.0.1:9/v1: start one")
        if k == 0:
            failed.wait(10)  # in flight while the other fails
            time.sleep(0.1)
        return "Answer: 7"

    with pytest.raises(ModelUnavailableError, match="start one"):
        run(spec(2), sample_path, out, client=ScriptedClient(model), progress=False)
    kept = checkpoint_path(out).read_text().splitlines()
    # two started; the second failed: no example started after that (one more, at most,
    # if the first finished before the failure was handled), and every example that
    # was in flight, not failed, was kept
    assert sorted(started[:2]) == [0, 1] and len(started) <= 3
    assert len(kept) == len(started) - 1 and not out.exists()


def test_a_kill_on_the_main_thread_loses_no_finished_example(setup):
    spec, sample_path, tmp = setup
    out = tmp / "out.parquet"
    calls = {"n": 0}
    lock = threading.Lock()

    def model(messages):
        with lock:
            calls["n"] += 1
            n = calls["n"]
        if n == 7:
            raise KeyboardInterrupt  # as Ctrl-C: a BaseException reaches the run
        return "ACCEPT." if str(messages[0]["content"]).startswith("You are the Critic") else "7"

    with pytest.raises(KeyboardInterrupt):
        run(spec(2), sample_path, out, client=ScriptedClient(model), progress=False)
    kept = [
        json.loads(line)["example_id"] for line in checkpoint_path(out).read_text().splitlines()
    ]
    df = run(spec(2), sample_path, out, client=ScriptedClient(model), progress=False)
    assert len(df) == N and set(kept) <= set(df["example_id"]) and df["error"].isna().all()


def jittery(messages, gen, schema):
    """Answers that depend on the example, after a pause that varies per call, so the
    mediator's calls of examples in flight interleave (its recorder is per run)."""
    text = "\n".join(m["content"] for m in messages)
    h = int(hashlib.sha256(text.encode()).hexdigest()[:6], 16)
    time.sleep(0.002 * (h % 10))
    if schema is not None:
        if schema.__name__ == "KeysDraft":
            return json.dumps({"keys": [{"type": "GOAL", "value": f"answer {h % 97}"}]})
        return json.dumps({"passed": h % 2 == 0, "confidence": 0.5, "issues": []})
    first = messages[0]["content"]
    if first.startswith("You compress"):
        return " ".join(["fact"] * (1 + h % 5)) + ". Question?"
    if first.startswith("You are the Critic"):
        return "ACCEPT."
    return f"Answer: {h % 1000}"


def test_mediator_calls_stay_with_their_example_when_examples_overlap(setup):
    spec, sample_path, tmp = setup
    frames = {}
    for n in (1, 3):
        s = spec(n)
        s["system"], s["variant"] = "mediator", "v"
        s["variant_settings"] = validate_variant(
            "mediator", "v", {"budget": 12, "extractor": "llm", "judge": True,
                              "judge_kind": "llm"})  # fmt: skip
        frames[n] = run(s, sample_path, tmp / f"m{n}.parquet", client=ScriptedClient(jittery),
                        progress=False)  # fmt: skip
    one, three = frames[1], frames[3]
    assert one["error"].isna().all() and (one["n_model_calls"] >= 4).all()
    cols = deterministic_columns(one)
    assert "n_model_calls" in cols and "counters" in cols
    pd.testing.assert_frame_equal(one[cols], three[cols])

    def log(calls: str) -> list[tuple]:
        return [(c["role"], c["prompt_tokens"], c["completion_tokens"]) for c in json.loads(calls)]

    assert list(map(log, one["calls"])) == list(map(log, three["calls"]))  # the call logs too


def test_llamacpp_with_more_than_one_in_flight_is_a_config_error(base_config):
    assert max_in_flight({"backend": "llamacpp"}) == 1
    assert max_in_flight({"backend": "ollama", "max_concurrency": 8}) == 8
    base_config["models"]["max_concurrency"] = 2
    with pytest.raises(ConfigError, match=r"'models\.max_concurrency'.*backend is 'llamacpp'"):
        validate_config(base_config)


def test_inflight_never_exceeds_its_limit_and_returns_every_outcome():
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}
    barrier = threading.Barrier(3, timeout=10)

    def work(i: int) -> int:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        if i < 3:
            barrier.wait()  # the first three run together, or this times out
        with lock:
            state["now"] -= 1
        if i == 5:
            raise ValueError("five")
        return i * i

    with InFlight(work, range(10), 3) as fl:
        got = dict(fl)
    assert state["peak"] == 3 == fl.peak
    assert isinstance(got.pop(5), ValueError) and got == {i: i * i for i in range(10) if i != 5}


def test_call_recorder_keeps_one_log_per_thread():
    rec = CallRecorder(ScriptedClient(lambda m: m[-1]["content"]), "mediator")
    other = rec.with_role("mediator_judge")
    go = threading.Barrier(2, timeout=10)
    seen: dict[str, list] = {}

    def example(name: str) -> None:
        go.wait()
        for k in range(3):
            (rec if k % 2 else other).chat([{"role": "user", "content": f"{name}{k}"}],
                                           GenerationConfig(max_tokens=4))  # fmt: skip
            time.sleep(0.001)
        seen[name] = [(role, r.text) for role, r in rec.drain()]

    threads = [threading.Thread(target=example, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in ("a", "b"):
        assert seen[name] == [("mediator_judge", f"{name}0"), ("mediator", f"{name}1"),
                              ("mediator_judge", f"{name}2")]  # fmt: skip


def test_run_context_builds_a_shared_resource_once_across_threads():
    ctx = RunContext(task="gsm8k", client=None, gen=None, critic_gen=None)
    built = []
    go = threading.Barrier(4, timeout=10)

    def factory():
        built.append(1)
        time.sleep(0.05)
        return object()

    got = []

    def use():
        go.wait()
        got.append(ctx.resource("k", factory))

    threads = [threading.Thread(target=use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and len({id(g) for g in got}) == 1


def test_served_model_starts_every_request_from_an_empty_cache(monkeypatch):
    import llama_cpp

    from tersetalk.models.llamacpp_server import fresh_kv_per_request, server_argv

    resets: list[str] = []

    class Model:
        def reset(self):
            resets.append("reset")

    def generate(self, tokens, top_k=40, top_p=0.95, min_p=0.05, typical_p=1.0, temp=0.8,
                 repeat_penalty=1.0, reset=True, **kw):  # fmt: skip
        resets.append(f"generate reset={reset}")
        return iter(tokens)

    monkeypatch.setattr(llama_cpp.Llama, "generate", generate)
    fresh_kv_per_request()
    fresh_kv_per_request()  # idempotent: wrapped once
    m = Model()
    assert list(llama_cpp.Llama.generate(m, [1, 2])) == [1, 2]
    llama_cpp.Llama.generate(m, [1], reset=False)  # llama.cpp continuing its own prompt
    llama_cpp.Llama.generate(m, [1], 40, 0.95, 0.05, 1.0, 0.8, 1.0, False)  # positional
    assert resets == ["reset", "generate reset=True", "generate reset=False",
                      "generate reset=False"]  # fmt: skip
    assert server_argv(["--model", "x"]) == (
        ["--model", "x", "--interrupt_requests", "False"], False)  # fmt: skip
    assert server_argv(["--reuse_prefix", "--interrupt_requests", "True"]) == (
        ["--interrupt_requests", "True"], True)  # fmt: skip


# -- the real model behind llama-cpp-python's server ---------------------------------


@pytest.mark.integration
def test_two_in_flight_on_the_real_server_match_one(tmp_path, base_config, repo):
    from test_models_server import ALIAS  # the main install brings the server's packages

    from tersetalk.bench.concurrency import served

    records = load_records("gsm8k", data_dir=repo / "data")
    ev, _ = sample("gsm8k", records, n=2, calibration_n=0, seed=11)
    path = tmp_path / "sample.parquet"
    ev.to_parquet(path)
    with served(n_servers=1, log_dir=tmp_path, alias=ALIAS) as base_url:
        base_config["models"].update(backend="openai", model=ALIAS, base_url=base_url,
                                     stream=False, max_retries=2)  # fmt: skip
        base_config["generation"].update(max_tokens=48, critic_max_tokens=16)
        frames = {}
        for n in (1, 2):
            cfg = json.loads(json.dumps(base_config))
            cfg["models"]["max_concurrency"] = n
            cfg["cache_dir"] = str(tmp_path / "cache")
            shutil.rmtree(tmp_path / "cache", ignore_errors=True)  # real calls both times
            spec = run_spec(cfg, "gsm8k", "freeform", "default")
            frames[n] = run(spec, path, tmp_path / f"mc{n}.parquet", progress=False)
    one, two = frames[1], frames[2]
    assert one["error"].isna().all() and (one["cache_hits"] == 0).all()
    assert (two["cache_hits"] == 0).all() and (one["usage_completion_tokens"] > 0).all()
    cols = deterministic_columns(one)
    pd.testing.assert_frame_equal(one[cols], two[cols])
    assert re.search(r"\S", " ".join(one["raw_answer"]))
