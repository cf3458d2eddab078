"""Properties of the config helpers every run depends on: merging, grid points, spec hashes.

Why properties: ``merge`` decides what a run sees when configs are layered (Snakemake's
--configfile does the same), ``calibration_points`` names the run files of a sweep, and
``spec_hash`` decides whether a checkpoint may be resumed. A slip in any of them
silently mixes results, so they are checked over generated inputs, not a few examples.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import re

from hypothesis import assume, given
from hypothesis import strategies as st

from tersetalk.pipeline.config import calibration_points, merge, spec_hash

keys = st.text(alphabet="abcdefgh_", min_size=1, max_size=4)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
configs = st.dictionaries(keys, values, max_size=5)


def _leaf_paths(obj, prefix=()):
    """Paths to every non-dict value (lists count as leaves, as merge treats them)."""
    if isinstance(obj, dict) and obj:
        for k, v in obj.items():
            yield from _leaf_paths(v, (*prefix, k))
    else:
        yield prefix


def _get(obj, path):
    for k in path:
        obj = obj[k]
    return obj


def _reordered(obj, rnd):
    """The same mapping with every dict's keys inserted in another order."""
    if isinstance(obj, dict):
        items = list(obj.items())
        rnd.shuffle(items)
        return {k: _reordered(v, rnd) for k, v in items}
    if isinstance(obj, list):
        return [_reordered(v, rnd) for v in obj]
    return obj


# ---- merge -------------------------------------------------------------------------------


@given(configs, configs)
def test_merge_overlay_leaves_win_and_base_is_kept_elsewhere(base, overlay):
    before = copy.deepcopy((base, overlay))
    out = merge(base, overlay)
    assert (base, overlay) == before  # neither input is mutated
    written = [p for p in _leaf_paths(overlay) if p]
    for path in written:
        if _get(overlay, path) != {}:  # an empty mapping merged into a mapping adds nothing
            assert _get(out, path) == _get(overlay, path)
    for path in _leaf_paths(base):
        # a base leaf survives unless the overlay writes on its path (above or below it)
        touched = any(p[: len(path)] == path or path[: len(p)] == p for p in written)
        if path and not touched:
            assert _get(out, path) == _get(base, path)


@given(configs, configs)
def test_merge_top_level_keys_are_the_union(base, overlay):
    assert set(merge(base, overlay)) == set(base) | set(overlay)


@given(configs)
def test_merge_with_nothing_is_a_copy(base):
    out = merge(base, {})
    assert out == base
    for path in _leaf_paths(base):
        if path and isinstance(_get(base, path), list):
            assert _get(out, path) is not _get(base, path)  # a deep copy, not shared
    assert merge({}, base) == base


@given(configs, configs)
def test_merge_is_idempotent_in_the_overlay(base, overlay):
    once = merge(base, overlay)
    assert merge(once, overlay) == once


@given(configs, keys, values, st.dictionaries(keys, values, min_size=1, max_size=3))
def test_non_dict_overlay_replaces_a_whole_subtree(base, key, value, subtree):
    assume(not isinstance(value, dict))
    base = {**base, key: subtree}
    out = merge(base, {key: value})
    assert out[key] == value
    assert merge({key: value}, {key: subtree})[key] == subtree  # and a dict replaces a leaf


# ---- calibration_points -------------------------------------------------------------------

grids = st.dictionaries(
    st.text(alphabet="abcdefghij_", min_size=1, max_size=6),
    st.lists(leaves, min_size=1, max_size=3),
    min_size=1,
    max_size=4,
)


@given(grids)
def test_calibration_points_are_the_grid_product_in_order(grid):
    config = {"calibration": {"sys": {"grid": copy.deepcopy(grid)}}}
    points = calibration_points(config, "sys")
    product = list(itertools.product(*grid.values()))
    assert len(points) == math.prod(len(v) for v in grid.values()) == len(product)
    names = list(points)
    assert names == [f"g{i:02d}" for i in range(len(product))]
    assert all(re.fullmatch(r"g\d{2,}", n) for n in names) and len(set(names)) == len(names)
    for name, values_ in zip(names, product, strict=True):
        assert list(points[name]) == list(grid)  # the grid's keys, in the grid's order
        assert list(points[name].values()) == list(values_)
    assert config["calibration"]["sys"]["grid"] == grid  # the config is not changed


# ---- spec_hash ---------------------------------------------------------------------------


@given(configs, st.randoms(use_true_random=False))
def test_spec_hash_ignores_key_order(spec, rnd):
    digest = spec_hash(spec)
    assert re.fullmatch(r"[0-9a-f]{12}", digest)
    assert spec_hash(_reordered(spec, rnd)) == digest
    assert spec_hash(copy.deepcopy(spec)) == digest


@given(st.dictionaries(keys, values, min_size=1, max_size=5), st.data())
def test_spec_hash_changes_when_any_leaf_changes(spec, data):
    paths = [p for p in _leaf_paths(spec) if p]
    path = data.draw(st.sampled_from(paths))
    old = _get(spec, path)
    new = data.draw(values)
    assume(json.dumps(new, sort_keys=True) != json.dumps(old, sort_keys=True))
    changed = copy.deepcopy(spec)
    _get(changed, path[:-1])[path[-1]] = new
    assert spec_hash(changed) != spec_hash(spec)


def test_spec_hash_is_stable_across_versions():
    """The hash function itself must not change: checkpoints and run files carry it."""
    spec = {"task": "gsm8k", "system": "freeform", "variant": "default", "variant_settings": {},
            "seed": 0, "nested": {"b": [1, 2.0, "x"], "a": None, "c": True}}  # fmt: skip
    assert spec_hash(spec) == "08bc7387d8a3"


# -- non-finite numbers: refused wherever they stand ----------------------------------------
def _number_paths(obj, prefix=()):
    """Paths to every number (not a boolean) of a config, through mappings and lists."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _number_paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _number_paths(v, (*prefix, i))
    elif isinstance(obj, int | float) and not isinstance(obj, bool):
        yield prefix


def _default_config() -> dict:
    from pathlib import Path

    from tersetalk.pipeline.config import load_config

    return load_config(Path(__file__).resolve().parents[1] / "config" / "config.yaml")


DEFAULT_CONFIG = _default_config()
NUMBER_PATHS = sorted(_number_paths(DEFAULT_CONFIG), key=str)


@given(
    st.sampled_from(NUMBER_PATHS),
    st.sampled_from([math.nan, math.inf, -math.inf]),
)
def test_a_non_finite_number_at_any_numeric_key_is_refused_naming_the_key(path, bad):
    from tersetalk.pipeline.config import ConfigError, validate_config

    config = copy.deepcopy(DEFAULT_CONFIG)
    _get(config, path[:-1])[path[-1]] = bad
    key = ".".join(map(str, path))
    try:
        validate_config(config)
    except ConfigError as exc:
        assert f"config key '{key}': not a finite number" in str(exc)
    else:
        raise AssertionError(f"{key} = {bad} was accepted")


def test_the_numeric_keys_cover_every_section():
    sections = {path[0] for path in NUMBER_PATHS}
    assert len(NUMBER_PATHS) > 30 and {"seed", "generation", "models", "evaluation"} <= sections
