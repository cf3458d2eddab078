"""Configuration: load, validate against the workflow schema, and derive run specs.

The schema ``tersetalk/schemas/config.schema.yaml`` is the single source of truth.
It ships inside the package (read with :mod:`importlib.resources`, so an installed
``tersetalk`` never looks for a checkout); ``workflow/schemas/config.schema.yaml`` is
a link to it, where Snakemake workflows keep their schema. The Snakefile and every
CLI subcommand validate through here, so a wrong value stops the work at startup
with a message naming the key.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from tersetalk.core.cliargs import DEFAULT_CONFIG
from tersetalk.core.configio import ConfigError, UnknownNameError, read_yaml
from tersetalk.core.paths import calibration_file, model_key

#: where the schema lives inside the package (and, linked, in workflow/schemas/)
SCHEMA_RESOURCE = ("tersetalk", "schemas/config.schema.yaml")


def _load_schema() -> dict:
    package, name = SCHEMA_RESOURCE
    return yaml.safe_load(resources.files(package).joinpath(name).read_text(encoding="utf-8"))


def schema_default(*path: str) -> Any:
    """The config schema's default at ``path`` (``"bench", "repeats"``; ``"*"`` steps into
    a mapping's values, e.g. ``"calibration", "*", "objective"``): the one place a default
    is written, for code that needs it outside a validated config."""
    node = _load_schema()
    for key in path:
        node = node["additionalProperties"] if key == "*" else node["properties"][key]
    return node["default"]


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


def non_finite_keys(value: Any) -> list[str]:
    """The key paths (``generation.temperature``, ``calibration.x.grid.rate.1``) of every
    NaN or infinite number in ``value``, walked without recursion.

    Why one walk over everything: JSON Schema's ``minimum`` and ``maximum`` never refuse
    NaN (every comparison with it is false) and a bound-less ``number`` takes infinity,
    while YAML reads ``.nan`` and ``.inf`` as numbers; no setting means either.
    """
    found: list[str] = []
    seen: set[int] = set()
    todo: list[tuple[tuple, Any]] = [((), value)]
    while todo:
        path, node = todo.pop()
        if isinstance(node, float) and not math.isfinite(node):
            found.append(".".join(map(str, path)) or "<top level>")
        elif isinstance(node, dict | list | tuple) and id(node) not in seen:
            seen.add(id(node))
            items = node.items() if isinstance(node, dict) else enumerate(node)
            todo.extend(((*path, k), v) for k, v in items)
    return sorted(found)


def _check_finite(value: Any, where: str, title: str = "invalid configuration") -> None:
    bad = non_finite_keys(value)
    if bad:
        lines = [
            f"{where} '{key}': not a finite number (NaN or infinity); write a finite number"
            for key in bad
        ]
        raise ConfigError(f"{title}:\n  " + "\n  ".join(lines))


def _schema_errors(validator: Any, value: Any, where: str) -> list[str]:
    """One line per schema violation in ``value``: ``<where> '<a.b>': <what> (fix: ...)``."""
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    lines = []
    for err in errors:
        key = ".".join(str(p) for p in err.absolute_path) or "<top level>"
        hint = err.schema.get("description", "") if isinstance(err.schema, dict) else ""
        if err.validator == "additionalProperties":
            hint = (
                "remove or rename the unknown key; the keys are listed in the schema, "
                "tersetalk/schemas/config.schema.yaml (linked as workflow/schemas/)"
            )
        line = f"{where} '{key}': {err.message}"
        if hint:
            line += f" (fix: {hint})"
        lines.append(line)
    return lines


def validate_config(config: dict) -> dict:
    """Validate ``config`` in place (filling defaults); raise ConfigError naming the key."""
    import jsonschema

    _check_finite(config, "config key")
    schema = _load_schema()
    lines = _schema_errors(jsonschema.Draft202012Validator(schema), config, "config key")
    if lines:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines))
    _apply_defaults(schema, config)
    if config["models"].get("api_key"):
        raise ConfigError(
            "config key 'models.api_key': API keys never go in config files (they would be "
            "copied into run specs, result metadata and command lines); remove it, set "
            "models.api_key_env to the name of an environment variable (e.g. OPENAI_API_KEY) "
            "and export that variable with your key"
        )
    from tersetalk.models import ModelError, check_base_url, max_in_flight

    try:
        check_base_url(config["models"].get("base_url"))
    except ModelError as exc:
        raise ConfigError(f"config key 'models.base_url': {exc}") from None
    try:
        max_in_flight(config["models"])
    except ModelError as exc:
        raise ConfigError(f"config key 'models.max_concurrency': {exc}") from None
    _check_identity(config["models"], "models")
    _results_key(config["models"], "the configured model")  # the name part; no server asked
    _check_tasks(config)
    _check_systems(config["systems"], "systems")
    _check_topology(config)
    _check_evaluation(config)
    if config["data"]["source"] == "local" and not Path(config["data"].get("dir", "data")).exists():
        raise ConfigError(
            f"config key 'data.dir': folder {config['data']['dir']!r} does not exist "
            "(run from the repository root, or set data.dir)"
        )
    return config


#: the sections of a run spec that are config sections, checked against their schema
_SPEC_SECTIONS = ("seed", "models", "generation", "pipeline")


def check_run_spec(spec: dict, where: str = "run spec") -> None:
    """Check a run spec that did not come from a validated config (``--spec-json``):
    finite numbers, its config sections (:data:`_SPEC_SECTIONS`) against the schema, a
    registered task and system. A ConfigError names ``<where> key '<a.b>'`` and the fix.

    Why: the runner trusts its spec, so a wrong value would otherwise surface as a
    traceback from deep inside a model client or a registry, after the sample is read.
    """
    import jsonschema

    from tersetalk.systems import registered_systems
    from tersetalk.tasks.registry import names

    _check_finite(spec, f"{where} key", f"invalid {where}")
    schema = _load_schema()
    sections = {
        **schema,
        "required": [],
        "additionalProperties": True,
        "properties": {k: schema["properties"][k] for k in _SPEC_SECTIONS},
    }
    lines = _schema_errors(jsonschema.Draft202012Validator(sections), spec, f"{where} key")
    if lines:
        raise ConfigError(f"invalid {where}:\n  " + "\n  ".join(lines))
    tasks, systems = names(), sorted(registered_systems())
    if spec.get("task") not in tasks:
        raise ConfigError(
            f"{where} key 'task': unknown task {spec.get('task')!r}; registered tasks are "
            f"{tasks} (a task of your own: README 'Adding a task')"
        )
    if spec.get("system") not in systems:
        raise ConfigError(
            f"{where} key 'system': unknown system {spec.get('system')!r}; registered "
            f"systems are {systems}"
        )


def _check_tasks(config: dict) -> None:
    """Every task the config names is registered (a built-in or a ``TERSETALK_TASKS`` plug-in)."""
    from tersetalk.tasks.registry import names

    known = names()
    named = [("tasks", config["tasks"]), ("topology.tasks", config["topology"]["tasks"])]
    for name, system in config["systems"].items():
        named.append((f"systems.{name}.tasks", system.get("tasks") or []))
        for variant, settings in system["variants"].items():
            tasks = (settings or {}).get("tasks") or []
            named.append((f"systems.{name}.variants.{variant}.tasks", tasks))
    for key, tasks in named:
        unknown = [t for t in tasks if t not in known]
        if unknown:
            raise ConfigError(
                f"config key '{key}': unknown task(s) {unknown}; registered tasks are {known} "
                "(a task of your own: README 'Adding a task')"
            )


def _check_systems(systems: dict, key: str) -> None:
    """Every system registered and every variant's settings valid (filled with defaults)."""
    from tersetalk.systems import registered_systems, validate_variant

    known = registered_systems()
    for name, system in systems.items():
        if name not in known:
            known_names = sorted(known)
            raise ConfigError(
                f"config key '{key}.{name}': unknown system; registered systems are {known_names}"
            )
        for variant, settings in system["variants"].items():
            try:
                system["variants"][variant] = validate_variant(name, variant, settings)
            except ValueError as exc:
                raise ConfigError(f"invalid configuration:\n  {exc}") from None


