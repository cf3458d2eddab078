"""The judges' sentence similarities kept between processes
(``models.embedding.similarity_memo``, opened by the runner per run spec).

A rerun of a mediator or MSP run asks the same similarities; with the memo it reads them
back and never loads sentence-transformers and MiniLM. The numbers must be the model's.
"""

from __future__ import annotations

import json

import pytest

from tersetalk.models import embedding
from tersetalk.models.embedding import Embedder, LazyEmbedder, similarity_memo

PAIRS = [
    ("Paris is the capital of France.", "France's capital is Paris."),
    ("The answer is 42.", "Bob bought 3 apples."),
    ("", "anything"),
]


def sims(judge):
    return [judge.similarity(a, b) for a, b in PAIRS]


@pytest.fixture(scope="module")
def real():
    return [Embedder().similarity(a, b) for a, b in PAIRS]


def test_memoised_similarities_are_the_models_and_load_nothing(tmp_path, monkeypatch, real):
    path, fps = tmp_path / "sim.json", tmp_path / "fingerprints"
    with similarity_memo(path, fps):
        first = sims(LazyEmbedder())
    assert first == real
    body = json.loads(path.read_text())
    assert len(body["values"]) == len(PAIRS) and "sentence-transformers" in body["identity"]

    def no_model(self):
        raise AssertionError("loaded MiniLM although the memo holds every similarity")

    monkeypatch.setattr(Embedder, "model", property(no_model))
    with similarity_memo(path, fps):
        assert sims(LazyEmbedder()) == real
        # the judges as the systems hold them: through their ``embedder`` property
        from tersetalk.mediator.judges import EmbeddingJudge
        from tersetalk.msp.judge import SemanticJudge

        a, b = PAIRS[0]
        assert SemanticJudge(0.5).evaluate(a, b).similarity_score == round(max(0, real[0]), 6)
        assert EmbeddingJudge(0.5).embedder.similarity(a, b) == real[0]


class _Double:
    """A judge's test double: its numbers must never enter a memo."""

    def similarity(self, a, b):
        return 0.5


def test_a_test_double_is_never_memoised(tmp_path):
    path = tmp_path / "sim.json"
    with similarity_memo(path):
        assert sims(LazyEmbedder(embedder=_Double())) == [0.5] * len(PAIRS)
    assert not path.exists()


def test_another_model_folder_or_package_version_misses(tmp_path, monkeypatch, real):
    path = tmp_path / "sim.json"
    with similarity_memo(path):
        sims(LazyEmbedder())
    calls = []
    real_model = Embedder.model.fget

    def counting(self):
        calls.append(1)
        return real_model(self)

    monkeypatch.setattr(Embedder, "model", property(counting))
    monkeypatch.setattr(embedding, "versions", lambda *names: dict.fromkeys(names, "0.0"))
    with similarity_memo(path):
        assert sims(LazyEmbedder()) == real
    assert len(calls) == len(PAIRS)  # the file was written under other versions


@pytest.mark.parametrize("damage", ["", "{", '{"format": 1, "identity": {}, "values": []}'])
def test_a_damaged_memo_is_computed_again(tmp_path, damage, real):
    path = tmp_path / "sim.json"
    path.write_text(damage)
    with similarity_memo(path):
        assert sims(LazyEmbedder()) == real
    assert len(json.loads(path.read_text())["values"]) == len(PAIRS)


def test_a_value_that_is_no_similarity_is_not_believed(tmp_path, real):
    path = tmp_path / "sim.json"
    with similarity_memo(path):
        sims(LazyEmbedder())
    body = json.loads(path.read_text())
    body["values"] = {k: 7.0 for k in body["values"]}  # outside [-1, 1]
    path.write_text(json.dumps(body))
    with similarity_memo(path):
        assert sims(LazyEmbedder()) == real


def test_an_unreadable_model_folder_turns_the_memo_off(tmp_path, monkeypatch):
    path = tmp_path / "sim.json"
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "weights.bin").write_text("w")

    def unreadable(folder, memo_dir=None):
        raise PermissionError("no read permission")

    import tersetalk.models.fingerprint as fp

    monkeypatch.setattr(fp, "folder_sha256", unreadable)
    monkeypatch.setattr(Embedder, "model", property(lambda self: _Model()))
    with similarity_memo(path):
        assert Embedder(folder).similarity("a", "b") == 0.5
    assert not path.exists()


class _Model:
    def encode(self, texts, **kwargs):
        import numpy as np

        return np.array([[1.0, 0.0], [0.5, 0.0]])
