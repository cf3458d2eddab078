"""The registry of compared systems: name -> ``run(example, context) -> record``.

A system module registers itself with :func:`register`; importing this package
imports every module in it, so adding a system is adding a file here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

from pydantic import BaseModel, ValidationError

from tersetalk.systems.base import RunContext, SystemResult

SystemFn = Callable[[dict, RunContext], SystemResult]
_REGISTRY: dict[str, SystemFn] = {}
_SETTINGS: dict[str, type[BaseModel]] = {}


def register(name: str, settings: type[BaseModel] | None = None) -> Callable[[SystemFn], SystemFn]:
    """Register a system; ``settings`` is the Pydantic model its variant settings obey."""

    def deco(fn: SystemFn) -> SystemFn:
        if name in _REGISTRY and _REGISTRY[name] is not fn:
            raise ValueError(f"system {name!r} registered twice")
        _REGISTRY[name] = fn
        if settings is not None:
            _SETTINGS[name] = settings
        return fn

    return deco


def validate_variant(name: str, variant: str, settings: dict) -> dict:
    """Validate one variant's settings; raise ValueError naming the config key."""
    settings = dict(settings)
    # `calibrated: true` takes the settings chosen by calibration at run time
    calibrated = settings.pop("calibrated", False)
    if calibrated:
        return {"calibrated": True, **_validate(name, variant, settings)}
    return _validate(name, variant, settings)


def _validate(name: str, variant: str, settings: dict) -> dict:
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


def _import_all() -> None:
    """Import every module of this package, so each system registers itself."""
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")


_import_all()

__all__ = [
    "RunContext",
    "SystemResult",
    "get_system",
    "register",
    "registered_systems",
    "validate_variant",
]