def _check_topology(config: dict) -> None:
    """The topology study's systems: registered, valid, and routed (their topology is the
    router's), each running on at least one of the study's tasks."""
    from tersetalk.agents.topology import Routed
    from tersetalk.systems import system as registered_system
    from tersetalk.tasks.registry import topology_labels

    labels = topology_labels()

    study = config["topology"]
    unlabelled = [t for t in study["tasks"] if t not in labels]
    if unlabelled:
        raise ConfigError(
            f"config key 'topology.tasks': {unlabelled} have no topology label (direct or "
            f"chain); the study runs on {sorted(labels)}"
        )
    systems = study.get("systems") or {}
    _check_systems(systems, "topology.systems")
    for name, spec in systems.items():
        if not isinstance(registered_system(name).topology, Routed):
            raise ConfigError(
                f"config key 'topology.systems.{name}': not a routed system (its topology is "
                "fixed); the study runs topology_tersetalk and topology_freeform"
            )
        allowed = spec.get("tasks")
        if allowed is not None and not set(allowed) & set(study["tasks"]):
            raise ConfigError(
                f"config key 'topology.systems.{name}.tasks': none of {allowed} is in "
                f"topology.tasks {study['tasks']}"
            )


def topology_config(config: dict) -> dict:
    """The config the topology study's jobs see: its tasks, examples per task and systems in
    place of the main study's, everything else (seed, model, generation) shared.

    The study samples under ``results/samples/topology/`` and runs under the model's
    ``results/<key>/topology/``, so it never touches the main study's samples or runs (see
    workflow/rules/topology.smk). ``{results}`` in a variant's ``weights_from`` is the
    model's results folder (``results/<key>``), so a fitted variant reads its own model's
    router.
    """
    study = config.get("topology") or {}
    if not study.get("systems"):
        raise ConfigError(
            "config key 'topology.systems': the topology study's systems are not configured; "
            "add them as in config/config.yaml's topology section (topology_tersetalk, "
            "topology_freeform)"
        )
    out = dict(config)
    out["tasks"] = list(study["tasks"])
    out["n_eval"] = study["n_eval"]
    folder = f"results/{results_key(config)}"
    out["systems"] = {
        name: {
            **system,
            "variants": {
                variant: _with_results_folder(settings, folder)
                for variant, settings in system["variants"].items()
            },
        }
        for name, system in study["systems"].items()
    }
    return out


