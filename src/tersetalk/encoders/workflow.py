"""What the workflow must build before a run can compress: the prepared compressor folder.

Snakemake asks, per run job, which local compressor folders the variant may load;
only the default folder is made by a rule (``prepare_compressor``), so only it is
returned. Another folder or a hub id is the user's to provide.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tersetalk.encoders.prepare import DEFAULT_COMPRESSOR_DIR


def _models(system: str, settings: dict[str, Any]) -> list[str]:
    """Compressor models a variant may load (validated settings, as in the config)."""
    default = {"model": DEFAULT_COMPRESSOR_DIR}
    if system == "llmlingua":
        return [settings.get("model", DEFAULT_COMPRESSOR_DIR)]
    if system == "hybrid":
        tt = settings.get("tersetalk") or {}
        out = [(settings.get("llmlingua") or default).get("model", DEFAULT_COMPRESSOR_DIR)]
        return out + _models("tersetalk", tt)
    if system == "tersetalk":
        toggles = ("lingua_payloads", "lingua_summaries", "lingua_deref")
        if any(settings.get(t) for t in toggles):
            return [(settings.get("lingua") or default).get("model", DEFAULT_COMPRESSOR_DIR)]
    return []


def compressor_inputs(system: str, settings: dict[str, Any]) -> list[str]:
    """``[results/models/smollm2-hf]`` when the variant may use the default compressor."""
    wanted = {Path(m).resolve() for m in _models(system, settings or {})}
    return [DEFAULT_COMPRESSOR_DIR] if Path(DEFAULT_COMPRESSOR_DIR).resolve() in wanted else []
