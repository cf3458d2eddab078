"""The MiniLM embedder both judges share: loaded on first use, once, and errors worded
by each judge as before (control flow only; the real model is used by the mediator's
integration test)."""

from __future__ import annotations

import pytest

from tersetalk.mediator.errors import JudgeError as MediatorJudgeError
from tersetalk.mediator.judges import EmbeddingJudge
from tersetalk.mediator.keys import KeyType, SemanticKey
from tersetalk.models import embedding
from tersetalk.models.embedding import EmbeddingUnavailableError, LazyEmbedder
from tersetalk.msp.errors import JudgeError as MSPJudgeError
from tersetalk.msp.judge import SemanticJudge


class _Counting:
    built = 0

    def __init__(self, model_path=None):
        type(self).built += 1
        self.model_path = model_path

    def similarity(self, a, b):
        return 0.75


def test_lazy_embedder_loads_on_first_use_and_only_once(monkeypatch):
    monkeypatch.setattr(embedding, "Embedder", _Counting)
    _Counting.built = 0
    lazy = LazyEmbedder("/some/folder")
    assert _Counting.built == 0
    assert lazy.similarity("a", "b") == 0.75 and lazy.similarity("c", "d") == 0.75
    assert _Counting.built == 1 and lazy.get().model_path == "/some/folder"


def test_a_given_embedder_is_used_as_is():
    given = _Counting()
    assert LazyEmbedder(embedder=given).get() is given


def test_both_judges_hold_the_one_lazy_wrapper(monkeypatch):
    monkeypatch.setattr(embedding, "Embedder", _Counting)
    _Counting.built = 0
    mediator, msp = EmbeddingJudge(0.5, model_path="/m"), SemanticJudge(0.5, model_path="/m")
    assert isinstance(mediator._embedder, LazyEmbedder) and isinstance(msp._embedder, LazyEmbedder)
    assert _Counting.built == 0
    keys = [SemanticKey(type=KeyType.STATE, value="the sky is blue")]
    assert mediator.evaluate("the sky is blue", keys).similarity == 0.75
    assert msp.evaluate("a", "b").similarity_score == 0.75
    assert _Counting.built == 2


def test_a_missing_model_is_each_judges_own_error(tmp_path):
    with pytest.raises(EmbeddingUnavailableError, match="config.json missing"):
        LazyEmbedder(tmp_path).get()
    with pytest.raises(MSPJudgeError, match="Sentence transformer model not available"):
        _ = SemanticJudge(model_path=str(tmp_path)).embedder
    keys = [SemanticKey(type=KeyType.STATE, value="x y")]
    with pytest.raises(MediatorJudgeError, match="embedding judge failed to compute embeddings"):
        EmbeddingJudge(0.5, model_path=str(tmp_path)).evaluate("x y", keys)
