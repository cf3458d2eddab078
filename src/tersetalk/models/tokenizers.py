"""Counting a served model's tokens where the server cannot: a tokenizer the user names.

Why: ``tokens_model`` (the messages' size in the model's own tokens) is one of the
three counts every run reports. The embedded llama.cpp model counts its own; llama.cpp's
and llama-cpp-python's servers have a tokenize endpoint; but the OpenAI API and most
hosted OpenAI-compatible providers have none. For those, ``models.tokenizer`` names
where the counts come from:

- ``gguf:<path>``: the model's GGUF file, its vocabulary loaded without the weights;
- ``tokenizer.json:<path>``: a Hugging Face ``tokenizer.json`` (the ``tokenizers``
  library, e.g. the file in the model's repository);
- ``tiktoken:<encoding>``: a tiktoken encoding (``o200k_base`` is the one of OpenAI's
  current models, ``cl100k_base`` of GPT-4 and GPT-3.5);
- ``none``: no model tokens; ``tokens_model`` is missing (null) in every row.

Without ``models.tokenizer`` a server's own tokenize endpoint is used when it has one.
When nothing can count, ``tokens_model`` is missing and the run file's
``tokens_model_source`` says why, rather than a number from another tokenizer
passing for the model's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .base import ModelEnvironmentError

__all__ = [
    "TOKENIZER_KINDS",
    "TokensUnavailableError",
    "load_tokenizer",
    "parse_tokenizer",
]

#: the kinds ``models.tokenizer`` accepts, each ``<kind>:<where>`` (``none`` alone)
TOKENIZER_KINDS = ("gguf", "tokenizer.json", "tiktoken", "none")


class TokensUnavailableError(ModelEnvironmentError):
    """The model's tokens cannot be counted here: the server has no tokenize endpoint
    and ``models.tokenizer`` names no tokenizer (or says ``none``).

    A message's ``tokens_model`` is then missing (see
    :meth:`tersetalk.agents.conversation.Conversation.send`); a step that cannot do
    without the model's tokens (a budget in model tokens) stops with this message.
    """


def parse_tokenizer(spec: str) -> tuple[str, str]:
    """``(kind, where)`` of a ``models.tokenizer`` value, or a :class:`ModelEnvironmentError`
    saying what is wrong and what is accepted."""
    text = str(spec).strip()
    if text == "none":
        return "none", ""
    kind, sep, where = text.partition(":")
    if not sep or kind not in TOKENIZER_KINDS or kind == "none" or not where.strip():
        raise ModelEnvironmentError(
            f"models.tokenizer: {spec!r} is not a tokenizer; give gguf:<path to the model's "
            "GGUF>, tokenizer.json:<path to a tokenizer.json>, tiktoken:<encoding, e.g. "
            "o200k_base> or none"
        )
    return kind, where.strip()


def load_tokenizer(spec: str) -> tuple[Callable[[str], int] | None, str]:
    """A token counter for ``spec`` and the label its counts are recorded under.

    ``none`` gives ``(None, "missing: models.tokenizer is none")``. A file that is
    missing or not a tokenizer raises :class:`ModelEnvironmentError` at once: every
    message would fail the same way.
    """
    kind, where = parse_tokenizer(spec)
    if kind == "none":
        return None, "missing: models.tokenizer is none"
    if kind == "tiktoken":
        from tersetalk.core.tokens import ENCODINGS, get_encoding

        if where not in ENCODINGS:
            raise ModelEnvironmentError(
                f"models.tokenizer: unknown tiktoken encoding {where!r}; use one of "
                f"{', '.join(ENCODINGS)}"
            )
        enc = get_encoding(where)
        return (lambda text: len(enc.encode(text, disallowed_special=()))), f"tiktoken:{where}"
    path = Path(where).expanduser()
    if not path.is_file():
        raise ModelEnvironmentError(
            f"models.tokenizer: {kind} file {str(path)!r} does not exist; give the path of "
            f"the model's {'GGUF file' if kind == 'gguf' else 'tokenizer.json'}"
        )
    if kind == "gguf":
        from .llamacpp import GGUFTokenizer

        try:
            counter: Callable[[str], int] = GGUFTokenizer(path)
        except Exception as exc:  # noqa: BLE001 - llama.cpp says little; we say which file
            raise ModelEnvironmentError(
                f"models.tokenizer: {str(path)!r} is not a GGUF file llama.cpp can read "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        return counter, f"gguf:{path.name}"
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # noqa: BLE001 - the library raises a bare Exception
        raise ModelEnvironmentError(
            f"models.tokenizer: {str(path)!r} is not a tokenizer.json the tokenizers "
            f"library can read ({exc})"
        ) from exc
    return (
        lambda text: len(tok.encode(text, add_special_tokens=False).ids)
    ), f"tokenizer.json:{path.name}"
