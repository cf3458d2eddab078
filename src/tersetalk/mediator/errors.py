"""The mediator's typed errors and the error record a failing stage leaves behind.

Each error says what failed, in which stage, and how to fix it. A stage failure
never vanishes: the pipeline logs it, emits a ``pipeline_error`` event, writes it
into the trace and returns it to the caller (see :class:`PipelineError`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = [
    "CompressionError",
    "CompressorUnavailableError",
    "ExtractionError",
    "JudgeError",
    "KeyValidationError",
    "MediatorConfigError",
    "MediatorError",
    "PipelineError",
]


class MediatorError(Exception):
    """Base of every error raised by :mod:`tersetalk.mediator`."""

    stage = "mediator"


class MediatorConfigError(MediatorError, ValueError):
    """The mediator configuration is invalid; the message names the key and the fix."""

    stage = "config"


class CompressionError(MediatorError):
    """A compressor failed on a message (model call failed, pipeline crashed)."""

    stage = "compression"


class CompressorUnavailableError(CompressionError):
    """A configured compressor cannot be built here (weights or package missing)."""


class ExtractionError(MediatorError):
    """Semantic key extraction failed (extractor crashed or produced invalid keys)."""

    stage = "extraction"


class KeyValidationError(ExtractionError, ValueError):
    """Serialised semantic keys do not conform to the schema; lists every problem."""


class JudgeError(MediatorError):
    """The judge could not evaluate the keys (model call or embedding failed)."""

    stage = "judge"


@dataclass(frozen=True)
class PipelineError:
    """What a failing stage reports to the caller (and writes into the trace)."""

    stage: str
    error_type: str
    message: str
    recoverable: bool
    #: a model server's passing fault (timeout, 5xx, 429, malformed reply): the
    #: example is retried on the next run instead of degrading silently
    transient: bool = False
    #: not the message's fault (the server is down, the model missing, its tokenizer or
    #: usage report broken): the run stops
    unavailable: bool = False

    @classmethod
    def from_exception(cls, stage: str, exc: BaseException, recoverable: bool) -> PipelineError:
        from tersetalk.models import ModelEnvironmentError, caused_by, is_transient

        return cls(stage=stage, error_type=type(exc).__name__, message=str(exc),
                   recoverable=recoverable, transient=is_transient(exc),
                   unavailable=caused_by(exc, ModelEnvironmentError) is not None)  # fmt: skip

    @property
    def server_fault(self) -> bool:
        """True when the model server, not the message, made the stage fail."""
        return self.transient or self.unavailable

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.stage} stage failed ({self.error_type}): {self.message}"
