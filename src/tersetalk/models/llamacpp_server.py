"""``python -m tersetalk.models.llamacpp_server``: llama-cpp-python's OpenAI-compatible
server (``llama_cpp.server``, same arguments) with the model loaded without weight
repacking, which segfaults on AMX CPUs (see
:func:`tersetalk.models.llamacpp.without_weight_repacking`)."""

from __future__ import annotations

import runpy

from tersetalk.models.llamacpp import without_weight_repacking

if __name__ == "__main__":
    without_weight_repacking()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
