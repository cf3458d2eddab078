"""The tuner's configuration (schema v2), its rules R1-R5 and the resolution of profiles.

Why rules and not a learned model: every change the tuner proposes must be explained
by one statistic crossing one threshold, so a user can read the evidence table and
disagree with a line of it. The tuner is offline: ``tersetalk mcp tune analyze``
reads telemetry aggregates and writes a file; the proxy reads that file at its next
start (``tersetalk mcp-proxy --tuned FILE``) and nothing changes inside a session.

Three parts, all pure functions of their inputs:

- the schema: twelve knobs (:class:`AdaptiveConfig`), four profile axes (tokenizer,
  llm, agent, data) and a hint policy; ``schema_version: 1`` files (knobs only) are
  migrated in memory, a version above 2 is refused;
- the rules (:func:`tune`): endpoint fingerprints and session summaries in, a new
  config and one :class:`Change` per changed value out;
- the resolution (:func:`resolve`): a config and a :class:`SessionContext` in, one
  :class:`EffectiveConfig` out, each value with where it came from; and
  :func:`to_proxy_config`, which layers what today's proxy implements over its config
  and names every set knob it has no mechanism for.

Precedence of a value, lowest first: the built-in default, the active profile that
sets it, the file (a value written by a rule is a value in the file; the file's
``tuned`` map remembers which rule wrote it).
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tersetalk.formats.container import BLOCK_FORMATS
from tersetalk.mcp.config import ProxyConfig, ToolOverride, read_toml, read_yaml

SUPPORTED_VERSIONS = (1, 2)
SHAPES = (
    "prose",
    "markdown_table",
    "array_of_objects",
    "nested_object",
    "flat_object",
    "array_of_scalars",
    "scalar",
    "numbered_list",
    "code",
    "empty",
)
INNER_FORMATS = (
    "url",
    "log",
    "hash",
    "diff",
    "md_table",
    "stack_trace",
    "code_fence",
    "json",
    "path",
    "timestamp",
)
TEMPLATE_IDS = ("csv_from_md", "pipeline_deep_mckp", "mr_diff_fence")
#: what the knapsack may choose per subtree: compact JSON inline, or a block format
FORMAT_IDS = ("json_compact", *BLOCK_FORMATS)

Shape = Literal[
    "prose",
    "markdown_table",
    "array_of_objects",
    "nested_object",
    "flat_object",
    "array_of_scalars",
    "scalar",
    "numbered_list",
    "code",
    "empty",
]
TemplateId = Literal["csv_from_md", "pipeline_deep_mckp", "mr_diff_fence"]


class TuneError(ValueError):
    """A tuner config or telemetry input that cannot be used; the message says which and why."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- the twelve knobs -----------------------------------------------------------------


class DedupKnobs(_Strict):
    lru_size: int = Field(5, ge=1, le=100_000)
    #: endpoint -> dedup on/off; an endpoint not named is on
    enabled_per_endpoint: dict[str, bool] = {}
    hint_verbosity: Literal["terse", "standard", "verbose"] = "standard"
    near_ref_enabled: bool = False
    min_body_chars: int = Field(200, ge=0)


class TemplateKnobs(_Strict):
    active: tuple[TemplateId, ...] = TEMPLATE_IDS
    endpoint_overrides: dict[str, TemplateId] = {}


#: the minimum count of a shape's unit (columns, items, fields) before the generic
#: router re-encodes a response of that shape; the design's gate, our numbers
SHAPE_THRESHOLDS = {
    "markdown_table": 2,
    "array_of_objects": 2,
    "nested_object": 1,
    "flat_object": 3,
    "array_of_scalars": 4,
}


class MckpKnobs(_Strict):
    recursion_depth: int = Field(5, ge=1, le=64)
    formats_enabled: tuple[str, ...] = FORMAT_IDS
    shape_thresholds: dict[Shape, int] = dict(SHAPE_THRESHOLDS)

    @model_validator(mode="after")
    def _known_formats(self) -> MckpKnobs:
        unknown = [f for f in self.formats_enabled if f not in FORMAT_IDS]
        if unknown:
            raise ValueError(f"formats_enabled: unknown {unknown}; use some of {list(FORMAT_IDS)}")
        if any(v < 0 for v in self.shape_thresholds.values()):
            raise ValueError("shape_thresholds: counts must be >= 0")
        return self


class EncodingKnobs(_Strict):
    #: endpoint -> its structured results re-encoded (true) or passed as they came
    #: (false); an endpoint not named is left to the proxy's edit-safe decision
    per_endpoint: dict[str, bool] = {}


class TelemetryKnobs(_Strict):
    sample_rate: float = Field(1.0, ge=0.0, le=1.0)
    flush_every_n: int = Field(25, ge=1)


# --- the profile axes -------------------------------------------------------------------


class TokenizerProfile(_Strict):
    chars_per_token: float = Field(gt=0)
    inline_json_cost: float = Field(1.0, gt=0)  # relative cost of JSON inlined in a cell
    toon_overhead: float = Field(1.0, gt=0)  # TOON's tokens / compact JSON's


class LlmProfile(_Strict):
    #: glob patterns of the model ids this profile is for (besides its own name)
    match: tuple[str, ...] = ()
    tokenizer: str
    context_window: int = Field(ge=1)
    prefer_explicit_keys: bool = False
    max_inline_nested: int = Field(128, ge=0)


class AgentProfile(_Strict):
    priority: Literal["latency", "balanced", "accuracy"] = "balanced"
    #: None: the knob's own value (mckp.recursion_depth, dedup.near_ref_enabled)
    recursion_depth: int | None = Field(None, ge=1, le=64)
    hint_aggressiveness: float = Field(0.5, ge=0.0, le=1.0)
    near_ref_enabled: bool | None = None


class DataProfile(_Strict):
    endpoint_pattern: str  # a glob over endpoint names; the first match wins
    preferred_format: str | None = None
    hint_set: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _known_format(self) -> DataProfile:
        ok = (*FORMAT_IDS, *TEMPLATE_IDS)
        if self.preferred_format is not None and self.preferred_format not in ok:
            raise ValueError(f"preferred_format: use one of {list(ok)}")
        return self


