"""MSP configuration: YAML (or dict) validated at startup.

::

    msp:
      provider:            # optional: a remote OpenAI-compatible provider
        backend: openai
        base_url: https://api.groq.com/openai/v1
        model: llama-3.3-70b-versatile
        api_key_env: GROQ_API_KEY      # the key is read from this variable, never stored
      rate_limit: {requests_per_minute: 30, tokens_per_minute: 6000, max_retries: 4,
                   backoff_s: 2.0}
      judge: {enabled: true, threshold: 0.80, model_path: null}
      style: professional
      wire: core
      encoder_max_tokens: 256
      decoder_max_tokens: 192

Without ``provider`` the embedded model runs in process (no rate limit needed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tersetalk.core.configio import load_model, read_yaml
from tersetalk.models.ratelimit import RateLimitConfig
from tersetalk.msp.errors import MSPConfigError

__all__ = ["MSPConfig", "MSPJudgeConfig", "ProviderConfig", "load_msp_config", "parse_msp_config"]


class ProviderConfig(BaseModel):
    """A model backend in the shape of the workflow's ``models`` block, plus api_key_env."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["llamacpp", "openai", "ollama"] = "llamacpp"
    model: str | None = None
    model_path: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    n_ctx: int = Field(4096, gt=0)
    threads: int | None = Field(None, gt=0)
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(2, ge=0)
    stream: bool = False

    def client_config(self, seed: int = 0) -> dict[str, Any]:
        cfg = self.model_dump()
        cfg["seed"] = seed
        # make_client reads the key from the variable; checked here too, to fail early
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise MSPConfigError(
                f"msp.provider.api_key_env: environment variable {self.api_key_env} is not "
                f"set; export {self.api_key_env}=<your key> (keys never go in config files)"
            )
        return cfg


class MSPJudgeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    threshold: float = Field(0.80, ge=0.0, le=1.0)
    model_path: str | None = None


class MSPConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: ProviderConfig = Field(default_factory=ProviderConfig)
    rate_limit: RateLimitConfig | None = None
    judge: MSPJudgeConfig = Field(default_factory=MSPJudgeConfig)
    style: str = Field("professional", min_length=1)
    wire: Literal["core", "traced"] = "core"
    tokenizer: Literal["cl100k_base", "o200k_base"] = "cl100k_base"
    encoder_max_tokens: int = Field(320, gt=0)
    decoder_max_tokens: int = Field(96, gt=0)


def parse_msp_config(data: dict[str, Any] | None, where: str = "msp config") -> MSPConfig:
    """Validate a config dict (the ``msp:`` block, or a dict holding one)."""
    data = dict(data or {})
    if set(data) == {"msp"}:
        data = dict(data["msp"] or {})
    return load_model(data, MSPConfig, where=where, error=MSPConfigError,
                      title="invalid MSP configuration",
                      example="config/msp.example.yaml")  # fmt: skip


def load_msp_config(path: str | Path) -> MSPConfig:
    """Read and validate an MSP YAML file; errors name the file and the key."""
    data = read_yaml(path, what="MSP config file", error=MSPConfigError,
                     expect="a mapping with an 'msp:' block")  # fmt: skip
    return parse_msp_config(data, where=str(path))