def _with_results_folder(settings: dict, folder: str) -> dict:
    path = settings.get("weights_from")
    if isinstance(path, str) and "{results}" in path:
        return {**settings, "weights_from": path.replace("{results}", folder)}
    return settings


def configured_runs(config: dict) -> set[str]:
    """Every enabled ``system/variant`` label."""
    return {
        f"{name}/{variant}"
        for name, system in config["systems"].items()
        if system.get("enabled", True)
        for variant in system["variants"]
    }


def ablation_values(config: dict, name: str) -> dict[str, object]:
    """x-axis value of each variant of an ablation, as its system's axis reads the setting."""
    from tersetalk.systems import ablation_value

    spec = config["ablations"][name]
    variants = config["systems"][spec["system"]]["variants"]
    # the system's own axis decides (e.g. caps: the fact cap in tokens); a setting the
    # variant leaves out takes the system's default, named as such
    return {
        v: ablation_value(spec["system"], spec["setting"], variants[v], v) for v in spec["variants"]
    }


def _check_evaluation(config: dict) -> None:
    from tersetalk.pipeline.schedule import check_schedule

    ev = config["evaluation"]
    runs = configured_runs(config)
    if config["calibration"] and config["calibration_n"] < 1:
        raise ConfigError(
            "config key 'calibration_n': must be at least 1 while 'calibration' sweeps a grid "
            "(or set calibration: {} and remove 'calibrated: true' variants)"
        )
    for system in config["calibration"]:
        if system not in config["systems"]:
            raise ConfigError(f"config key 'calibration.{system}': not a configured system")
        for point, settings in calibration_points(config, system).items():
            try:
                from tersetalk.systems import validate_variant

                validate_variant(system, point, settings)
            except ValueError as exc:
                raise ConfigError(
                    f"config key 'calibration.{system}.grid': grid point {settings} is invalid: "
                    f"{exc}"
                ) from None
    for system in config["calibration"]:
        _check_calibration_reference(config, system, runs)
    for name, spec in config["ablations"].items():
        for v in spec["variants"]:
            if f"{spec['system']}/{v}" not in runs:
                raise ConfigError(
                    f"config key 'ablations.{name}.variants': {spec['system']}/{v} is not an "
                    f"enabled system/variant; define it under systems.{spec['system']}.variants"
                )
    if ev["reference"] not in runs:
        raise ConfigError(
            f"config key 'evaluation.reference': {ev['reference']!r} is not an enabled "
            f"system/variant; choose one of {sorted(runs)}"
        )
    for i, pair in enumerate(ev["comparisons"]):
        for j, label in enumerate(pair):
            if label not in runs:
                raise ConfigError(
                    f"config key 'evaluation.comparisons.{i}.{j}': {label!r} is not an enabled "
                    f"system/variant; choose from {sorted(runs)} or remove the comparison"
                )
    try:
        check_schedule(config)  # systems.<name>.tasks: references run where they are needed
    except ValueError as exc:
        raise ConfigError(f"invalid configuration:\n  {exc}") from None


