"""Tasks: one module per task declaring its :class:`~tersetalk.tasks.base.Task`, found
through :mod:`tersetalk.tasks.registry`; dataset loading, sampling and official scoring."""
