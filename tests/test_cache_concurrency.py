"""The call cache shared by several processes on one folder.

Real processes (multiprocessing, spawn) write and read one cache folder at once:
4 writers x 200 writes of overlapping keys while a reader process keeps opening
every entry it can see. Entries are large (about 60 kB), so a write that was not
atomic would be caught half-done by the reader or left torn on disk.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import random
from pathlib import Path

import pytest

from tersetalk.models import CachedClient, CallResult, GenerationConfig, ScriptedClient

N_WRITERS, N_WRITES, N_KEYS = 4, 200, 60
GEN = GenerationConfig(max_tokens=8)
PAD = 60_000  # characters per answer: a torn write would show


def messages(j: int) -> list[dict]:
    return [{"role": "user", "content": f"question {j}"}]


def answer(j: int) -> str:
    """The one right answer to key ``j`` (long, and checkable from its first line)."""
    digest = hashlib.sha256(str(j).encode()).hexdigest()
    return f"answer {j} {digest}\n" + digest[j % 8] * PAD


def result(j: int, writer: int) -> CallResult:
    # the timing differs per writer (as two real jobs' would); the answer does not
    return CallResult(text=answer(j), parsed=None, prompt_tokens=3, completion_tokens=2,
                      ttft_s=None, itl_s=None, total_s=0.001 * (writer + 1), attempts=1,
                      cache_hit=False, backend="scripted", model="scripted")  # fmt: skip


def cache(folder: str) -> CachedClient:
    return CachedClient(ScriptedClient(lambda m: answer(int(m[-1]["content"].split()[-1]))), folder)


def writer(folder: str, w: int, start, out) -> None:
    c = cache(folder)
    rng = random.Random(w)
    written, served = set(), 0
    start.wait()
    for i in range(N_WRITES):
        j = rng.randrange(N_KEYS)
        if i % 4 == 0:  # through the client: a lookup, then a store on a miss
            r = c.chat(messages(j), GEN)
            assert r.text == answer(j)
            served += 1
        else:  # a store whatever is there: what a job that missed does next
            material = c.key_material("chat", messages(j), GEN, None)
            c._store(c.key(material), material, result(j, w))
        written.add(j)
    out.put((w, sorted(written), served))


def reader(folder: str, start, stop, out) -> None:
    seen = bad = 0
    problems: list[str] = []
    start.wait()
    while not stop.is_set():
        for path in Path(folder).glob("*/*.json"):
            try:
                raw = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                continue  # replaced between the listing and the open: not an entry seen
            seen += 1
            try:
                entry = json.loads(raw)
                text = entry["result"]["text"]
                j = int(text.split()[1])
                assert entry["key"] == path.stem and text == answer(j)
            except Exception as exc:  # noqa: BLE001 - every failure is a finding
                bad += 1
                problems.append(f"{path.name}: {type(exc).__name__} ({len(raw)} bytes)")
    out.put((seen, bad, problems[:5]))


def same_call(folder: str, start, computing, out) -> None:
    def slow(m):
        computing.wait()  # both jobs have missed before either stores, however late one starts
        return answer(7)

    c = CachedClient(ScriptedClient(slow), folder)
    start.wait()
    r = c.chat(messages(7), GEN)
    out.put((r.text == answer(7), c.misses, c.hits))


@pytest.fixture
def ctx():
    return mp.get_context("spawn")


def test_concurrent_writers_and_a_reader_on_one_folder(tmp_path, ctx):
    folder = str(tmp_path / "calls")
    start = ctx.Barrier(N_WRITERS + 1, timeout=120)
    stop, out, seen = ctx.Event(), ctx.Queue(), ctx.Queue()
    rd = ctx.Process(target=reader, args=(folder, start, stop, seen))
    ws = [ctx.Process(target=writer, args=(folder, w, start, out)) for w in range(N_WRITERS)]
    for p in [rd, *ws]:
        p.start()
    results = [out.get(timeout=300) for _ in ws]
    for p in ws:
        p.join(timeout=60)
        assert p.exitcode == 0
    stop.set()
    n_seen, n_bad, problems = seen.get(timeout=60)
    rd.join(timeout=60)
    assert n_bad == 0, problems  # no reader ever saw a partial or foreign entry
    assert n_seen > N_KEYS  # and it did read while the writers wrote
    assert sum(served for _, _, served in results) == N_WRITERS * N_WRITES // 4

    written = set().union(*(set(keys) for _, keys, _ in results))
    files = sorted(Path(folder).glob("*/*.json"))
    assert len(files) == len(written) and len(written) > N_KEYS // 2  # one entry per key
    assert not [p for p in Path(folder).rglob("*") if p.is_file() and p.suffix != ".json"]
    check = cache(folder)  # a fresh client (another job) finds every entry, whole
    for j in written:
        assert check.chat(messages(j), GEN).text == answer(j)
    assert (check.hits, check.misses) == (len(written), 0)


def test_two_jobs_computing_the_same_call_leave_one_valid_entry(tmp_path, ctx):
    folder = str(tmp_path / "calls")
    start, computing = ctx.Barrier(2, timeout=120), ctx.Barrier(2, timeout=120)
    out = ctx.Queue()
    ps = [ctx.Process(target=same_call, args=(folder, start, computing, out)) for _ in range(2)]
    for p in ps:
        p.start()
    got = [out.get(timeout=120) for _ in ps]
    for p in ps:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert got == [(True, 1, 0), (True, 1, 0)]  # both missed and computed the call
    files = list(Path(folder).glob("*/*"))
    assert len(files) == 1 and files[0].suffix == ".json"
    entry = json.loads(files[0].read_text())
    assert entry["result"]["text"] == answer(7) and entry["key"] == files[0].stem


def test_an_entry_gets_the_mode_of_any_new_file(tmp_path):
    import os
    import stat

    c = cache(str(tmp_path / "calls"))
    c.chat(messages(1), GEN)
    (entry,) = (tmp_path / "calls").glob("*/*.json")
    plain = tmp_path / "plain"
    plain.write_text("x")  # what open() makes under this process's umask
    assert stat.S_IMODE(entry.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
    old = os.umask(0o002)  # a group-shared cache: group members read and replace entries
    try:
        c.chat(messages(2), GEN)
    finally:
        os.umask(old)
    new = c.path_for(c.key(c.key_material("chat", messages(2), GEN, None)))
    assert stat.S_IMODE(new.stat().st_mode) == 0o664