BUILTIN_TOKENIZERS = {
    # the design's numbers; a value the design does not give is 1.0 (no correction)
    "anthropic_class": TokenizerProfile(
        chars_per_token=3.5, inline_json_cost=2.2, toon_overhead=1.13
    ),
    "openai_o200k": TokenizerProfile(chars_per_token=4.0, toon_overhead=0.60),
    "ollama_bpe": TokenizerProfile(chars_per_token=4.0, inline_json_cost=1.0),
}
BUILTIN_LLMS = {
    "glm-5.1": LlmProfile(
        match=("glm-5.1*",),
        tokenizer="anthropic_class",
        context_window=128_000,
        prefer_explicit_keys=True,
        max_inline_nested=128,
    ),
    "claude-sonnet-4.6": LlmProfile(
        match=("claude-*",),
        tokenizer="anthropic_class",
        context_window=200_000,
        prefer_explicit_keys=True,
        max_inline_nested=64,
    ),
    "gpt-oss:20b": LlmProfile(
        match=("gpt-oss*",), tokenizer="ollama_bpe", context_window=8192, max_inline_nested=512
    ),
    "gemma4:26b": LlmProfile(
        match=("gemma4*",), tokenizer="ollama_bpe", context_window=8192, max_inline_nested=512
    ),
    # an unknown model: the proxy counts o200k_base tokens, so assume that tokenizer
    "default": LlmProfile(tokenizer="openai_o200k", context_window=128_000),
}
BUILTIN_AGENTS = {
    "default": AgentProfile(priority="balanced", recursion_depth=5, hint_aggressiveness=0.5),
    "file_search_heavy": AgentProfile(
        priority="latency", recursion_depth=3, hint_aggressiveness=0.3
    ),
    "marathon_refactor": AgentProfile(
        priority="balanced", recursion_depth=7, near_ref_enabled=True
    ),
}
BUILTIN_DATA = {
    "gitlab_issues": DataProfile(
        endpoint_pattern="*gitlab*issue*",
        preferred_format="csv_from_md",
        hint_set=("metadata", "overflow"),
    ),
    "github_pulls": DataProfile(
        endpoint_pattern="*pull*", preferred_format="csv", hint_set=("metadata", "overflow")
    ),
    "k8s_logs": DataProfile(
        endpoint_pattern="*k8s*log*", preferred_format="text", hint_set=("ref",)
    ),
    "mr_diffs": DataProfile(
        endpoint_pattern="*merge_request*diff*", preferred_format="mr_diff_fence", hint_set=("ref",)
    ),
}


class _Axis(_Strict):
    """One axis: ``active`` is ``auto`` or a variant's name; ``variants`` adds to (or
    replaces by name) the built-in ones, which stay available."""

    active: str = "auto"

    def builtins(self) -> Mapping[str, Any]:
        raise NotImplementedError

    def all(self) -> dict[str, Any]:
        return {**self.builtins(), **self.variants}  # type: ignore[attr-defined]

    @model_validator(mode="after")
    def _active_exists(self) -> _Axis:
        if self.active != "auto" and self.active not in self.all():
            raise ValueError(
                f"active: {self.active!r} is not a variant; use auto or one of {sorted(self.all())}"
            )
        return self


class TokenizerAxis(_Axis):
    variants: dict[str, TokenizerProfile] = {}

    def builtins(self) -> Mapping[str, TokenizerProfile]:
        return BUILTIN_TOKENIZERS


class LlmAxis(_Axis):
    variants: dict[str, LlmProfile] = {}

    def builtins(self) -> Mapping[str, LlmProfile]:
        return BUILTIN_LLMS


class AgentClassifier(_Strict):
    """When ``auto`` picks file_search_heavy or marathon_refactor (the design's thresholds)."""

    file_search_max_events: int = Field(200, ge=0)
    file_search_min_read_share: float = Field(0.5, ge=0.0, le=1.0)
    marathon_min_events: int = Field(500, ge=0)
    marathon_min_compactions: int = Field(3, ge=0)


class AgentAxis(_Axis):
    variants: dict[str, AgentProfile] = {}
    classifier: AgentClassifier = AgentClassifier()

    def builtins(self) -> Mapping[str, AgentProfile]:
        return BUILTIN_AGENTS


class DataAxis(_Axis):
    variants: dict[str, DataProfile] = {}

    def builtins(self) -> Mapping[str, DataProfile]:
        return BUILTIN_DATA


class Profiles(_Strict):
    tokenizer: TokenizerAxis = TokenizerAxis()
    llm: LlmAxis = LlmAxis()
    agent: AgentAxis = AgentAxis()
    data: DataAxis = DataAxis()


# --- the hint policy ----------------------------------------------------------------------


class HintRule(_Strict):
    enabled: bool = True
    max_per_session: int | None = Field(None, ge=0)  # None: no limit
    applies_to_models: tuple[str, ...] = ()  # model-id globs; empty: every model
    reason: str | None = None

    def allows(self, model_id: str | None) -> bool:
        if not self.enabled:
            return False
        if not self.applies_to_models:
            return True
        return model_id is not None and any(
            fnmatchcase(model_id, p) for p in self.applies_to_models
        )


BUILTIN_HINTS = {
    "ref": HintRule(),
    "near_ref": HintRule(),
    "metadata": HintRule(),
    "overflow": HintRule(),
    "schema_explainer": HintRule(
        enabled=False,
        reason="0 p.p. accuracy lift on capable models in the design's 2026-04-25 evaluation; "
        "off so that no tuner rediscovers it",
    ),
    "inline_format_hint": HintRule(applies_to_models=("gpt-oss:20b", "gemma4:26b")),
}


