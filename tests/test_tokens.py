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
