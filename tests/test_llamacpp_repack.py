"""The embedded model loads without weight repacking (llama.cpp's AMX buffers segfault
on Sapphire Rapids CPUs, llama.cpp#20824), and a batched prompt evaluates."""

import pytest

llama_cpp = pytest.importorskip("llama_cpp")


def test_models_load_without_extra_buffers():
    from tersetalk.models.llamacpp import without_weight_repacking

    low = llama_cpp.llama_cpp
    without_weight_repacking()
    without_weight_repacking()  # idempotent: wrapped once
    params = low.llama_model_default_params()
    assert params.use_extra_bufts is False
    assert getattr(low.llama_model_default_params, "_tersetalk_no_repack", False)


@pytest.mark.integration
def test_batched_prompt_runs_in_process():
    # a multi-token prompt is what crashed in ggml_backend_amx_mul_mat
    from tersetalk.models import GenerationConfig
    from tersetalk.models.llamacpp import LlamaCppClient

    client = LlamaCppClient(n_ctx=512, n_threads=1, seed=0)
    out = client.chat(
        [{"role": "user", "content": "Name three colours of the rainbow, please, in order."}],
        GenerationConfig(temperature=0.0, max_tokens=8),
    )
    assert out.prompt_tokens > 8 and out.text
    assert client.describe()["weight_repacking"] is False