def calibration_reference(config: dict, system: str) -> str:
    """The ``system/variant`` a calibrated system's grid points are judged against.

    ``calibration.<system>.reference`` when set, else ``evaluation.reference``. It
    runs on the calibration shard as ``results/<model>/calibration/runs/<task>/<label>.parquet``.
    """
    return config["calibration"][system].get("reference") or config["evaluation"]["reference"]


def calibration_reference_runs(config: dict) -> dict[str, str]:
    """system -> reference label, for the calibrated systems that name their own reference."""
    return {
        system: spec["reference"]
        for system, spec in sorted(config["calibration"].items())
        if spec.get("reference")
    }


def _check_calibration_reference(config: dict, system: str, runs: set[str]) -> None:
    """An explicit reference must be an enabled run that can itself run on the calibration shard.

    Without the key (evaluation.reference) nothing more is checked here than before:
    evaluation.reference is checked with the evaluation keys.
    """
    label = config["calibration"][system].get("reference")
    if not label:
        return
    key = f"calibration.{system}.reference"
    if label not in runs:
        raise ConfigError(
            f"config key '{key}': {label!r} is not an enabled system/variant; choose one of "
            f"{sorted(runs)} (or remove the key to use evaluation.reference)"
        )
    ref_system, ref_variant = label.split("/")
    if config["systems"][ref_system]["variants"][ref_variant].get("calibrated"):
        raise ConfigError(
            f"config key '{key}': {label!r} takes calibrated settings, so it cannot be the "
            f"reference that calibration of {system!r} is judged against; name an explicit "
            "variant"
        )
    if ref_system in config["calibration"] and ref_variant in calibration_points(
        config, ref_system
    ):
        raise ConfigError(
            f"config key '{key}': variant {ref_variant!r} of {ref_system!r} has the name of one "
            f"of its calibration grid points, whose run file it would share; rename the variant"
        )


