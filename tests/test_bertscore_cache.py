"""BERTScore's results kept between processes (``tersetalk score --cache-dir``).

A forced rerun scores the same texts again; with the cache it reads the scores back bit
for bit and never imports torch. The first call in each test is the real encoder; the
doubles below only stand in for it where a test is about control flow (a damaged entry,
a failure that must not be cached).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from tersetalk.metrics import preservation
from tersetalk.metrics.preservation import CACHE_FOLDER, bertscore_f1, bertscore_f1_groups

CANDS = ["Paris is the capital of France.", "The answer is 42 apples."]
REFS = ["France's capital city is Paris.", "She has 42 apples in total."]


def entries(cache):
    return sorted((cache / CACHE_FOLDER).glob("*/*.json"))


class _Broken:
    def score(self, *args, **kwargs):
        raise AssertionError("the encoder was used although the cache holds the scores")


def test_a_cached_score_is_bit_identical_and_loads_no_encoder(tmp_path, monkeypatch):
    first, method = bertscore_f1(CANDS, REFS, tmp_path)
    assert method.startswith("bertscore-f1") and all(0 < x <= 1 for x in first)
    [entry] = entries(tmp_path)
    monkeypatch.setattr(preservation, "_scorer", lambda: _Broken())
    again, method_again = bertscore_f1(CANDS, REFS, tmp_path)
    assert again == first and method_again == method  # == on floats: bit for bit
    assert [x.hex() for x in again] == [x.hex() for x in first]
    assert entries(tmp_path) == [entry]


def test_other_texts_or_other_packages_are_scored_afresh(tmp_path, monkeypatch):
    bertscore_f1(CANDS, REFS, tmp_path)
    bertscore_f1(CANDS[::-1], REFS[::-1], tmp_path)  # same pairs, another batch order
    assert len(entries(tmp_path)) == 2
    versions = preservation._versions()
    monkeypatch.setattr(preservation, "_versions", lambda: {**versions, "torch": "0.0"})
    bertscore_f1(CANDS, REFS, tmp_path)
    assert len(entries(tmp_path)) == 3


class _Fake:
    """Stands in for BERTScorer: returns (P, R, F) with F = the candidate's length."""

    calls = 0

    def score(self, cands, refs, batch_size):
        _Fake.calls += 1
        f = [float(len(c)) for c in cands]
        return f, f, f


@pytest.mark.parametrize(
    "damage", ["", "{not json", '{"f1": [1.0]}', '{"f1": [[1.0]]}', '{"f1": [["x", "y"]]}']
)
def test_a_damaged_entry_is_computed_again_and_rewritten(tmp_path, monkeypatch, damage):
    monkeypatch.setattr(preservation, "_scorer", lambda: _Fake())
    want, _ = bertscore_f1(CANDS, REFS, tmp_path)
    [entry] = entries(tmp_path)
    entry.write_text(damage)
    calls = _Fake.calls
    assert bertscore_f1(CANDS, REFS, tmp_path)[0] == want
    assert _Fake.calls == calls + 1 and json.loads(entry.read_text())["f1"] == [want]


def test_a_failure_is_reported_and_not_cached(tmp_path, monkeypatch):
    def boom():
        raise OSError("encoder files unreadable")

    monkeypatch.setattr(preservation, "_scorer", boom)
    scores, method = bertscore_f1(CANDS, REFS, tmp_path)
    assert all(x != x for x in scores) and method.startswith("unavailable (OSError")
    assert entries(tmp_path) == []


def test_without_a_cache_dir_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(preservation, "_scorer", lambda: _Fake())
    monkeypatch.chdir(tmp_path)
    bertscore_f1(CANDS, REFS)
    assert list(tmp_path.iterdir()) == []


SCORE_TWICE = """
import sys
from tersetalk.cli import main
main(sys.argv[1:])
print("TORCH", "torch" in sys.modules)
"""


