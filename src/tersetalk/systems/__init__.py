"""The registry of compared systems: name -> ``run(example, context) -> record``.

A system module registers itself with :func:`register`; importing this package
imports every system module, so the registry is complete after one import.
"""

from __future__ import annotations

from collections.abc import Callable

from tersetalk.systems.base import RunContext, SystemResult

SystemFn = Callable[[dict, RunContext], SystemResult]
_REGISTRY: dict[str, SystemFn] = {}


def register(name: str) -> Callable[[SystemFn], SystemFn]:
    def deco(fn: SystemFn) -> SystemFn:
        if name in _REGISTRY and _REGISTRY[name] is not fn:
            raise ValueError(f"system {name!r} registered twice")
        _REGISTRY[name] = fn
        return fn

    return deco


def get_system(name: str) -> SystemFn:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown system {name!r}; registered: {sorted(_REGISTRY)}") from None


def registered_systems() -> list[str]:
    return sorted(_REGISTRY)


from tersetalk.systems import freeform  # noqa: E402,F401  (registers itself)

__all__ = ["RunContext", "SystemResult", "get_system", "register", "registered_systems"]
