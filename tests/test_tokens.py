import pytest

from tersetalk.core.tokens import count_tokens, ensure_offline_tiktoken, get_encoding


def test_tiktoken_works_offline_with_known_counts():
    ensure_offline_tiktoken()
    # "hello world" is two tokens in both encodings; a longer text differs between them
    assert count_tokens("hello world", "cl100k_base") == 2
    assert count_tokens("hello world", "o200k_base") == 2
    enc = get_encoding("cl100k_base")
    assert enc.decode(enc.encode("Scott Derrickson")) == "Scott Derrickson"


def test_llmlingua_style_lookup_works_offline():
    # LLMLingua asks for the gpt-3.5-turbo encoding by model name in its constructor
    import tiktoken

    ensure_offline_tiktoken()
    assert tiktoken.encoding_for_model("gpt-3.5-turbo").name == "cl100k_base"


def test_the_ready_made_ranks_build_the_same_encoding_and_a_bad_copy_is_rebuilt(
    tmp_path, monkeypatch
):
    import tiktoken

    from tersetalk.core import tokens

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    tokens.ensure_offline_tiktoken()  # tiktoken's own reading below needs its files here
    text = 'Scott Derrickson\'s 2012 film, ünïcode and  spaces\n\t{"k": [1, 2.5]}'
    reference = tiktoken.get_encoding("cl100k_base")  # tiktoken's own reading of the ranks
    first = tokens._build("cl100k_base")  # writes the copy
    (blob,) = tmp_path.glob("cl100k_base.*.marshal")
    second = tokens._build("cl100k_base")  # reads it
    assert first.encode(text) == second.encode(text) == reference.encode(text)
    assert second.n_vocab == reference.n_vocab
    # a copy cut short or changed is ignored (its digest fails) and written again whole
    good = blob.read_bytes()
    blob.write_bytes(good[:-1000])
    assert tokens._read_params(blob, "cl100k_base") is None
    assert tokens._build("cl100k_base").encode(text) == reference.encode(text)
    assert blob.read_bytes() == good
    # a copy of another encoding under this name is not taken for it
    assert tokens._read_params(blob, "o200k_base") is None


def test_threads_asking_at_once_share_one_encoding(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from tersetalk.core import tokens

    built = []
    real = tokens._build
    monkeypatch.setattr(tokens, "_ENCODINGS", {})
    monkeypatch.setattr(tokens, "_build", lambda name: built.append(name) or real(name))
    with ThreadPoolExecutor(4) as pool:
        encs = list(pool.map(tokens.get_encoding, ["o200k_base"] * 8))
    assert built == ["o200k_base"] and all(e is encs[0] for e in encs)


def _generated_lines(seed: int, cases: int):
    """Seeded lists of short lines over letters, digits, punctuation, slashes and every
    kind of whitespace the tokenizers' splitting treats apart."""
    import random

    pieces = [*"aZé漢0 9,.;:/\\-|{}[]()'\"#\t\r\x0b\x0c\x85\u2028\u00a0🙂", "  ", "'s", "123456",
              "//", " \r", "\r\r", "..."]  # fmt: skip
    rng = random.Random(seed)
    for _ in range(cases):
        yield ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
               for _ in range(rng.randint(2, 5))]  # fmt: skip


def test_lines_that_join_exactly_count_the_same_whole_as_line_by_line():
    from tersetalk.core.tokens import lines_join_exactly

    joined = 0
    for name in ("o200k_base", "cl100k_base"):
        for lines in _generated_lines(7, 4000):
            if not lines_join_exactly(lines):
                continue
            joined += 1
            each = sum(count_tokens(line + "\n", name) for line in lines)
            assert count_tokens("\n".join(lines) + "\n", name) == each, (name, lines)
    assert joined > 1000  # the generator reaches the rule's True side often enough


def test_blank_lines_do_not_join_exactly_and_would_count_otherwise():
    from tersetalk.core.tokens import lines_join_exactly

    for lines in (["a", ""], ["a", "  "], ["a", "\t"]):
        assert not lines_join_exactly(lines)
        each = sum(count_tokens(line + "\n", "o200k_base") for line in lines)
        assert count_tokens("\n".join(lines) + "\n", "o200k_base") != each
    assert not lines_join_exactly(["x,", "/y"]) and not lines_join_exactly(["a.", "\ry"])
    assert lines_join_exactly(["id,name", "1,alpha beta", "  - nested: x"])


def test_a_count_made_aside_is_the_count_and_its_error_reaches_the_caller(monkeypatch):
    import threading

    from tersetalk.core import tokens

    text = "x " * tokens.ASIDE_MIN_CHARS
    started = threading.active_count()
    pending = tokens.count_tokens_aside(text, "o200k_base")
    assert pending() == count_tokens(text, "o200k_base")
    assert threading.active_count() == started  # its thread has ended
    # a short text is counted when asked for, on the caller's thread
    assert tokens.count_tokens_aside("a b", "o200k_base")() == count_tokens("a b", "o200k_base")

    def broken(text, name):
        raise RuntimeError("tokenizer failed")

    monkeypatch.setattr(tokens, "count_tokens", broken)
    pending = tokens.count_tokens_aside(text, "o200k_base")
    with pytest.raises(RuntimeError, match="tokenizer failed"):
        pending()
