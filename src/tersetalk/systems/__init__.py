"""The registry of compared systems: a system is a codec run on a topology.

A system module calls :func:`register` with everything the rest of the workflow
needs to know about it, so that no module outside ``systems/`` branches on a
system's name:

- ``codec``: how its messages are written and read (:class:`~tersetalk.agents.engine.Codec`);
- ``topology``: who talks to whom (default: the star with one revise round);
- ``settings``: the Pydantic model its variant settings obey;
- ``inputs``: files the workflow must build before a run can start, from the
  validated settings (e.g. the prepared LLMLingua compressor);
- ``ablation``: how an ablation axis reads and draws one of its settings;
- ``rates``: which of its counters are pooled into rates in the summary.

Importing this package imports every module in it, and every module named in the
environment variable ``TERSETALK_SYSTEMS`` (comma-separated, importable from
``PYTHONPATH``), so adding a system is adding one file.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from tersetalk.agents.engine import Codec, converse
from tersetalk.agents.topology import STAR, Topology
from tersetalk.core.configio import UnknownNameError
from tersetalk.core.records import RecordLayout
from tersetalk.systems.base import RunContext, SystemResult
from tersetalk.tasks.base import Brief

SystemFn = Callable[[dict, RunContext], SystemResult]
#: settings (validated, or None for a system without settings) -> {input name: [paths]}
InputsFn = Callable[[Any], dict[str, list[str]]]


@dataclass(frozen=True)
class Axis:
    """How an ablation over one setting reads and draws it.

    ``value`` maps a variant's validated settings to its x value (default: the
    setting itself); ``label`` names the x axis (default: the setting's name);
    ``panels`` are extra summary columns the figure shows for this setting.
    """

    value: Callable[[Any], object] | None = None
    label: str | None = None
    panels: tuple[str, ...] = ()


@dataclass(frozen=True)
class System:
    """One registered system and what it declares (see the module docstring)."""

    name: str
    codec: type[Codec]
    settings: type[BaseModel] | None = None
    topology: Topology = STAR
    inputs: InputsFn | None = None
    ablation: Mapping[str, Axis] = field(default_factory=dict)
    rates: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def layout(self) -> RecordLayout:
        return self.topology.layout

    def parse(self, settings: dict) -> Any:
        """Validated settings object (None for a system without settings)."""
        if self.settings is None:
            return None
        clean = {k: v for k, v in settings.items() if k not in VARIANT_KEYS}
        return self.settings.model_validate(clean)

    def run(self, example: dict, ctx: RunContext, brief: Brief | None = None) -> SystemResult:
        """One example through the dialogue engine (``brief``: the Manager's brief, as
        the runner built it; see :func:`~tersetalk.agents.engine.converse`)."""
        return converse(
            example,
            ctx,
            codec=self.codec,
            topology=self.topology,
            settings=self.parse(ctx.variant_settings),
            brief=brief,
        )


_REGISTRY: dict[str, System] = {}

#: keys of a variant that are not the system's settings: ``calibrated`` (take the settings
#: calibration chose) and ``tasks`` (the tasks this variant runs on, within the system's)
VARIANT_KEYS = ("calibrated", "tasks")


def register(
    name: str,
    *,
    codec: type[Codec],
    settings: type[BaseModel] | None = None,
    topology: Topology = STAR,
    inputs: InputsFn | None = None,
    ablation: Mapping[str, Axis] | None = None,
    rates: Mapping[str, tuple[str, str]] | None = None,
) -> System:
    """Register a system; returns it. Registering a name twice is an error."""
    if name in _REGISTRY:
        raise ValueError(f"system {name!r} registered twice")
    system = System(name, codec, settings, topology, inputs, dict(ablation or {}),
                    dict(rates or {}))  # fmt: skip
    _REGISTRY[name] = system
    return system


def system(name: str) -> System:
    """The registered system ``name``; a clear error naming the registered ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownNameError(
            f"unknown system {name!r}; registered systems: {', '.join(sorted(_REGISTRY))}"
        ) from None


def get_system(name: str) -> SystemFn:
    """``run(example, ctx) -> SystemResult`` of a registered system."""
    return system(name).run


def registered_systems() -> list[str]:
    return sorted(_REGISTRY)


def validate_variant(name: str, variant: str, settings: dict) -> dict:
    """Validate one variant's settings; raise ValueError naming the config key."""
    settings = dict(settings)
    # `tasks`: where this variant runs (tersetalk.pipeline.schedule), not a system setting
    tasks = settings.pop("tasks", None)
    scope = {} if tasks is None else {"tasks": list(tasks)}
    # `calibrated: true` takes the settings chosen by calibration at run time
    calibrated = settings.pop("calibrated", False)
    if calibrated:
        return {"calibrated": True, **_validate(name, variant, settings), **scope}
    return {**_validate(name, variant, settings), **scope}


def _validate(name: str, variant: str, settings: dict) -> dict:
    model = system(name).settings
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


def workflow_inputs(name: str, *settings: dict) -> dict[str, list[str]]:
    """Files a run of ``name`` needs built first, for any of the given variant settings.

    The union over ``settings`` (e.g. every grid point a calibrated variant may take),
    each list sorted and without duplicates.
    """
    s = system(name)
    out: dict[str, set[str]] = {}
    for one in settings:
        if s.inputs is None:
            break
        for key, paths in s.inputs(s.parse(one or {})).items():
            out.setdefault(key, set()).update(paths)
    return {key: sorted(paths) for key, paths in out.items()}


def ablation_value(name: str, setting: str, variant_settings: dict, variant: str) -> object:
    """The x value of a variant in an ablation over ``setting``.

    The system's :class:`Axis` decides when it declares one; otherwise the setting as
    written in the variant, else its validated (default) value, else the variant's name.
    """
    s = system(name)
    axis = s.ablation.get(setting)
    if axis is not None and axis.value is not None:
        return axis.value(s.parse(variant_settings))
    resolved = validate_variant(name, variant, variant_settings)
    return variant_settings.get(setting, resolved.get(setting, variant))


def ablation_axis(name: str, setting: str) -> Axis:
    """How the figure draws an ablation of ``setting`` (defaults when not declared)."""
    return system(name).ablation.get(setting, Axis())


def pooled_rates(name: str) -> Mapping[str, tuple[str, str]]:
    """``rate name: (numerator counter, denominator counter)`` a system declares."""
    return system(name).rates if name in _REGISTRY else {}


def _import_all() -> None:
    """Import every module of this package, and those named in ``TERSETALK_SYSTEMS``."""
    for info in pkgutil.iter_modules(__path__):
        if info.name not in ("base",):
            importlib.import_module(f"{__name__}.{info.name}")
    for module in filter(
        None, (m.strip() for m in os.environ.get("TERSETALK_SYSTEMS", "").split(","))
    ):
        importlib.import_module(module)


_import_all()

__all__ = [
    "Axis",
    "RunContext",
    "System",
    "SystemResult",
    "ablation_axis",
    "ablation_value",
    "get_system",
    "pooled_rates",
    "register",
    "registered_systems",
    "system",
    "validate_variant",
    "workflow_inputs",
]
