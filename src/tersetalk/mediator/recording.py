"""Moved to :mod:`tersetalk.models.recording`; this name stays until its last importer moves."""

from tersetalk.models.recording import CallRecorder  # noqa: F401