class AdaptiveConfig(_Strict):
    """The tuner's file, schema v2. Every section is optional; what a file leaves out is
    the built-in default (or an active profile's value)."""

    schema_version: Literal[2] = 2
    dedup: DedupKnobs = DedupKnobs()
    templates: TemplateKnobs = TemplateKnobs()
    mckp: MckpKnobs = MckpKnobs()
    encoding: EncodingKnobs = EncodingKnobs()
    telemetry: TelemetryKnobs = TelemetryKnobs()
    profiles: Profiles = Profiles()
    #: hint type -> its rule, over (and besides) the built-in ones
    hints: dict[str, HintRule] = {}
    #: knob path -> the rule that wrote its value (``dedup.lru_size: R3``)
    tuned: dict[str, str] = {}

    @model_validator(mode="after")
    def _llm_tokenizers_exist(self) -> AdaptiveConfig:
        tokenizers = self.profiles.tokenizer.all()
        for name, llm in self.profiles.llm.all().items():
            if llm.tokenizer not in tokenizers:
                raise ValueError(
                    f"profiles.llm.variants.{name}.tokenizer: {llm.tokenizer!r} is "
                    f"not a tokenizer profile ({sorted(tokenizers)})"
                )
        return self

    def hint_rules(self) -> dict[str, HintRule]:
        return {**BUILTIN_HINTS, **self.hints}


# --- reading and writing --------------------------------------------------------------------


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()
    )


