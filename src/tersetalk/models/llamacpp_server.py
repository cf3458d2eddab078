"""``python -m tersetalk.models.llamacpp_server``: llama-cpp-python's OpenAI-compatible
server (``llama_cpp.server``, same arguments) with three changes for this project:

- the model is loaded without weight repacking, which segfaults on AMX CPUs (see
  :func:`tersetalk.models.llamacpp.without_weight_repacking`);
- every request starts from an empty KV cache: an answer then never depends on which
  requests came before it. Stock ``llama_cpp.server`` reuses the longest prefix the
  previous request left in the cache, the previous answer's tokens included, and
  re-evaluates the last prompt token alone when the whole prompt is cached. A token
  evaluated alone takes another kernel than one in a batch of 2 or more and gets other
  logits (measured in :mod:`tersetalk.models.llamacpp`, which explains it and reuses
  prefixes only where the bits stay the same), so the same request could get another
  answer depending on what ran before: with several requests in flight, on their
  arrival order. ``--reuse_prefix`` restores the stock behaviour;
- ``--interrupt_requests`` defaults to False. Stock ``llama_cpp.server`` stops a
  streaming answer as soon as another request waits (and ends the stream without a
  ``finish_reason``), so clients with several requests in flight would keep cutting
  each other off; the client sees a malformed reply and retries.

llama-cpp-python's server runs one request at a time per model (a lock around the
model); several examples in flight overlap only the client's own work unless several
server processes share the load (see ``tersetalk bench concurrency``).
"""

from __future__ import annotations

import inspect
import runpy
import sys
from typing import Any

from tersetalk.models.llamacpp import without_weight_repacking

__all__ = ["fresh_kv_per_request", "server_argv"]


def fresh_kv_per_request() -> None:
    """Make every later ``Llama.generate`` with ``reset=True`` start from an empty cache.

    ``reset`` is llama-cpp-python's own flag for "this is a new prompt" (it then looks
    for a reusable prefix); the wrapper forgets the cached tokens first, so there is
    none. Idempotent.
    """
    import llama_cpp

    original = llama_cpp.Llama.generate
    if getattr(original, "_tersetalk_fresh", False):
        return
    # where ``reset`` sits among the arguments after ``tokens``, should one pass it so
    at = list(inspect.signature(original).parameters).index("reset") - 2

    def generate(self: Any, tokens: Any, *args: Any, **kwargs: Any) -> Any:
        reset = kwargs.get("reset", args[at] if len(args) > at else True)
        if reset:
            self.reset()
        return original(self, tokens, *args, **kwargs)

    generate._tersetalk_fresh = True  # type: ignore[attr-defined]
    llama_cpp.Llama.generate = generate  # type: ignore[method-assign]


def server_argv(argv: list[str]) -> tuple[list[str], bool]:
    """``llama_cpp.server``'s arguments from ours, and whether to reuse prefixes."""
    reuse = "--reuse_prefix" in argv
    out = [a for a in argv if a != "--reuse_prefix"]
    if not any(a == "--interrupt_requests" or a.startswith("--interrupt_requests=") for a in out):
        out += ["--interrupt_requests", "False"]
    return out, reuse


if __name__ == "__main__":
    sys.argv[1:], reuse_prefix = server_argv(sys.argv[1:])
    without_weight_repacking()
    if not reuse_prefix:
        fresh_kv_per_request()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
