"""What a system receives (:class:`RunContext`) and returns (:class:`SystemResult`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tersetalk.agents.conversation import Conversation
from tersetalk.models import GenerationConfig, ModelClient


@dataclass
class RunContext:
    """Everything a system needs comes in through here: no globals."""

    task: str
    client: ModelClient
    gen: GenerationConfig
    critic_gen: GenerationConfig
    variant_settings: dict[str, Any] = field(default_factory=dict)
    task_options: dict[str, Any] = field(default_factory=dict)
    max_revisions: int = 1
    #: objects built once per run and shared by its examples (e.g. a compressor)
    shared: dict[str, Any] = field(default_factory=dict)
    # examples may run on several threads (models.max_concurrency): build each once
    _lock: Any = field(default_factory=threading.RLock, repr=False, compare=False)

    def resource(self, key: str, factory: Callable[[], Any]) -> Any:
        """Build an expensive helper on first use and reuse it for the rest of the run."""
        if key not in self.shared:
            with self._lock:
                if key not in self.shared:
                    self.shared[key] = factory()
        return self.shared[key]


@dataclass
class SystemResult:
    """A system's output for one example; the runner turns it into a record.

    ``outcome`` holds the fields its topology declares in its record layout (the
    star: the Critic's ``verdict``, ``verdict_explicit`` and ``revisions``).
    """

    prediction: str
    raw_answer: str
    conversation: Conversation
    outcome: dict[str, Any] = field(default_factory=dict)
    counters: dict[str, Any] = field(default_factory=dict)