def parse_adaptive(raw: Any, where: str = "config") -> AdaptiveConfig:
    """A v1 or v2 mapping as an :class:`AdaptiveConfig` (v1 migrated in memory)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise TuneError(f"{where}: the top level must be a mapping of settings")
    version = raw.get("schema_version", 1)
    if isinstance(version, bool) or version not in SUPPORTED_VERSIONS:
        raise TuneError(
            f"{where}: schema_version {version!r} is not supported; this tersetalk "
            f"reads versions {', '.join(map(str, SUPPORTED_VERSIONS))} (a newer "
            "file needs a newer tersetalk)"
        )
    data = dict(raw)
    if version == 1:
        extra = sorted(set(data) & {"profiles", "hints", "tuned"})
        if extra:
            raise TuneError(
                f"{where}: {', '.join(extra)} belong to schema_version 2; set schema_version: 2"
            )
        data["schema_version"] = 2  # v1 is v2 without profiles and hints: their defaults
    try:
        return AdaptiveConfig.model_validate(data)
    except ValidationError as exc:
        raise TuneError(f"{where}: {_problems(exc)}") from None


def load_adaptive(path: str | Path | None) -> AdaptiveConfig:
    """The tuner config in ``path`` (.yaml/.yml/.toml), v1 migrated; None: the defaults.
    The file itself is never rewritten here."""
    if path is None:
        return AdaptiveConfig()
    p = Path(path)
    if not p.is_file():
        raise TuneError(f"{p}: no such tuner config file")
    try:
        text = p.read_text(encoding="utf-8")
        if p.suffix == ".toml":
            raw = read_toml(text)
        elif p.suffix in (".yaml", ".yml"):
            raw = read_yaml(text)
        else:
            raise TuneError(f"{p}: give a .yaml, .yml or .toml file")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise TuneError(f"{p}: cannot read it ({exc})") from None
    return parse_adaptive(raw, str(p))


def dump_adaptive(config: AdaptiveConfig) -> dict[str, Any]:
    """What a v2 file holds: ``schema_version: 2`` and only what was set (so the values
    left to profiles and defaults stay theirs when the file is read back)."""
    out = config.model_dump(mode="json", exclude_unset=True)
    return {"schema_version": 2, **{k: v for k, v in out.items() if k != "schema_version"}}


def save_adaptive(config: AdaptiveConfig, path: str | Path) -> Path:
    """Write ``config`` as a v2 file (YAML, or TOML for a .toml path)."""
    p = Path(path)
    data = dump_adaptive(config)
    if p.suffix == ".toml":
        text = _toml(data)
    elif p.suffix in (".yaml", ".yml"):
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    else:
        raise TuneError(f"{p}: give a .yaml, .yml or .toml file")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def _toml(data: Mapping[str, Any], prefix: str = "") -> str:
    """A small TOML writer for this schema (tables, scalars, lists; None is left out)."""
    scalars, tables = [], []
    for k, v in data.items():
        key = json.dumps(k) if not k.replace("_", "").replace("-", "").isalnum() else k
        if isinstance(v, dict):
            tables.append((key, v))
        elif v is not None:
            scalars.append(f"{key} = {json.dumps(v)}")
    out = "\n".join(scalars) + ("\n" if scalars else "")
    for key, v in tables:
        name = f"{prefix}.{key}" if prefix else key
        out += f"\n[{name}]\n" + _toml(v, name)
    return out


# --- resolution ----------------------------------------------------------------------------


#: the knob sections of a tuner file, in the order they are resolved and shown
SECTIONS = ("dedup", "templates", "mckp", "encoding", "telemetry")


class SessionContext(_Strict):
    """What is known of a session when its configuration is resolved."""

    model_id: str | None = None
    event_count: int = Field(0, ge=0)
    compaction_count: int = Field(0, ge=0)
    read_share: float = Field(0.0, ge=0.0, le=1.0)


class EffectiveConfig(_Strict):
    """One configuration for one session: every axis resolved, every knob one value,
    and ``sources`` saying for each value where it came from (``default``, ``file``,
    ``profile <axis>:<variant>`` or ``rule R<n>``)."""

    schema_version: Literal[2] = 2
    context: SessionContext
    llm: str
    tokenizer: str
    agent: str
    llm_profile: LlmProfile
    tokenizer_profile: TokenizerProfile
    agent_profile: AgentProfile
    dedup: DedupKnobs
    templates: TemplateKnobs
    mckp: MckpKnobs
    encoding: EncodingKnobs
    telemetry: TelemetryKnobs
    data: dict[str, DataProfile]  # in matching order (the first match wins)
    data_active: str
    hints: dict[str, HintRule]
    hints_allowed: tuple[str, ...]
    sources: dict[str, str]

    def data_profile(self, endpoint: str) -> tuple[str, DataProfile] | None:
        if self.data_active != "auto":
            return self.data_active, self.data[self.data_active]
        for name, profile in self.data.items():
            if fnmatchcase(endpoint, profile.endpoint_pattern):
                return name, profile
        return None

    def source(self, knob: str) -> str:
        return self.sources.get(knob, "default")


def resolve_llm(config: AdaptiveConfig, model_id: str | None) -> str:
    axis = config.profiles.llm
    if axis.active != "auto":
        return axis.active
    variants = axis.all()
    if model_id is not None:
        if model_id in variants:
            return model_id
        for name, profile in variants.items():
            if any(fnmatchcase(model_id, p) for p in profile.match):
                return name
    return "default"


def classify_agent(config: AdaptiveConfig, context: SessionContext) -> str:
    axis = config.profiles.agent
    if axis.active != "auto":
        return axis.active
    c = axis.classifier
    if (
        context.event_count <= c.file_search_max_events
        and context.read_share >= c.file_search_min_read_share
    ):
        return "file_search_heavy"
    if (
        context.event_count >= c.marathon_min_events
        and context.compaction_count >= c.marathon_min_compactions
    ):
        return "marathon_refactor"
    return "default"


def _set_in(model: BaseModel, name: str) -> bool:
    return name in model.model_fields_set


def resolve(config: AdaptiveConfig, context: SessionContext | None = None) -> EffectiveConfig:
    """The design's chain, a pure function: llm (from the model id) -> its tokenizer ->
    the agent (from the session's statistics) -> the knobs (default, then the agent
    profile, then the file) -> the hint policy for this model."""
    context = context or SessionContext()
    sources: dict[str, str] = {}

    def origin(knob: str) -> str:
        rule = config.tuned.get(knob)
        return f"rule {rule}" if rule else "file"

    llm = resolve_llm(config, context.model_id)
    llm_profile = config.profiles.llm.all()[llm]
    llm_how = "file" if config.profiles.llm.active != "auto" else f"profile llm:{llm}"
    sources["profiles.llm"] = llm_how
    tok_axis = config.profiles.tokenizer
    tokenizer = tok_axis.active if tok_axis.active != "auto" else llm_profile.tokenizer
    sources["profiles.tokenizer"] = "file" if tok_axis.active != "auto" else f"profile llm:{llm}"
    agent = classify_agent(config, context)
    agent_profile = config.profiles.agent.all()[agent]
    sources["profiles.agent"] = (
        "file" if config.profiles.agent.active != "auto" else f"profile agent:{agent}"
    )

    sections: dict[str, BaseModel] = {}
    for section in SECTIONS:
        model: BaseModel = getattr(config, section)
        for name in type(model).model_fields:
            knob = f"{section}.{name}"
            if _set_in(config, section) and _set_in(model, name):
                value = getattr(model, name)
                if isinstance(value, dict):  # a map: each entry its own origin
                    for key in value:
                        sources[f"{knob}.{key}"] = origin(f"{knob}.{key}")
                sources[knob] = origin(knob)
        sections[section] = model
    # the agent profile fills what the file leaves unset
    for knob, section, field, value in (
        ("mckp.recursion_depth", "mckp", "recursion_depth", agent_profile.recursion_depth),
        ("dedup.near_ref_enabled", "dedup", "near_ref_enabled", agent_profile.near_ref_enabled),
    ):
        if value is not None and knob not in sources:
            sections[section] = sections[section].model_copy(update={field: value})
            sources[knob] = f"profile agent:{agent}"

    rules = config.hint_rules()
    for name in rules:
        if name in config.hints:
            sources[f"hints.{name}"] = origin(f"hints.{name}")
    allowed = tuple(name for name, rule in rules.items() if rule.allows(context.model_id))
    # the file's data variants first: the first match wins, and a user's pattern should
    # be able to win over a built-in one
    mine = config.profiles.data.variants
    data = {**mine, **{k: v for k, v in BUILTIN_DATA.items() if k not in mine}}
    for name in data:
        if name in config.profiles.data.variants:
            sources[f"profiles.data.{name}"] = "file"
    return EffectiveConfig(
        context=context,
        llm=llm,
        tokenizer=tokenizer,
        agent=agent,
        llm_profile=llm_profile,
        tokenizer_profile=tok_axis.all()[tokenizer],
        agent_profile=agent_profile,
        dedup=sections["dedup"],
        templates=sections["templates"],
        mckp=sections["mckp"],
        encoding=sections["encoding"],
        telemetry=sections["telemetry"],
        data=data,
        data_active=config.profiles.data.active,
        hints=rules,
        hints_allowed=allowed,
        sources=sources,
    )


# --- what the proxy implements --------------------------------------------------------------

#: knobs with no mechanism in today's proxy (tersetalk.mcp.session)
NOT_IMPLEMENTED = (
    "dedup.hint_verbosity",
    "templates.active",
    "templates.endpoint_overrides",
    "mckp.recursion_depth",
    "mckp.formats_enabled",
    "mckp.shape_thresholds",
    "telemetry.sample_rate",
    "telemetry.flush_every_n",
)


def to_proxy_config(
    effective: EffectiveConfig, base: ProxyConfig
) -> tuple[ProxyConfig, tuple[str, ...]]:
    """``base`` with the effective values the proxy implements layered over it, and the
    knob paths that were set (by the file, a rule or a profile) but that the proxy has no
    mechanism for. A value still at its built-in default is not layered: the proxy
    config's own value stays.

    Mapped: dedup.lru_size and dedup.min_body_chars (the L0 cache),
    dedup.near_ref_enabled (hints.near_ref, if the hint policy allows near_ref for the
    model), dedup.enabled_per_endpoint (per-tool ``dedup`` overrides: an endpoint is a
    tool name), encoding.per_endpoint (per-tool ``encode`` overrides), hints.metadata
    (the metadata hint on or off).
    """
    set_ = {k for k, v in effective.sources.items() if v != "default"}
    dedup = base.dedup
    hints = base.hints
    if "dedup.lru_size" in set_:
        dedup = dedup.model_copy(update={"lru_size": effective.dedup.lru_size})
    if "dedup.min_body_chars" in set_:
        dedup = dedup.model_copy(update={"min_body_chars": effective.dedup.min_body_chars})
    if "dedup.near_ref_enabled" in set_ or "hints.near_ref" in set_:
        on = effective.dedup.near_ref_enabled and "near_ref" in effective.hints_allowed
        hints = hints.model_copy(update={"near_ref": on})
    if "hints.metadata" in set_:
        hints = hints.model_copy(update={"metadata": "metadata" in effective.hints_allowed})
    tools = dict(base.tools)
    for endpoint, on in effective.dedup.enabled_per_endpoint.items():
        own = tools.get(endpoint, ToolOverride())
        tools[endpoint] = own.model_copy(update={"dedup": on})
    for endpoint, on in effective.encoding.per_endpoint.items():
        own = tools.get(endpoint, ToolOverride())
        tools[endpoint] = own.model_copy(update={"encode": on})
    config = base.model_copy(update={"dedup": dedup, "hints": hints, "tools": tools})
    config = ProxyConfig.model_validate(config.model_dump())  # the result is a valid config
    missing = [k for k in NOT_IMPLEMENTED if k in set_ or any(s.startswith(k + ".") for s in set_)]
    for name, rule in effective.hints.items():
        if f"hints.{name}" not in set_:
            continue
        if name not in ("near_ref", "metadata"):  # no on/off switch in the proxy
            missing.append(f"hints.{name}")
        elif rule.max_per_session is not None:
            missing.append(f"hints.{name}.max_per_session")
    missing += sorted(k for k in set_ if k.startswith("profiles.data."))
    return config, tuple(dict.fromkeys(missing))


def applied_knobs(effective: EffectiveConfig) -> tuple[str, ...]:
    """The knob paths :func:`to_proxy_config` layers over the proxy config."""
    mapped = (
        "dedup.lru_size",
        "dedup.min_body_chars",
        "dedup.near_ref_enabled",
        "hints.near_ref",
        "hints.metadata",
    )
    set_ = {k for k, v in effective.sources.items() if v != "default"}
    out = [k for k in mapped if k in set_]
    out += [f"dedup.enabled_per_endpoint.{e}" for e in effective.dedup.enabled_per_endpoint]
    out += [f"encoding.per_endpoint.{e}" for e in effective.encoding.per_endpoint]
    return tuple(out)


def layer_tuned(
    path: str | Path, base: ProxyConfig, context: SessionContext | None = None
) -> tuple[ProxyConfig, tuple[str, ...], tuple[str, ...], EffectiveConfig]:
    """What ``mcp-proxy --tuned`` does: load, resolve, layer. Returns the proxy config,
    the knobs applied, the knobs not implemented and the effective configuration."""
    effective = resolve(load_adaptive(path), context)
    config, missing = to_proxy_config(effective, base)
    return config, applied_knobs(effective), missing, effective


# --- telemetry inputs ------------------------------------------------------------------------


class EndpointStats(BaseModel):
    """One row of the per-endpoint fingerprints (the fields the rules read)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    endpoint_class: str
    call_count: int = Field(ge=0)
    response_chars_p25: float = Field(ge=0)
    response_chars_p50: float = Field(ge=0)
    response_chars_p90: float = Field(ge=0)
    shape_dominant: str
    dup_rate: float = Field(ge=0, le=1)
    repeat_burst_p90: float = Field(ge=0)
    inner_formats_top3: tuple[str, ...] = ()
    avg_cols: float | None = None
    nested_object_depth_p95: float | None = None
    last_seen_ms: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _clean(cls, raw: Any) -> Any:
        if isinstance(raw, dict):
            raw = {
                k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in raw.items()
            }
            top = raw.get("inner_formats_top3")
            if isinstance(top, str):
                raw["inner_formats_top3"] = tuple(json.loads(top) if top else ())
            elif top is not None and not isinstance(top, tuple):
                raw["inner_formats_top3"] = tuple(top)
        return raw


