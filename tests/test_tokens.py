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