def merge(base: dict, overlay: dict) -> dict:
    """Deep-merge ``overlay`` into a copy of ``base`` the way Snakemake merges --configfile."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_config(*paths: str | Path) -> dict:
    """Read YAML config files, each merged over the previous one, and validate the result."""
    config: dict = {}
    for path in paths:
        config = merge(config, read_yaml(path, what="config file", error=ConfigError))
    return validate_config(config)


def enabled_systems(config: dict) -> list[str]:
    return [s for s, spec in config["systems"].items() if spec.get("enabled", True)]


def run_spec(config: dict, task: str, system: str, variant: str, model: str | None = None) -> dict:
    """Everything one run job depends on, and nothing else.

    Snakemake passes this as a param, so a job reruns exactly when something it
    depends on changes. ``model`` names an entry of ``sensitivity.models``: the run
    uses that model's settings and its own calibration file, and the spec records
    the name (``sensitivity_model``); None is the default model, whose spec has no
    such key (so its runs and checkpoints are what they were before the study existed).
    """
    from tersetalk.tasks.registry import get as task_spec

    if model is not None:
        spec = run_spec(with_model(config, model), task, system, variant)
        spec["sensitivity_model"] = model
        return spec
    systems = config.get("systems") or {}
    if system not in systems:
        raise UnknownNameError(
            f"config key 'systems.{system}' does not exist: unknown system {system!r}; the "
            f"configured systems: {', '.join(systems) or 'none'}"
        )
    variants = systems[system].get("variants") or {}
    if variant not in variants:
        raise UnknownNameError(
            f"config key 'systems.{system}.variants.{variant}' does not exist: system "
            f"{system!r} has no variant {variant!r}; its variants: {', '.join(variants) or 'none'}"
        )
    task_spec(task)  # an unknown task: the error lists the registered ones
    variant_settings = variants[variant]
    spec = {
        "task": task,
        "system": system,
        "variant": variant,
        "variant_settings": variant_settings,
        "seed": config["seed"],
        "models": config["models"],
        "generation": config["generation"],
        "pipeline": config["pipeline"],
        # the task's own config section: HotpotQA's facts, HumanEval's sandbox
        "task_options": config.get(task, {}) if task_spec(task).run_options else {},
        "cache_dir": config.get("cache_dir", "results/cache"),
    }
    if variant_settings.get("calibrated"):
        spec["calibration_file"] = calibration_file(task, results_key(config))
    return spec


def calibration_points(config: dict, system: str) -> dict[str, dict]:
    """Grid points of a system's calibration sweep, named ``g00``, ``g01``, ... in grid order."""
    grid = config["calibration"][system]["grid"]
    keys = list(grid)
    points = {}
    for i, values in enumerate(itertools.product(*(grid[k] for k in keys))):
        points[f"g{i:02d}"] = dict(zip(keys, values, strict=True))
    return points


def calibration_spec(
    config: dict, task: str, system: str, point: str, model: str | None = None
) -> dict:
    """The run spec of one calibration grid point (``model``: as in :func:`run_spec`)."""
    settings = calibration_points(config, system)[point]
    first = next(iter(config["systems"][system]["variants"]))
    spec = run_spec(config, task, system, first, model)
    from tersetalk.systems import validate_variant

    spec.pop("calibration_file", None)  # a grid point is explicit, never itself calibrated
    spec["variant"] = point
    spec["variant_settings"] = validate_variant(system, point, settings)
    return spec