class SessionStats(BaseModel):
    """One session summary (the fields R3 reads)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    total_events: int = Field(ge=0)
    compaction_count: int = Field(ge=0)
    sample_rate_applied: float = Field(1.0, gt=0, le=1)
    ended_at_ms: int | None = None


def endpoint_stats(
    rows: Iterable[Mapping[str, Any]], where: str = "fingerprints"
) -> list[EndpointStats]:
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(EndpointStats.model_validate(dict(row)))
        except (ValidationError, json.JSONDecodeError) as exc:
            why = _problems(exc) if isinstance(exc, ValidationError) else str(exc)
            raise TuneError(f"{where}: row {i}: {why}") from None
    return out


def session_stats(
    rows: Iterable[Mapping[str, Any]], where: str = "summaries"
) -> list[SessionStats]:
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(SessionStats.model_validate(dict(row)))
        except ValidationError as exc:
            raise TuneError(f"{where}: summary {i}: {_problems(exc)}") from None
    return out


# --- the rules --------------------------------------------------------------------------------

MIN_CALLS = 20  # R1 and R2 act only on endpoints with at least this many calls
DUP_ON, DUP_OFF = 0.30, 0.05
COMPACTION_RATE = 0.05  # events^-1


@dataclass(frozen=True)
class Change:
    """One value the tuner changes, and why."""

    rule: str
    knob: str
    endpoint: str | None
    old: Any
    new: Any
    statistic: str
    value: float
    threshold: str
    #: the tokens the change saved in a replay of the training sessions (negative: what
    #: a safety change costs); None: not measured (fingerprints only)
    tokens_saved: float | None = None


def r1_decision(dup_rate: float) -> bool | None:
    """R1: dedup on (True), off (False) or left as it is (None) for an endpoint."""
    if dup_rate >= DUP_ON:
        return True
    if dup_rate <= DUP_OFF:
        return False
    return None


def r1_lru(repeat_burst_p90: float) -> int:
    # round half to even, as the design's round() would in Python
    return min(10, 1 + round(repeat_burst_p90))


def r2_template(shape_dominant: str, avg_cols: float | None, top3: Sequence[str]) -> str | None:
    if shape_dominant == "markdown_table" and avg_cols is not None and avg_cols >= 2:
        return "csv_from_md"
    if {"log", "url", "hash"} <= set(top3):
        return "pipeline_deep_mckp"
    if "diff" in top3:
        return "mr_diff_fence"
    return None


def r3_lru(compaction_rate: float, events_per_partition: float, avg_events: float) -> int:
    if compaction_rate > COMPACTION_RATE:
        return max(10, math.ceil(events_per_partition * 0.2))
    if avg_events < 20:
        return 3
    return 5


def r4_depth(nested_depth_p95: float) -> int:
    return 3 if nested_depth_p95 < 3 else 5


def r5_min_body(p25_chars: float) -> int:
    return int(min(500, max(100, round(p25_chars))))


def session_profile(sessions: Sequence[SessionStats]) -> dict[str, float] | None:
    """R3's statistics over the sessions (events scaled by 1 / sample_rate_applied)."""
    if not sessions:
        return None
    events = [s.total_events / s.sample_rate_applied for s in sessions]
    total = sum(events)
    compactions = sum(s.compaction_count for s in sessions)
    partitions = sum(s.compaction_count + 1 for s in sessions)
    return {
        "compaction_rate": compactions / total if total else 0.0,
        "avg_events_per_partition": total / partitions,
        "avg_events": total / len(sessions),
    }


