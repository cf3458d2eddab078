"""tersetalk: measuring token-efficient multi-agent protocols."""

__version__ = "0.1.0"
