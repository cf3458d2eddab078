"""MB-2: boundary detection gives the same units for any chunking (no timing here)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tersetalk.bench.corpus import build_corpus
from tersetalk.bench.fields import Fields, to_jsonl, to_prose
from tersetalk.bench.framing import NewlineFramer, SentenceSplitter, split_sentences
from tersetalk.bench.mb2 import FRAMERS, build_streams, chunked, feed_all
from tersetalk.protocol import StreamReader, parse_strict


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


def _feed(framer, chunks):
    out = []
    for c in chunks:
        out += framer.feed(c)
    return out + framer.close()


def test_sentences_of_tricky_prose():
    text = (
        "Role: Manager. Goal: Solve it. Fact: Dr. Smith paid $3.50 for U.S. stamps. "
        'Fact: He said "Stop." Then he left at 5.30 and met J. K. Rowling. '
        "Fact: It weighs 12.5 kg, i.e. 27 lb. in all (approx. 3 bags). Plan step 1: Add 2 and 3! "
        "Question for the Worker: How many? Verdict: revise."
    )
    assert split_sentences(text) == [
        "Role: Manager.",
        "Goal: Solve it.",
        "Fact: Dr. Smith paid $3.50 for U.S. stamps.",
        'Fact: He said "Stop."',
        "Then he left at 5.30 and met J. K. Rowling.",
        "Fact: It weighs 12.5 kg, i.e. 27 lb. in all (approx. 3 bags).",
        "Plan step 1: Add 2 and 3!",
        "Question for the Worker: How many?",
        "Verdict: revise.",
    ]


def test_a_boundary_waits_for_the_next_character():
    s = SentenceSplitter()
    assert s.feed(b"One ends here. ") == []  # a capital must follow to be sure
    assert s.feed(b" ") == []
    assert s.feed(b"T") == ["One ends here."]
    assert s.feed(b"wo.") == []
    assert s.close() == ["Two."]


def test_a_character_split_across_chunks_is_decoded_once_whole():
    data = "Café Müller opened. Zürich is near…  Über alles.".encode()
    one_byte = [data[i : i + 1] for i in range(len(data))]
    assert _feed(SentenceSplitter(), one_byte) == split_sentences(data.decode())


_WORDS = ["Dr.", "U.S.", "Mr.", "J.", "e.g.", "3.5", "Stop.", '"Go."', "'Yes!'", "(approx.)",
          "end.", "Why?", "Wow!", "…", "and", "the", "Café", "Zürich", "42", "A", "b.", "\n",
          "  ", "Ünder", "x", ".", "?!", "“Quote.”", "[1]."]  # fmt: skip


@given(st.lists(st.sampled_from(_WORDS), max_size=40), st.lists(st.integers(0, 10_000)))
def test_sentence_splitter_is_chunking_invariant(words, cuts):
    data = " ".join(words).encode()
    assert _feed(SentenceSplitter(), _cut(data, cuts)) == split_sentences(data.decode())


@given(st.lists(st.text(max_size=20), max_size=12), st.lists(st.integers(0, 10_000)),
       st.booleans())  # fmt: skip
def test_newline_framer_is_chunking_invariant(parts, cuts, terminated):
    data = "\n".join(parts).encode("utf-8", "surrogatepass")
    if terminated and data:
        data += b"\n"
    whole = _feed(NewlineFramer(), [data])
    assert _feed(NewlineFramer(), _cut(data, cuts)) == whole
    expected = data.split(b"\n")
    if expected and expected[-1] == b"":
        expected.pop()
    assert whole == expected


@pytest.fixture(scope="module")
def corpus():
    df, _ = build_corpus([], sizes=[1, 4, 16], per_size=6, seed=5)
    return df


@pytest.mark.parametrize("size", [1, 3, 7, 64, 4096])
def test_every_mb2_method_gives_the_same_units_for_any_chunk_size(corpus, size):
    streams = build_streams(corpus, stream_bytes=4096, seed=1)
    data = {"jsonl": streams.jsonl, "prose": streams.prose}
    for name, framer in FRAMERS.items():
        whole = feed_all(framer.factory, [data[framer.stream]])
        assert feed_all(framer.factory, chunked(data[framer.stream], size)) == whole, name
    lines = feed_all(NewlineFramer, [streams.jsonl])
    assert len(lines) == streams.n_lines
    assert feed_all(lambda: StreamReader(strict=True), chunked(streams.jsonl, size)) == (
        parse_strict(streams.jsonl)
    )


def test_streams_hold_the_same_messages(corpus):
    streams = build_streams(corpus, stream_bytes=2048, seed=0)
    jsonl_msgs = streams.jsonl.decode().split("\n")
    assert streams.n_messages >= 2 and len(streams.jsonl) >= 2048
    prose = streams.prose.decode().rstrip("\n").split("\n")
    assert len(prose) == streams.n_messages
    # each prose paragraph renders the fields whose lines open the JSONL stream
    first = Fields.from_json(corpus[corpus["prose"] == prose[0]]["fields"].iloc[0])
    assert "\n".join(jsonl_msgs[: to_jsonl(first).count("\n") + 1]) == to_jsonl(first)
    assert to_prose(first) == prose[0]
    assert streams.n_real == 0 and streams.source == "synthetic"  # a synthetic-only corpus


def test_streams_say_whether_their_messages_are_real(corpus):
    real = corpus.assign(source="real")
    streams = build_streams(real, stream_bytes=1024, seed=0)
    assert streams.n_real == streams.n_messages > 0 and streams.source == "real"
    # a corpus without the column (older files): the group says it
    legacy = corpus.drop(columns="source").assign(group="real")
    assert build_streams(legacy, stream_bytes=1024, seed=0).source == "real"
    half = corpus.assign(source=["real" if i % 2 else "synthetic" for i in range(len(corpus))])
    mixed = build_streams(half, stream_bytes=4096, seed=0)
    assert 0 < mixed.n_real < mixed.n_messages and mixed.source == "real+synthetic"
