"""What a system receives and returns (defined with the dialogue engine)."""

from tersetalk.agents.context import RunContext, SystemResult

__all__ = ["RunContext", "SystemResult"]
