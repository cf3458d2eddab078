"""Configuration: load, validate against the workflow schema, and derive run specs.

The schema in ``workflow/schemas/config.schema.yaml`` is the single source of
truth; the Snakefile and every CLI subcommand validate through here, so a wrong
value stops the work at startup with a message naming the key.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from tersetalk.paths import SCHEMA_PATH


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key and the fix."""


def _load_schema() -> dict:
    with open(SCHEMA_PATH) as fh:
        return yaml.safe_load(fh)


def _apply_defaults(schema: dict, value: Any) -> None:
    if not isinstance(value, dict):
        return
    props = schema.get("properties", {})
    for key, sub in props.items():
        if key not in value and "default" in sub:
            value[key] = copy.deepcopy(sub["default"])
        if key in value:
            _apply_defaults(sub, value[key])
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key in value:
            if key not in props:
                _apply_defaults(extra, value[key])


def validate_config(config: dict) -> dict:
    """Validate ``config`` in place (filling defaults); raise ConfigError naming the key."""
    import jsonschema

    schema = _load_schema()
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for err in errors:
            key = ".".join(str(p) for p in err.absolute_path) or "<top level>"
            hint = err.schema.get("description", "") if isinstance(err.schema, dict) else ""
            if err.validator == "additionalProperties":
                hint = "remove or rename the unknown key; see workflow/schemas/config.schema.yaml"
            line = f"config key '{key}': {err.message}"
            if hint:
                line += f" (fix: {hint})"
            lines.append(line)
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines))
    _apply_defaults(schema, config)
    from tersetalk.systems import registered_systems, validate_variant

    known = registered_systems()
    for name, system in config["systems"].items():
        if name not in known:
            raise ConfigError(
                f"config key 'systems.{name}': unknown system; registered systems are "
                f"{sorted(known)}"
            )
        for variant, settings in system["variants"].items():
            try:
                system["variants"][variant] = validate_variant(name, variant, settings)
            except ValueError as exc:
                raise ConfigError(f"invalid configuration:\n  {exc}") from None
    if config["data"]["source"] == "local" and not Path(config["data"].get("dir", "data")).exists():
        raise ConfigError(
            f"config key 'data.dir': folder {config['data']['dir']!r} does not exist "
            "(run from the repository root, or set data.dir)"
        )
    return config


def load_config(path: str | Path) -> dict:
    """Read a YAML config file and validate it."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} not found")
    with open(path) as fh:
        try:
            config = yaml.safe_load(fh) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
    return validate_config(config)


def enabled_systems(config: dict) -> list[str]:
    return [s for s, spec in config["systems"].items() if spec.get("enabled", True)]


def run_spec(config: dict, task: str, system: str, variant: str) -> dict:
    """Everything one run job depends on, and nothing else.

    Snakemake passes this as a param, so a job reruns exactly when something it
    depends on changes.
    """
    try:
        variant_settings = config["systems"][system]["variants"][variant]
    except KeyError as exc:
        raise ConfigError(
            f"config key 'systems.{system}.variants.{variant}' does not exist"
        ) from exc
    return {
        "task": task,
        "system": system,
        "variant": variant,
        "variant_settings": variant_settings,
        "seed": config["seed"],
        "models": config["models"],
        "generation": config["generation"],
        "pipeline": config["pipeline"],
        "task_options": config.get(task, {}) if task == "hotpotqa" else {},
        "cache_dir": config.get("cache_dir", "results/cache"),
    }


def spec_hash(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
