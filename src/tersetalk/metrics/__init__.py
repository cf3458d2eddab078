"""Per-run metrics and the aggregate summary table."""