def weighted_quantile(values: Sequence[float], weights: Sequence[float], q: float) -> float:
    """The lower weighted ``q``-quantile (nearest rank): the smallest value whose
    cumulative weight reaches ``q`` of the total."""
    pairs = sorted(zip(values, weights, strict=True))
    total = sum(w for _, w in pairs)
    acc = 0.0
    for v, w in pairs:
        acc += w
        if acc >= q * total - 1e-12:
            return v
    return pairs[-1][0]


def pooled_p25(endpoints: Sequence[EndpointStats]) -> float | None:
    """The 25th percentile of response size over all calls, from each endpoint's
    p25/p50/p90 (its distribution taken piecewise linear through (0, 0), those three
    points and (2 * p90 + 1, 1)), weighted by call count."""
    rows = [e for e in endpoints if e.call_count > 0]
    if not rows:
        return None
    total = sum(e.call_count for e in rows)

    def cdf(e: EndpointStats, x: float) -> float:
        a, b, c = sorted((e.response_chars_p25, e.response_chars_p50, e.response_chars_p90))
        top = 2 * c + 1.0  # (a knot that moves only up with c: monotone)
        pts = ((0.0, 0.0), (a, 0.25), (b, 0.5), (c, 0.9), (top, 1.0))
        if x >= top:
            return 1.0
        for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
            if x < x1:
                return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        return 1.0

    def mix(x: float) -> float:
        return sum(e.call_count * cdf(e, x) for e in rows) / total

    # the mixture is piecewise linear between the endpoints' knots: find the segment
    # where it reaches 0.25 and interpolate in it
    knots = sorted({0.0} | {k for e in rows for k in _knots(e)})
    prev_x, prev_f = 0.0, mix(0.0)
    for x in knots:
        f = mix(x)
        if f >= 0.25:
            if f == prev_f or x == prev_x:
                return x
            return prev_x + (0.25 - prev_f) * (x - prev_x) / (f - prev_f)
        prev_x, prev_f = x, f
    return knots[-1]


def _knots(e: EndpointStats) -> tuple[float, ...]:
    a, b, c = sorted((e.response_chars_p25, e.response_chars_p50, e.response_chars_p90))
    return (a, b, c, 2 * c + 1.0)


def _with(model: BaseModel, **update: Any) -> Any:
    """A copy with ``update`` applied and counted as set (so it is saved)."""
    return type(model).model_validate({**model.model_dump(exclude_unset=True), **update})


