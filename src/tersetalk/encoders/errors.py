"""Errors of the encoders package: each says what failed, where, and how to fix it."""

from __future__ import annotations


class EncoderError(RuntimeError):
    """Base class: a text transform could not be set up or run."""


class CompressorUnavailableError(EncoderError):
    """The compressor's model is missing or cannot be loaded; the message names the fix."""


class CompressionError(EncoderError):
    """LLMLingua failed on one input (the run turns this into an error row)."""