def test_a_rescore_from_the_cache_imports_no_torch(tmp_path, repo, base_config):
    """What a forced rerun's score job does: the same runs scored again, in a new process."""
    from tersetalk.models import ScriptedClient
    from tersetalk.pipeline.config import run_spec
    from tersetalk.pipeline.runner import run
    from tersetalk.tasks.loading import load_records, sample

    ev, _ = sample("gsm8k", load_records("gsm8k", data_dir=repo / "data"), n=2,
                   calibration_n=0, seed=5)  # fmt: skip
    sample_path = tmp_path / "sample.parquet"
    ev.to_parquet(sample_path)
    base_config["cache_dir"] = str(tmp_path / "calls")
    paths = []
    for variant in ("default", "cod"):
        paths.append(tmp_path / f"{variant}.parquet")
        spec = run_spec(base_config, "gsm8k", "freeform", variant)
        client = ScriptedClient(lambda m: f"Answer: {len(m[-1]['content'])}")
        run(spec, sample_path, paths[-1], client=client, progress=False)
    outs = []
    for attempt in ("first", "again"):
        outs.append(tmp_path / f"{attempt}.parquet")
        summary = tmp_path / f"{attempt}_s.parquet"
        args = ["score", "--reference", str(paths[0]),
                "--cache-dir", str(tmp_path / "cache"), "--run", str(paths[1]),
                "--out-records", str(outs[-1]), "--out", str(summary)]  # fmt: skip
        done = subprocess.run([sys.executable, "-c", SCORE_TWICE, *args], cwd=repo,
                              capture_output=True, text=True, check=True)  # fmt: skip
        assert f"TORCH {attempt == 'first'}" in done.stdout, done.stderr[-2000:]
    assert outs[0].read_bytes() == outs[1].read_bytes()
    records = pd.read_parquet(outs[1])
    assert records["semantic_bertscore_f1"].notna().all()


class _Counting:
    """The real encoder, counting its calls and the texts it is given."""

    def __init__(self, scorer):
        self.scorer, self.calls = scorer, []

    def score(self, cands, refs, batch_size):
        self.calls.append(len(set(cands) | set(refs)))
        return self.scorer.score(cands, refs, batch_size=batch_size)


def test_groups_are_one_call_of_the_encoder_and_agree_with_each_alone(tmp_path, monkeypatch):
    """What the score job does with a task's runs: every run paired with the same
    references, in one call, so a text the runs share is embedded once."""
    groups = [(CANDS, REFS), (REFS, REFS), ([CANDS[0], "Lyon, not Paris."], REFS)]
    alone = [bertscore_f1(c, r)[0] for c, r in groups]
    counting = _Counting(preservation._scorer())
    monkeypatch.setattr(preservation, "_scorer", lambda: counting)
    together, method = bertscore_f1_groups(groups, tmp_path)
    assert counting.calls == [5] and method.startswith("bertscore-f1")  # 5 distinct texts
    assert [len(g) for g in together] == [2, 2, 2]
    for got, want in zip(together, alone, strict=True):
        assert got == pytest.approx(want, abs=1e-6)
    assert together[1] == pytest.approx([1.0, 1.0], abs=1e-6)  # a text against itself
    assert bertscore_f1_groups(groups, tmp_path)[0] == together  # the cache, bit for bit
    assert counting.calls == [5]
    bertscore_f1_groups(groups[:2], tmp_path)  # other groups: another entry
    assert len(counting.calls) == 2 and len(entries(tmp_path)) == 2


def test_empty_groups_load_no_encoder(monkeypatch):
    monkeypatch.setattr(preservation, "_scorer", lambda: _Broken())
    assert bertscore_f1_groups([([], []), ([], [])]) == ([[], []], bertscore_f1([], [])[1])


def test_unpaired_groups_are_refused():
    with pytest.raises(ValueError, match="2 candidates but 1 references"):
        bertscore_f1_groups([(CANDS, REFS[:1])])


def test_what_is_not_a_text_is_refused_not_scored_as_its_repr():
    with pytest.raises(TypeError, match="not NoneType"):
        bertscore_f1_groups([([CANDS[0], None], REFS)])
    with pytest.raises(TypeError, match="not bytes"):
        bertscore_f1(CANDS, [REFS[0], b"bytes"])


# Texts of six words each (bert_score orders its texts by word count: all tie) whose
# token lengths range from 6 to about 500, so which texts share a batch of 16 decides
# the padding, which moves the last bits of an embedding.
_TIES = """
import json, random
from tersetalk.metrics.preservation import bertscore_f1
rng = random.Random(7)
def word():
    n = rng.choice([1, 1, 2, 5, 20, 60])
    return ",".join(rng.choice(["cat", "42", "sun", "x", "tree", "blue"]) for _ in range(n))
texts = [" ".join(word() for _ in range(6)) for _ in range(64)]
scores, method = bertscore_f1(texts[:32], texts[32:])
assert method.startswith("bertscore-f1"), method
print(json.dumps([x.hex() for x in scores]))
"""


def test_the_same_texts_score_the_same_bits_in_every_process():
    """Ties in bert_score's order of embedding used to follow the process's str hashes:
    before the fix, PYTHONHASHSEED 1 and 2 gave these texts different last bits."""

    def scores(seed: str) -> list[str]:
        env = {**os.environ, "PYTHONHASHSEED": seed, "OMP_NUM_THREADS": "1"}
        out = subprocess.run([sys.executable, "-c", _TIES], env=env, capture_output=True,
                             text=True, check=True)  # fmt: skip
        return json.loads(out.stdout)

    first = scores("1")
    assert len(first) == 32
    assert scores("2") == first
