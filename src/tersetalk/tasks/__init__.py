"""Tasks: dataset loading, sampling and official scoring."""