def tune(
    config: AdaptiveConfig,
    endpoints: Sequence[EndpointStats],
    sessions: Sequence[SessionStats] = (),
    events: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[AdaptiveConfig, list[Change]]:
    """Rules R1-R5 over the telemetry: the proposed config and every value it changes.

    With ``events`` (the proxy's telemetry events, ``analyze --telemetry-dir``), the
    measured rules of :func:`tune_measured` instead: every value is derived from and
    checked against a replay of the training sessions. What follows is the rule set on
    aggregates alone (``analyze --fingerprints``), which cannot replay anything.

    The LRU size: R3 sizes it from the sessions; R1 suggests, per endpoint with many
    repeats, ``min(10, 1 + round(repeat_burst_p90))``. The cache is shared by every
    endpoint, so the size is the largest of R3's and the suggestions (a cache smaller
    than an endpoint's repeat burst misses repeats R1 counted). With no session
    summaries R3 cannot act, and the suggestions only raise the size the file has.
    A pure function: the same inputs give the same output, and tuning the output again
    on the same telemetry changes nothing (the rules read only telemetry).
    """
    if events is not None:
        return tune_measured(config, endpoints, events)
    changes: list[Change] = []
    dedup, templates, mckp = config.dedup, config.templates, config.mckp
    enabled = dict(dedup.enabled_per_endpoint)
    overrides = dict(templates.endpoint_overrides)
    suggestions: list[tuple[int, EndpointStats]] = []
    guard = f"call_count >= {MIN_CALLS}"
    for e in sorted(endpoints, key=lambda e: e.endpoint_class):
        if e.call_count < MIN_CALLS:
            continue
        on = r1_decision(e.dup_rate)
        if on is True:
            suggestions.append((r1_lru(e.repeat_burst_p90), e))
        old = enabled.get(e.endpoint_class, True)
        if on is not None and on != old:
            enabled[e.endpoint_class] = on
            threshold = f">= {DUP_ON:.2f}" if on else f"<= {DUP_OFF:.2f}"
            changes.append(
                Change(
                    "R1",
                    "dedup.enabled_per_endpoint",
                    e.endpoint_class,
                    old,
                    on,
                    "dup_rate",
                    e.dup_rate,
                    f"{threshold}; {guard}",
                )
            )
        template = r2_template(e.shape_dominant, e.avg_cols, e.inner_formats_top3)
        if template is not None and overrides.get(e.endpoint_class) != template:
            stat, val, thr = (
                ("avg_cols", e.avg_cols or 0.0, "shape markdown_table, >= 2")
                if template == "csv_from_md"
                else (
                    "inner_formats_top3",
                    float(len(e.inner_formats_top3)),
                    "{log,url,hash} in top3"
                    if template == "pipeline_deep_mckp"
                    else "diff in top3",
                )
            )
            changes.append(
                Change(
                    "R2",
                    "templates.endpoint_overrides",
                    e.endpoint_class,
                    overrides.get(e.endpoint_class),
                    template,
                    stat,
                    val,
                    f"{thr}; {guard}",
                )
            )
            overrides[e.endpoint_class] = template

    # R3 with R1's suggestions: one shared LRU
    lru, lru_rule, lru_evidence = dedup.lru_size, None, None
    profile = session_profile(sessions)
    if profile is not None:
        lru = r3_lru(
            profile["compaction_rate"], profile["avg_events_per_partition"], profile["avg_events"]
        )
        if profile["compaction_rate"] > COMPACTION_RATE:
            ev = (
                "avg_events_per_partition",
                profile["avg_events_per_partition"],
                f"compaction_rate > {COMPACTION_RATE}; max(10, ceil(x * 0.2))",
            )
        elif profile["avg_events"] < 20:
            ev = ("avg_events", profile["avg_events"], "< 20")
        else:
            ev = ("avg_events", profile["avg_events"], ">= 20 and compaction_rate <= 0.05")
        lru_rule, lru_evidence = "R3", (None, *ev)
    for size, e in suggestions:
        if size > lru:
            lru, lru_rule = size, "R1"
            lru_evidence = (
                e.endpoint_class,
                "repeat_burst_p90",
                e.repeat_burst_p90,
                "min(10, 1 + round(x)); the largest suggestion and R3's",
            )
    tuned = dict(config.tuned)
    if lru != dedup.lru_size and lru_rule is not None and lru_evidence is not None:
        endpoint, stat, val, thr = lru_evidence
        changes.append(
            Change(lru_rule, "dedup.lru_size", endpoint, dedup.lru_size, lru, stat, float(val), thr)
        )

    # R4: the recursion depth from the call-weighted p95 of nested depth
    depth = mckp.recursion_depth
    nested = [e for e in endpoints if e.nested_object_depth_p95 is not None and e.call_count > 0]
    if nested:
        p95 = weighted_quantile(
            [e.nested_object_depth_p95 for e in nested],  # type: ignore[misc]
            [e.call_count for e in nested],
            0.95,
        )
        new = r4_depth(p95)
        if new != depth:
            changes.append(
                Change(
                    "R4",
                    "mckp.recursion_depth",
                    None,
                    depth,
                    new,
                    "nested_object_depth_p95",
                    p95,
                    "< 3 -> 3, else 5",
                )
            )
            depth = new

    # R5: the smallest body dedup replaces
    min_body = dedup.min_body_chars
    p25 = pooled_p25(endpoints)
    if p25 is not None:
        new = r5_min_body(p25)
        if new != min_body:
            changes.append(
                Change(
                    "R5",
                    "dedup.min_body_chars",
                    None,
                    min_body,
                    new,
                    "response_chars_p25",
                    p25,
                    "clamp(x, 100, 500)",
                )
            )
        min_body = new

    for c in changes:
        key = (
            c.knob
            if c.endpoint is None or c.knob == "dedup.lru_size"
            else (f"{c.knob}.{c.endpoint}")
        )
        tuned[key] = c.rule
    d_update: dict[str, Any] = {}
    if enabled != dedup.enabled_per_endpoint:
        d_update["enabled_per_endpoint"] = enabled
    if lru != dedup.lru_size:
        d_update["lru_size"] = lru
    if min_body != dedup.min_body_chars:
        d_update["min_body_chars"] = min_body
    update: dict[str, Any] = {}
    if d_update:
        update["dedup"] = _with(dedup, **d_update)
    if overrides != templates.endpoint_overrides:
        update["templates"] = _with(templates, endpoint_overrides=overrides)
    if depth != mckp.recursion_depth:
        update["mckp"] = _with(mckp, recursion_depth=depth)
    if tuned != config.tuned:
        update["tuned"] = tuned
    if not update:
        return config, changes
    out = parse_adaptive(
        {
            **dump_adaptive(config),
            **{
                k: (
                    v.model_dump(mode="json", exclude_unset=True) if isinstance(v, BaseModel) else v
                )
                for k, v in update.items()
            },
        }
    )
    return out, changes


# --- the measured rules (telemetry events: the training sessions replayed) ------------------


def _apply(config: AdaptiveConfig, changes: Sequence[Change], **sections: Any) -> AdaptiveConfig:
    """``config`` with ``sections`` (name -> updated knob model) and the changes' rules
    recorded in ``tuned``."""
    if not changes:
        return config
    tuned = dict(config.tuned)
    for c in changes:
        endpoint_keyed = c.endpoint is not None and c.knob != "dedup.lru_size"
        tuned[f"{c.knob}.{c.endpoint}" if endpoint_keyed else c.knob] = c.rule
    raw = dump_adaptive(config)
    for name, model in sections.items():
        raw[name] = model.model_dump(mode="json", exclude_unset=True)
    raw["tuned"] = tuned
    return parse_adaptive(raw)


def tune_measured(
    config: AdaptiveConfig,
    endpoints: Sequence[EndpointStats],
    events: Sequence[Mapping[str, Any]],
) -> tuple[AdaptiveConfig, list[Change]]:
    """The rules on the training sessions replayed (:mod:`tersetalk.mcp.tune_replay`).

    A knob that only saves tokens changes only when the replay shows the new value
    saves tokens on the training sessions (``tokens_saved`` > 0 in its evidence row):

    - R1: dedup turned on for an endpoint where it is off and repeats are frequent
      (``dup_rate`` >= 0.30, at least 20 calls) and the replay saves; turning dedup
      off saves nothing, so R1 never does it here;
    - R3: the LRU size from the repeats, weighted by what they cost: the smallest size
      whose replay saves 95% of the tokens the largest size (the proxy's
      ``retrieval.keep``) saves, if larger than the current one and the replay saves (a
      smaller cache saves nothing). By tokens, not by count: a few far repeats of large
      results (a whole graph, a long log) can be most of what a cache saves. The
      replay empties the cache at each call of a tool the telemetry shows to be a write
      (:func:`tersetalk.mcp.tune_replay.writes`), so repeats no cache could catch do
      not count;
    - R5: ``dedup.min_body_chars`` to R5's value when the replay saves with it (the
      LRU size then covers the repeats at the new minimum);
    - R2 (templates) and R4 (recursion depth) are left: the proxy has no mechanism for
      them, so no replay can show a saving.

    Two safety rules turn a tool's re-encoding off (``encoding.per_endpoint``: false),
    their evidence giving what that costs (the tokens its re-encodings saved, negated):

    - R6, decode failures: at least 3 re-encodings of the tool failed to decode to what
      the server sent, and at least half of its attempts did;
    - R7, edit patterns: at least twice an edit tool (edit, replace, patch, apply;
      write with a text noun) was called within 3 results after a re-encoded result of
      the tool: the agent quotes such results back, so they should pass as they came.

    A pure function; tuning its output again on the same telemetry changes nothing.
    """
    from tersetalk.mcp import tune_replay as R

    tr = R.trace(events)
    dedup, encoding = config.dedup, config.encoding
    enabled = dict(dedup.enabled_per_endpoint)
    lru, min_body = dedup.lru_size, dedup.min_body_chars
    changes: list[Change] = []
    forget = R.writes(tr, R.eligibility(min_body, enabled))
    block = R.blocked(tr, R.eligibility(min_body, enabled), forget)
    wrote = f"; writes inferred: {', '.join(sorted(forget))}" if forget else ""

    def cost(size: int, body: int, on: Mapping[str, bool]) -> R.Replay:
        return R.replay(tr, size, R.eligibility(body, on), block, forget)

    # R1: dedup on where repeats are frequent and dedup is off
    for e in sorted(endpoints, key=lambda e: e.endpoint_class):
        if e.call_count < MIN_CALLS or enabled.get(e.endpoint_class, True):
            continue
        if r1_decision(e.dup_rate) is not True:
            continue
        on = {**enabled, e.endpoint_class: True}
        saved = cost(lru, min_body, enabled).tokens - cost(lru, min_body, on).tokens
        if saved > 0:
            changes.append(Change("R1", "dedup.enabled_per_endpoint", e.endpoint_class, False,
                                  True, "dup_rate", e.dup_rate,
                                  f">= {DUP_ON:.2f}; call_count >= {MIN_CALLS}; the replay "
                                  "saves tokens", float(saved)))  # fmt: skip
            enabled = on

    def lru_change(body: int) -> Change | None:
        base = cost(lru, body, enabled)
        if not base.distances:
            return None
        size, saved = R.saving_size(base.tokens, {
            s: cost(s, body, enabled).tokens for s in range(lru + 1, R.LRU_MAX + 1)
        })  # fmt: skip
        if size is None:
            return None
        beyond = sum(d + 1 > lru for d in base.distances)
        return Change("R3", "dedup.lru_size", None, dedup.lru_size, size, "replayed_saving_q95",
                      float(size), f"an LRU of x entries saves {R.COVERAGE:.0%} of the tokens "
                      f"the largest ({R.LRU_MAX}) saves on the replayed repeats "
                      f"({len(base.distances)}, {beyond} beyond {lru}){wrote}",
                      float(saved))  # fmt: skip

    lru_step = lru_change(min_body)
    if lru_step is not None:
        lru = lru_step.new
    # R5: the minimum body, kept only if the replay at the (new) LRU size saves
    p25 = pooled_p25(endpoints)
    if p25 is not None:
        new = r5_min_body(p25)
        if new != min_body:
            saved = cost(lru, min_body, enabled).tokens - cost(lru, new, enabled).tokens
            if saved > 0:
                changes.append(Change("R5", "dedup.min_body_chars", None, min_body, new,
                                      "response_chars_p25", p25, "clamp(x, 100, 500); the "
                                      "replay saves tokens", float(saved)))  # fmt: skip
                min_body = new
                again = lru_change(min_body)  # more bodies cached: their repeats too
                if again is not None and again.new > lru:
                    lru_step, lru = again, again.new
    if lru_step is not None:
        changes.append(lru_step)

    # R6, R7: re-encoding off for tools whose encodings fail or are quoted back
    per = dict(encoding.per_endpoint)
    for t in R.tool_evidence(tr):
        if per.get(t.endpoint) is False:
            continue
        if t.failures >= R.MIN_FAILURES and t.failure_share >= R.FAILURE_SHARE:
            rule, stat, value = "R6", "readback_failure_share", t.failure_share
            threshold = (f">= {R.FAILURE_SHARE:.2f} of re-encodings and >= {R.MIN_FAILURES} "
                         "failures")  # fmt: skip
        elif t.edits_after >= R.MIN_EDITS:
            rule, stat, value = "R7", "edits_after_encoded", float(t.edits_after)
            threshold = f">= {R.MIN_EDITS} edit calls within {R.EDIT_WINDOW} results"
        else:
            continue
        changes.append(Change(rule, "encoding.per_endpoint", t.endpoint, per.get(t.endpoint),
                              False, stat, value, threshold,
                              -float(t.tokens_saved)))  # fmt: skip
        per[t.endpoint] = False

    sections: dict[str, Any] = {}
    d_update: dict[str, Any] = {}
    if enabled != dedup.enabled_per_endpoint:
        d_update["enabled_per_endpoint"] = enabled
    if lru != dedup.lru_size:
        d_update["lru_size"] = lru
    if min_body != dedup.min_body_chars:
        d_update["min_body_chars"] = min_body
    if d_update:
        sections["dedup"] = _with(dedup, **d_update)
    if per != encoding.per_endpoint:
        sections["encoding"] = _with(encoding, per_endpoint=per)
    return _apply(config, changes, **sections), changes
