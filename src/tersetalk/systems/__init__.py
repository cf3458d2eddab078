"""The registry of compared systems: name -> ``run(example, context) -> record``.

A system module registers itself with :func:`register`; importing this package
imports every system module, so the registry is complete after one import.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ValidationError

from tersetalk.systems.base import RunContext, SystemResult

SystemFn = Callable[[dict, RunContext], SystemResult]
_REGISTRY: dict[str, SystemFn] = {}
_SETTINGS: dict[str, type[BaseModel]] = {}


def register(name: str) -> Callable[[SystemFn], SystemFn]:
    def deco(fn: SystemFn) -> SystemFn:
        if name in _REGISTRY and _REGISTRY[name] is not fn:
            raise ValueError(f"system {name!r} registered twice")
        _REGISTRY[name] = fn
        return fn

    return deco


def register_settings(name: str, model: type[BaseModel]) -> None:
    """Declare the Pydantic model that validates a system's variant settings."""
    _SETTINGS[name] = model


def validate_variant(name: str, variant: str, settings: dict) -> dict:
    """Validate one variant's settings; raise ValueError naming the config key."""
    model = _SETTINGS.get(name)
    if model is None:
        if settings:
            raise ValueError(
                f"config key 'systems.{name}.variants.{variant}': system {name!r} takes no "
                f"settings, got {sorted(settings)}"
            )
        return settings
    try:
        return model.model_validate(settings).model_dump(mode="json")
    except ValidationError as exc:
        problems = "; ".join(
            f"config key 'systems.{name}.variants.{variant}.{'.'.join(map(str, e['loc']))}': "
            f"{e['msg']}"
            for e in exc.errors()
        )
        raise ValueError(problems) from None


def get_system(name: str) -> SystemFn:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown system {name!r}; registered: {sorted(_REGISTRY)}") from None


def registered_systems() -> list[str]:
    return sorted(_REGISTRY)


from tersetalk.systems import freeform, tersetalk_jsonl  # noqa: E402,F401  (register themselves)

register_settings("tersetalk", tersetalk_jsonl.TerseTalkSettings)

__all__ = ["RunContext", "SystemResult", "get_system", "register", "register_settings", "registered_systems",
           "validate_variant"]