def spec_hash(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def _model_entry(entry: str | dict, folder: Path) -> tuple[str, dict]:
    """(name, settings overrides) of one ``sensitivity.models`` entry, reading its file."""
    if isinstance(entry, dict):
        return entry["name"], dict(entry.get("models") or {})
    path = folder / f"{entry}.yaml"
    if not path.exists():
        raise ConfigError(
            f"config key 'sensitivity.models': model {entry!r} has no file {path}; add it "
            f"(a YAML file with a 'models:' section, like the ones in config/models/), fix the "
            "name, or give the settings inline as {name: ..., models: {...}}"
        )
    doc = read_yaml(path, what="model file", error=ConfigError) or {}
    extra = sorted(set(doc) - {"models"})
    if extra or not isinstance(doc.get("models"), dict):
        raise ConfigError(
            f"model file {path} (sensitivity.models entry {entry!r}): must hold only a "
            f"'models:' mapping, found keys {sorted(doc)}; keys other than models.* would be "
            "ignored in the sensitivity study, so move them to your config file"
        )
    return entry, doc["models"]


def sensitivity_models(config: dict) -> dict[str, dict]:
    """name -> the validated ``models`` settings of each ``sensitivity.models`` entry.

    Each entry's settings are merged over the config's own ``models`` section (so
    ``--configfile config/models/<x>.yaml`` and a listed ``<x>`` run the same model),
    validated like a config's and completed with the schema's defaults. Empty when no
    study is configured. Memoised on the two sections: the workflow asks once per job.
    """
    section = config.get("sensitivity") or {}
    key = json.dumps([config["models"], section], sort_keys=True, default=str)
    if key not in _SENSITIVITY_MEMO:
        _SENSITIVITY_MEMO[key] = _resolve_sensitivity(config, section)
    return copy.deepcopy(_SENSITIVITY_MEMO[key])


_SENSITIVITY_MEMO: dict[str, dict[str, dict]] = {}


def _resolve_sensitivity(config: dict, section: dict) -> dict[str, dict]:
    folder = Path(section.get("dir", "config/models"))
    models_schema = _load_schema()["properties"]["models"]
    out: dict[str, dict] = {}
    default_key = results_key(config)
    keys: dict[str, str] = {}  # results key -> entry name
    for entry in section.get("models") or []:
        name, overrides = _model_entry(entry, folder)
        if name in out:
            raise ConfigError(f"config key 'sensitivity.models': {name!r} is listed twice")
        merged = merge(config["models"], overrides)
        try:
            validate_config(merge({**config, "sensitivity": {}}, {"models": merged}))
        except ConfigError as exc:
            raise ConfigError(
                f"config key 'sensitivity.models': model {name!r}'s settings are invalid: {exc}"
            ) from None
        _apply_defaults(models_schema, merged)
        # the folder of its results: its own models.key, else (inline entry) its name, else
        # its model's name, as `--configfile config/models/<x>.yaml` would give
        merged["key"] = overrides.get("key") or (name if isinstance(entry, dict) else None)
        merged["key"] = _results_key(merged, f"sensitivity.models entry {name!r}")
        if merged["key"] == default_key:
            if _without_key(merged) == _without_key(config["models"]):
                continue  # the configured model itself: compared anyway, run once
            raise ConfigError(
                f"config key 'sensitivity.models': model {name!r} keeps its results in "
                f"results/{default_key}/, the configured model's folder, with other settings: "
                "give it another models.key"
            )
        if merged["key"] in keys:
            raise ConfigError(
                f"config key 'sensitivity.models': models {keys[merged['key']]!r} and {name!r} "
                f"both keep their results in results/{merged['key']}/: give one a models.key"
            )
        keys[merged["key"]] = name
        out[name] = merged
    return out


def _without_key(models: dict) -> dict:
    return {k: v for k, v in models.items() if k != "key"}


def _results_key(models: dict, where: str) -> str:
    try:
        return model_key(models)
    except ValueError as exc:
        raise ConfigError(f"config key 'models' ({where}): {exc}") from None


def _check_identity(models: dict, where: str) -> None:
    """A model name only another backend serves, or a fingerprint declared without
    ``models.key``, is a ConfigError."""
    from tersetalk.models.identity import backend_mismatch

    why = backend_mismatch(models)
    if why is not None:
        raise ConfigError(f"config key '{where}.model': {why}")
    if models.get("fingerprint") and not models.get("key"):
        raise ConfigError(
            f"config key '{where}.fingerprint': a declared fingerprint needs {where}.key too, "
            "the folder its results go to (results/<key>/); set both"
        )


def results_key(config: dict) -> str:
    """The folder name of the configured model's results (results/<key>/, figures/<key>/).

    A served model's ends in the fingerprint its server reports
    (:func:`tersetalk.models.identity.served_results_key`: the server is asked), unless
    the config declares the model's identity or allows a weak one.
    """
    from tersetalk.models import ModelError, make_client
    from tersetalk.models.identity import served_results_key

    base = _results_key(config["models"], "the configured model")
    try:
        return served_results_key(
            config["models"], base, config.get("cache_dir"), make_client=make_client
        )
    except ModelError as exc:
        raise ConfigError(f"config key 'models' (the configured model): {exc}") from None


def with_model(config: dict, model: str) -> dict:
    """A copy of ``config`` whose ``models`` section is sensitivity model ``model``'s."""
    models = sensitivity_models(config)
    if model not in models:
        raise ConfigError(
            f"model {model!r} is not in sensitivity.models (listed: {sorted(models)})"
        )
    return {**config, "models": models[model]}


def load_workflow_config(paths: Sequence[str | Path] = ()) -> dict:
    """The workflow config a subcommand's ``--config`` names, validated.

    Layered as Snakemake layers ``--configfile`` over the Snakefile's ``configfile:``:
    the default config (:data:`DEFAULT_CONFIG`, when the working directory has one),
    then the given files merged over it (each over the one before), then the schema's
    defaults for what none of them sets. So a file holding only ``n_eval: 3`` changes
    only ``n_eval``; in a section both set, the given files' keys come first, as in
    Snakemake's config.
    Why one function: every subcommand that takes ``--config`` reads it the same way,
    and a file means what it means to ``snakemake --configfile``.
    """
    layers = [Path(p) for p in paths]
    default = Path(DEFAULT_CONFIG)
    if default.is_file():
        # as Snakemake builds it: the --configfile files merged in order, the Snakefile's
        # configfile updated by them; in a section both set, the given files' keys come
        # first (Snakemake starts from them), which is the order a calibration grid's
        # points are numbered in (g00, g01, ...)
        given: dict = {}
        for path in layers:
            given = merge(given, read_yaml(path, what="config file", error=ConfigError))
        snakefile = read_yaml(default, what="config file", error=ConfigError)
        return validate_config(merge(merge(given, snakefile), given))
    try:
        return load_config(*layers)
    except ConfigError as exc:
        raise ConfigError(
            f"{exc}\n(there is no {DEFAULT_CONFIG} under {Path.cwd()} for --config to be "
            "layered over: run from the workflow's folder, or give --config files that "
            "together set every required key)"
        ) from None


def json_option(text: str, option: str, kind: type, example: str) -> Any:
    """The JSON value of a command-line option, or a ConfigError naming the option.

    Why not ``json.loads`` alone: a shell-quoting slip or a wrong shape would end in a
    traceback; this says which option, what is wrong and what to pass.
    """
    from tersetalk.core.io import load_json_text

    try:
        value = load_json_text(text, option, ConfigError)
    except ConfigError as exc:  # nested too deep
        raise ConfigError(f"{exc}; pass {example}") from None
    except ValueError as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ConfigError(
            f"{option} is not valid JSON ({reason}; got {text[:80]!r}); pass {example}, "
            "quoted for the shell"
        ) from None
    if not isinstance(value, kind):
        raise ConfigError(
            f"{option} must be a JSON {JSON_KINDS[kind]}, got {json_kind(value)}; pass {example}"
        )
    return value


JSON_KINDS = {dict: "object", list: "array", str: "string", int: "integer"}


def json_kind(value: object) -> str:
    """The JSON name of a decoded value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, float):
        return "number"
    return JSON_KINDS.get(type(value), type(value).__name__)


#: the keys of a run spec (what :func:`tersetalk.pipeline.config.run_spec` writes) and their types
_SPEC_KEYS: dict[str, type] = {"task": str, "system": str, "variant": str,
                               "variant_settings": dict, "seed": int, "models": dict,
                               "generation": dict, "pipeline": dict, "task_options": dict,
                               "cache_dir": str}  # fmt: skip
_SPEC_OPTIONAL_KEYS: dict[str, type] = {"calibration_file": str, "sensitivity_model": str}


def spec_from_json(text: str) -> dict:
    """The run spec of ``--spec-json``, its keys, their types and its config sections'
    values (:func:`tersetalk.pipeline.config.check_run_spec`) checked before the run."""
    example = "the run spec Snakemake passes (a JSON object, see config.run_spec)"
    spec = json_option(text, "--spec-json", dict, example)
    missing = [k for k in _SPEC_KEYS if k not in spec]
    if missing:
        raise ConfigError(f"--spec-json lacks key(s) {', '.join(missing)}; pass {example}")
    for key, kind in {**_SPEC_KEYS, **_SPEC_OPTIONAL_KEYS}.items():
        if key in spec and (
            not isinstance(spec[key], kind) or (kind is int and isinstance(spec[key], bool))
        ):
            raise ConfigError(
                f"--spec-json key {key!r} must be a JSON {JSON_KINDS[kind]}, got "
                f"{json_kind(spec[key])}; pass {example}"
            )
    check_run_spec(spec, "--spec-json")
    return spec
