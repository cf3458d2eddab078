"""The rule-based tuner (R1-R5, and R1-R7 measured on replayed telemetry), schema v2 with its
profile axes and hint policy, the resolution into one effective configuration, the
``tersetalk formats tune`` commands and ``mcp-proxy --tuned``.

The fingerprints and session summaries here are written by hand, with the field names
the telemetry module (tersetalk.mcp.telemetry) writes, so each rule's threshold can be
set exactly; tests/test_mcp_telemetry.py tunes from what the proxy's telemetry wrote.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from hypothesis import assume, given
from hypothesis import strategies as st

from tersetalk.cli import main
from tersetalk.mcp import tune as T
from tersetalk.mcp.config import ProxyConfig, ToolOverride

# -- inputs written by hand -------------------------------------------------------------------


def fingerprint(name: str, **over) -> dict:
    row = {
        "endpoint_class": name, "call_count": 40, "avg_response_chars": 2000.0,
        "response_chars_p25": 400.0, "response_chars_p50": 1500.0, "response_chars_p90": 6000.0,
        "shape_dominant": "nested_object", "shape_mix": json.dumps({"nested_object": 1.0}),
        "shape_entropy": 0.0, "dup_rate": 0.1, "repeat_burst_p90": 1.0,
        "inner_formats_top3": json.dumps(["url"]), "avg_cols": None, "avg_rows": None,
        "nested_object_depth_p95": 4.0, "first_seen_ms": 1_700_000_000_000,
        "last_seen_ms": 1_700_000_500_000, "source_sessions": 6,
    }  # fmt: skip
    row.update(over)
    return row


def summary(events: int, compactions: int, **over) -> dict:
    row = {
        "total_events": events, "dedup_hit_rate": 0.2, "l1_hit_rate": 0.1, "l2_hit_rate": 0.3,
        "avg_response_chars": 1800.0, "compaction_count": compactions,
        "endpoint_mix": {"get_issues": events}, "total_baseline_tokens": 90_000,
        "total_final_tokens": 60_000, "savings_pct": 33.3, "duration_sec": 600.0,
        "ended_at_ms": 1_700_000_600_000, "sample_rate_applied": 1.0,
    }  # fmt: skip
    row.update(over)
    return row


ISSUES = fingerprint("get_issues", shape_dominant="markdown_table", avg_cols=5.0,
                     dup_rate=0.45, repeat_burst_p90=6.6, response_chars_p25=800.0,
                     nested_object_depth_p95=None)  # fmt: skip
PIPELINE = fingerprint("get_pipeline", dup_rate=0.02, response_chars_p25=90.0,
                       inner_formats_top3=json.dumps(["log", "url", "hash"]))  # fmt: skip
RARE = fingerprint("get_diff", call_count=5, dup_rate=0.9, inner_formats_top3='["diff"]')


def tuned_example():
    endpoints = T.endpoint_stats([ISSUES, PIPELINE, RARE])
    sessions = T.session_stats([summary(100, 1), summary(40, 0)])
    return T.tune(T.AdaptiveConfig(), endpoints, sessions)


# -- strategies -----------------------------------------------------------------------------

NAMES = st.sampled_from(["get_issues", "get_pipeline", "read_file", "list_prs", "k8s_logs"])
chars = st.floats(0, 20_000, allow_nan=False)


@st.composite
def endpoint(draw, name=None):
    q = sorted(draw(st.lists(chars, min_size=3, max_size=3)))
    return T.EndpointStats(
        endpoint_class=name or draw(NAMES),
        call_count=draw(st.integers(0, 200)),
        response_chars_p25=q[0], response_chars_p50=q[1], response_chars_p90=q[2],
        shape_dominant=draw(st.sampled_from(T.SHAPES)),
        dup_rate=draw(st.floats(0, 1)),
        repeat_burst_p90=draw(st.floats(0, 30)),
        inner_formats_top3=tuple(draw(st.lists(st.sampled_from(T.INNER_FORMATS), max_size=3,
                                               unique=True))),
        avg_cols=draw(st.none() | st.floats(0, 20)),
        nested_object_depth_p95=draw(st.none() | st.floats(0, 12)),
    )  # fmt: skip


def endpoints():
    return st.lists(endpoint(), max_size=5, unique_by=lambda e: e.endpoint_class)


def sessions():
    return st.lists(st.builds(T.SessionStats, total_events=st.integers(0, 5000),
                              compaction_count=st.integers(0, 60),
                              sample_rate_applied=st.floats(0.05, 1.0)), max_size=4)  # fmt: skip


@st.composite
def configs(draw):
    dedup = {}
    if draw(st.booleans()):
        dedup["lru_size"] = draw(st.integers(1, 50))
    if draw(st.booleans()):
        dedup["min_body_chars"] = draw(st.integers(0, 2000))
    if draw(st.booleans()):
        dedup["enabled_per_endpoint"] = draw(st.dictionaries(NAMES, st.booleans(), max_size=3))
    raw = {"schema_version": 2, "dedup": dedup}
    if draw(st.booleans()):
        raw["mckp"] = {"recursion_depth": draw(st.integers(1, 10))}
    raw["profiles"] = {
        "agent": {"active": draw(st.sampled_from(["auto", *T.BUILTIN_AGENTS]))},
        "llm": {"active": draw(st.sampled_from(["auto", *T.BUILTIN_LLMS]))},
    }
    return T.parse_adaptive(raw)


contexts = st.builds(
    T.SessionContext,
    model_id=st.none() | st.sampled_from(["glm-5.1", "claude-sonnet-4.6", "gpt-oss:20b",
                                          "gemma4:26b", "mistral:instruct"]),
    event_count=st.integers(0, 3000), compaction_count=st.integers(0, 50),
    read_share=st.floats(0, 1),
)  # fmt: skip


# -- properties: each rule is monotone in its statistic -------------------------------------


def _dedup_on(config: T.AdaptiveConfig, name: str) -> bool:
    return config.dedup.enabled_per_endpoint.get(name, True)


@given(configs(), endpoint(name="get_issues"), st.floats(0, 1), st.floats(0, 1))
def test_r1_raising_dup_rate_never_turns_dedup_off(config, e, a, b):
    lo, hi = sorted((a, b))
    e = e.model_copy(update={"call_count": max(e.call_count, T.MIN_CALLS)})
    at_lo, _ = T.tune(config, [e.model_copy(update={"dup_rate": lo})])
    at_hi, _ = T.tune(config, [e.model_copy(update={"dup_rate": hi})])
    assert _dedup_on(at_lo, "get_issues") <= _dedup_on(at_hi, "get_issues")
    assert at_lo.dedup.lru_size <= at_hi.dedup.lru_size  # a repeat burst is only counted above
    assert T.r1_decision(lo) is not True or T.r1_decision(hi) is True


@pytest.mark.parametrize("start", [True, False])
def test_r1_over_a_grid_of_dup_rates_turns_dedup_on_once_and_for_good(start):
    raw = {"schema_version": 2, "dedup": {"enabled_per_endpoint": {"get_issues": start}}}
    config = T.parse_adaptive(raw)
    e = T.endpoint_stats([fingerprint("get_issues", repeat_burst_p90=3.0)])[0]
    seen = [_dedup_on(T.tune(config, [e.model_copy(update={"dup_rate": r / 100})])[0],
                      "get_issues") for r in range(101)]  # fmt: skip
    assert seen == sorted(seen) and seen[0] is False and seen[-1] is True
    assert seen[5] is False and seen[30] is True and all(x is start for x in seen[6:30])


@given(st.floats(0, 1), st.floats(0, 1))
def test_r1_thresholds_as_the_design_writes_them(a, b):
    assert T.r1_decision(0.30) is True and T.r1_decision(0.05) is False
    assert T.r1_decision(0.06) is None and T.r1_decision(0.29) is None
    assert all(2 <= T.r1_lru(x) <= 10 for x in (1.0, 6.6, 40.0))
    assert T.r1_lru(6.6) == 8 and T.r1_lru(0.0) == 1


@given(configs(), endpoints(), st.data())
def test_r4_raising_nested_depth_never_lowers_recursion_depth(config, eps, data):
    assume(eps)
    i = data.draw(st.integers(0, len(eps) - 1))
    raise_by = data.draw(st.floats(0, 10))
    base = eps[i].nested_object_depth_p95 or 0.0
    higher = [*eps]
    higher[i] = eps[i].model_copy(update={"nested_object_depth_p95": base + raise_by})
    lower = [*eps]
    lower[i] = eps[i].model_copy(update={"nested_object_depth_p95": base})
    a, _ = T.tune(config, lower)
    b, _ = T.tune(config, higher)
    if any(e.nested_object_depth_p95 is not None and e.call_count for e in lower):
        assert a.mckp.recursion_depth <= b.mckp.recursion_depth
    assert T.r4_depth(2.99) == 3 and T.r4_depth(3.0) == 5


@given(configs(), endpoints(), st.data())
def test_r5_is_non_decreasing_in_p25_and_within_bounds(config, eps, data):
    assume(any(e.call_count for e in eps))
    i = data.draw(st.integers(0, len(eps) - 1))
    up = data.draw(st.floats(0, 5000))
    higher = [*eps]
    higher[i] = eps[i].model_copy(update={"response_chars_p25": eps[i].response_chars_p25 + up})
    a, _ = T.tune(config, eps)
    b, _ = T.tune(config, higher)
    assert 100 <= a.dedup.min_body_chars <= 500 and 100 <= b.dedup.min_body_chars <= 500
    assert a.dedup.min_body_chars <= b.dedup.min_body_chars


@given(chars, chars)
def test_r5_function_is_a_clamp(x, y):
    lo, hi = sorted((x, y))
    assert 100 <= T.r5_min_body(lo) <= T.r5_min_body(hi) <= 500


@given(st.floats(0.0500001, 5), st.floats(0, 10_000), st.floats(0, 10_000), st.floats(0, 1e5))
def test_r3_lru_is_non_decreasing_in_events_per_partition_above_the_threshold(rate, x, y, avg):
    lo, hi = sorted((x, y))
    assert 10 <= T.r3_lru(rate, lo, avg) <= T.r3_lru(rate, hi, avg)


def test_r3_branches():
    assert T.r3_lru(0.06, 200.0, 5) == 40  # max(10, ceil(200 * 0.2))
    assert T.r3_lru(0.05, 200.0, 5) == 3  # not above the rate, and short sessions
    assert T.r3_lru(0.01, 5.0, 20) == 5
    prof = T.session_profile(
        T.session_stats([summary(100, 1), summary(40, 0, sample_rate_applied=0.5)])
    )
    assert prof == {
        "compaction_rate": 1 / 180,
        "avg_events_per_partition": 60.0,
        "avg_events": 90.0,
    }


@given(configs(), endpoints(), sessions())
def test_the_lru_is_the_largest_of_r3_and_r1s_suggestions(config, eps, sess):
    out, _ = T.tune(config, eps, sess)
    prof = T.session_profile(sess)
    hot = [T.r1_lru(e.repeat_burst_p90) for e in eps
           if e.call_count >= T.MIN_CALLS and e.dup_rate >= T.DUP_ON]  # fmt: skip
    if prof is None:
        assert out.dedup.lru_size == max([config.dedup.lru_size, *hot])
    else:
        r3 = T.r3_lru(prof["compaction_rate"], prof["avg_events_per_partition"],
                      prof["avg_events"])  # fmt: skip
        assert out.dedup.lru_size == max([r3, *hot])


# -- properties: idempotence, and every effective configuration is valid ----------------------


@given(configs(), endpoints(), sessions())
def test_tuning_twice_on_the_same_telemetry_changes_nothing(config, eps, sess):
    once, _ = T.tune(config, eps, sess)
    twice, changes = T.tune(once, eps, sess)
    assert changes == []
    assert twice == once
    # and through the file: what analyze writes reads back as the same config
    assert T.parse_adaptive(yaml.safe_load(yaml.safe_dump(T.dump_adaptive(once)))) == once


@given(configs(), endpoints(), sessions(), contexts)
def test_every_effective_configuration_validates(config, eps, sess, context):
    tuned, _ = T.tune(config, eps, sess)
    eff = T.resolve(tuned, context)
    assert T.EffectiveConfig.model_validate(eff.model_dump()) == eff
    knobs = {s: getattr(eff, s).model_dump() for s in ("dedup", "templates", "mckp", "telemetry")}
    T.AdaptiveConfig.model_validate({"schema_version": 2, **knobs})
    assert all(v == "default" or v == "file" or v.startswith(("profile ", "rule R"))
               for v in eff.sources.values())  # fmt: skip
    proxy, missing = T.to_proxy_config(eff, ProxyConfig())
    ProxyConfig.model_validate(proxy.model_dump())
    assert set(missing) <= set(T.NOT_IMPLEMENTED) | {
        k for k in missing if k.startswith(("hints.", "profiles."))
    }
    assert T.resolve(tuned, context) == eff  # a pure function


# -- examples: the rules on hand-made telemetry ---------------------------------------------------


def test_the_rules_on_a_hand_made_example():
    out, changes = tuned_example()
    by = {(c.rule, c.knob, c.endpoint): c for c in changes}
    assert by["R2", "templates.endpoint_overrides", "get_issues"].new == "csv_from_md"
    assert by["R2", "templates.endpoint_overrides", "get_pipeline"].new == "pipeline_deep_mckp"
    assert by["R1", "dedup.enabled_per_endpoint", "get_pipeline"].new is False
    lru = by["R1", "dedup.lru_size", "get_issues"]  # 1 + round(6.6) = 8 beats R3's 5
    assert (lru.old, lru.new, lru.value) == (5, 8, 6.6)
    r5 = by["R5", "dedup.min_body_chars", None]
    assert r5.new == T.r5_min_body(r5.value) == 500  # the pooled p25 (535) clamped
    assert not any(c.endpoint == "get_diff" for c in changes)  # 5 calls: under the guard
    assert out.tuned["dedup.lru_size"] == "R1"
    assert out.tuned["templates.endpoint_overrides.get_issues"] == "R2"


def test_the_pooled_p25_of_two_endpoints():
    a = fingerprint("a", call_count=40, response_chars_p25=800.0, response_chars_p50=2000.0,
                    response_chars_p90=9000.0)  # fmt: skip
    b = fingerprint("b", call_count=25, response_chars_p25=90.0, response_chars_p50=300.0,
                    response_chars_p90=1000.0)  # fmt: skip
    # at 300 chars: a's distribution is at 0.25 * 300 / 800, b's at 0.5; weighted 0.25
    assert T.pooled_p25(T.endpoint_stats([a, b])) == pytest.approx(300.0)
    assert T.tune(T.AdaptiveConfig(), T.endpoint_stats([a, b]))[0].dedup.min_body_chars == 300


def test_r4_lowers_the_depth_for_shallow_endpoints_only():
    shallow = T.endpoint_stats([fingerprint("a", nested_object_depth_p95=2.0)])
    out, changes = T.tune(T.AdaptiveConfig(), shallow)
    assert out.mckp.recursion_depth == 3 and "R4" in {c.rule for c in changes}
    deep = T.endpoint_stats([
        fingerprint("a", nested_object_depth_p95=2.0, call_count=90),
        fingerprint("b", nested_object_depth_p95=3.0, call_count=10),
    ])  # fmt: skip
    assert T.tune(T.AdaptiveConfig(), deep)[0].mckp.recursion_depth == 5  # p95 of calls is 3


def test_bad_fingerprints_name_the_row():
    with pytest.raises(T.TuneError, match="row 0: dup_rate"):
        T.endpoint_stats([fingerprint("a", dup_rate=1.5)])


# -- examples: schema v1 -> v2, a future version, precedence --------------------------------------


@pytest.mark.parametrize("header", ["schema_version: 1\n", ""])
def test_a_v1_file_is_migrated_in_memory_and_left_untouched(tmp_path, header):
    path = tmp_path / "v1.yaml"
    text = header + "dedup:\n  lru_size: 7\nmckp:\n  recursion_depth: 4\n"
    path.write_text(text)
    config = T.load_adaptive(path)
    assert config.schema_version == 2 and config.dedup.lru_size == 7
    assert config.profiles == T.Profiles() and config.hint_rules() == T.BUILTIN_HINTS
    assert path.read_text() == text
    saved = yaml.safe_load(T.save_adaptive(config, tmp_path / "v2.yaml").read_text())
    assert saved == {"schema_version": 2, "dedup": {"lru_size": 7}, "mckp": {"recursion_depth": 4}}


def test_v1_with_v2_sections_is_an_error(tmp_path):
    with pytest.raises(T.TuneError, match="profiles belong to schema_version 2"):
        T.parse_adaptive({"schema_version": 1, "profiles": {}})


def test_a_future_schema_version_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "next.toml"
    path.write_text("schema_version = 3\n")
    with pytest.raises(T.TuneError) as info:
        T.load_adaptive(path)
    assert str(path) in str(info.value) and "reads versions 1, 2" in str(info.value)


def test_unknown_keys_and_bad_values_name_the_setting():
    with pytest.raises(T.TuneError, match="dedup.lru_sise"):
        T.parse_adaptive({"schema_version": 2, "dedup": {"lru_sise": 3}})
    with pytest.raises(T.TuneError, match="profiles.agent"):
        T.parse_adaptive({"schema_version": 2, "profiles": {"agent": {"active": "speedy"}}})
    with pytest.raises(T.TuneError, match="tokenizer"):
        T.parse_adaptive({"schema_version": 2, "profiles": {"llm": {"variants": {
            "mine": {"tokenizer": "nope", "context_window": 10}}}}})  # fmt: skip


def test_toml_and_yaml_say_the_same(tmp_path):
    out, _ = tuned_example()
    a = T.load_adaptive(T.save_adaptive(out, tmp_path / "t.toml"))
    b = T.load_adaptive(T.save_adaptive(out, tmp_path / "t.yaml"))
    assert a == b == out


@pytest.mark.parametrize(
    ("events", "compactions", "share", "agent", "depth"),
    [
        (150, 0, 0.6, "file_search_heavy", 3),
        (200, 9, 0.5, "file_search_heavy", 3),  # both bounds inclusive
        (201, 0, 0.9, "default", 5),
        (100, 0, 0.49, "default", 5),
        (500, 3, 0.1, "marathon_refactor", 7),
        (499, 3, 0.1, "default", 5),
        (2000, 2, 0.1, "default", 5),
    ],
)
def test_the_agent_classifier_of_the_design(events, compactions, share, agent, depth):
    ctx = T.SessionContext(event_count=events, compaction_count=compactions, read_share=share)
    eff = T.resolve(T.AdaptiveConfig(), ctx)
    assert (eff.agent, eff.mckp.recursion_depth) == (agent, depth)
    assert eff.dedup.near_ref_enabled is (agent == "marathon_refactor")


@pytest.mark.parametrize(
    ("model", "llm", "tokenizer"),
    [
        ("glm-5.1", "glm-5.1", "anthropic_class"),
        ("claude-sonnet-4.6", "claude-sonnet-4.6", "anthropic_class"),
        ("claude-opus-4", "claude-sonnet-4.6", "anthropic_class"),
        ("gpt-oss:20b", "gpt-oss:20b", "ollama_bpe"),
        ("gemma4:26b", "gemma4:26b", "ollama_bpe"),
        ("mistral:instruct", "default", "openai_o200k"),
        (None, "default", "openai_o200k"),
    ],
)
def test_llm_then_tokenizer(model, llm, tokenizer):
    eff = T.resolve(T.AdaptiveConfig(), T.SessionContext(model_id=model))
    assert (eff.llm, eff.tokenizer) == (llm, tokenizer)
    assert ("inline_format_hint" in eff.hints_allowed) is (tokenizer == "ollama_bpe")
    assert "schema_explainer" not in eff.hints_allowed
    assert "0 p.p." in eff.hints["schema_explainer"].reason


def test_the_file_beats_the_profile_and_the_profile_beats_the_default():
    config = T.parse_adaptive({"schema_version": 2, "mckp": {"recursion_depth": 4},
                               "profiles": {"tokenizer": {"active": "openai_o200k"}}})  # fmt: skip
    ctx = T.SessionContext(model_id="glm-5.1", event_count=900, compaction_count=5)
    eff = T.resolve(config, ctx)
    assert eff.mckp.recursion_depth == 4 and eff.source("mckp.recursion_depth") == "file"
    assert eff.dedup.near_ref_enabled and eff.source("dedup.near_ref_enabled") == (
        "profile agent:marathon_refactor")  # fmt: skip
    assert eff.tokenizer == "openai_o200k" and eff.source("profiles.tokenizer") == "file"
    assert eff.source("dedup.hint_verbosity") == "default"
    assert eff.data_profile("gitlab_get_issues")[0] == "gitlab_issues"
    assert eff.data_profile("read_file") is None
    mine = T.parse_adaptive({"schema_version": 2, "profiles": {"data": {"variants": {
        "my_issues": {"endpoint_pattern": "gitlab_*", "preferred_format": "toon"}}}}})  # fmt: skip
    eff = T.resolve(mine)
    assert eff.data_profile("gitlab_get_issues")[0] == "my_issues"
    assert eff.source("profiles.data.my_issues") == "file"


# -- to_proxy_config and mcp-proxy --tuned -------------------------------------------------------


def test_to_proxy_config_layers_what_the_proxy_implements():
    out, _ = tuned_example()
    base = ProxyConfig(dedup={"lru_size": 20, "write_tools": ("w",)},
                       tools={"get_pipeline": ToolOverride(budget=300)})  # fmt: skip
    proxy, missing = T.to_proxy_config(T.resolve(out), base)
    assert proxy.dedup.lru_size == 8 and proxy.dedup.min_body_chars == 500  # rules R1, R5
    assert proxy.dedup.write_tools == ("w",)  # what the tuned file does not touch stays
    assert proxy.tools["get_pipeline"] == ToolOverride(budget=300, dedup=False)
    assert proxy.dedup_for("get_pipeline") is False and proxy.dedup_for("get_issues") is True
    assert "templates.endpoint_overrides" in missing
    assert "mckp.recursion_depth" in missing  # the agent profile set it; no knob for it


def test_values_left_at_their_defaults_do_not_override_the_proxy_config():
    base = ProxyConfig(dedup={"lru_size": 20, "min_body_chars": 50}, hints={"metadata": False})
    proxy, missing = T.to_proxy_config(T.resolve(T.AdaptiveConfig()), base)
    assert proxy == base
    assert missing == ("mckp.recursion_depth",)
    marathon = T.SessionContext(event_count=800, compaction_count=4)
    proxy, _ = T.to_proxy_config(T.resolve(T.AdaptiveConfig(), marathon), base)
    assert proxy.hints.near_ref is True
    off = T.parse_adaptive({"schema_version": 2, "hints": {"near_ref": {"enabled": False}}})
    proxy, _ = T.to_proxy_config(T.resolve(off, marathon), base)
    assert proxy.hints.near_ref is False  # the hint policy forbids it


def test_mcp_proxy_tuned_logs_applied_and_not_implemented(tmp_path, capsys):
    from tersetalk.mcp.cli import _layer_tuned

    out, _ = tuned_example()
    path = T.save_adaptive(out, tmp_path / "tuned.yaml")
    config = _layer_tuned(path, ProxyConfig())
    assert config.dedup.lru_size == 8 and config.tools["get_pipeline"].dedup is False
    err = capsys.readouterr().err
    assert "applied dedup.lru_size (rule R1), dedup.min_body_chars (rule R5)" in err
    assert "not implemented by the proxy, ignored: templates.endpoint_overrides" in err


def test_mcp_proxy_refuses_a_bad_tuned_file_before_starting(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 9\n")
    with pytest.raises(SystemExit) as info:
        main(["mcp-proxy", "--tuned", str(bad), "--", "no-such-server-is-started"])
    assert info.value.code == 2
    assert "schema_version 9 is not supported" in capsys.readouterr().err


# -- the commands ----------------------------------------------------------------------------------


@pytest.fixture
def telemetry(tmp_path):
    fp = tmp_path / "endpoints.parquet"
    pd.DataFrame([ISSUES, PIPELINE, RARE]).to_parquet(fp)
    sums = tmp_path / "telemetry"
    sums.mkdir()
    (sums / "summary-0a1b2c3d4e5f6a7b.json").write_text(json.dumps(summary(100, 1)))
    (sums / "summary-1a1b2c3d4e5f6a7b.json").write_text(json.dumps(summary(40, 0)))
    return fp, sums


def test_analyze_writes_a_config_and_evidence_that_yaml_and_pandas_read(tmp_path, telemetry,
                                                                      capsys):  # fmt: skip
    fp, sums = telemetry
    out, ev = tmp_path / "tuned.yaml", tmp_path / "evidence.csv"
    assert main(["formats", "tune", "analyze", "--fingerprints", str(fp), "--summaries-dir",
                 str(sums), "--out", str(out), "--evidence", str(ev)]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "3 endpoint(s) (1 under 20 calls" in printed and "2 session summaries" in printed
    assert "R1 dedup.lru_size [get_issues]: 5 -> 8" in printed
    data = yaml.safe_load(out.read_text())
    assert data["schema_version"] == 2 and data["dedup"]["lru_size"] == 8
    overrides = {"get_issues": "csv_from_md", "get_pipeline": "pipeline_deep_mckp"}
    assert data["templates"]["endpoint_overrides"] == overrides
    table = pd.read_csv(ev, keep_default_na=False)
    assert list(table.columns) == ["rule", "knob", "endpoint", "old", "new", "statistic", "value",
                                   "threshold", "tokens_saved"]  # fmt: skip
    assert (table["tokens_saved"] == "").all()  # aggregates alone: nothing replayed
    assert sorted(table["rule"]) == ["R1", "R1", "R2", "R2", "R5"]
    row = table[table["knob"] == "dedup.enabled_per_endpoint"].iloc[0]
    assert (row["endpoint"], row["old"], row["new"], row["value"]) == (
        "get_pipeline", "true", "false", 0.02)  # fmt: skip
    # a second pass from the first's output changes nothing
    again = tmp_path / "again.yaml"
    assert main(["formats", "tune", "analyze", "--fingerprints", str(fp), "--summaries-dir",
                 str(sums), "--adaptive-config", str(out), "--out", str(again)]) == 0  # fmt: skip
    assert "no change" in capsys.readouterr().out
    assert yaml.safe_load(again.read_text()) == data


def test_show_prints_each_value_and_where_it_came_from(tmp_path, capsys):
    out, _ = tuned_example()
    path = T.save_adaptive(out, tmp_path / "tuned.yaml")
    argv = ["formats", "tune", "show", "--adaptive-config", str(path), "--model-id",
            "gpt-oss:20b", "--events", "600", "--compactions", "4"]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    for expected in (
        "dedup.lru_size = 8  [rule R1]",
        "dedup.min_body_chars = 500  [rule R5]",
        "dedup.enabled_per_endpoint.get_pipeline = false  [rule R1]",
        "templates.endpoint_overrides.get_issues = csv_from_md  [rule R2]",
        "mckp.recursion_depth = 7  [profile agent:marathon_refactor]",
        "dedup.near_ref_enabled = true  [profile agent:marathon_refactor]",
        "profiles.tokenizer = ollama_bpe  [profile llm:gpt-oss:20b]",
        "tokenizer.chars_per_token = 4.0  [profile tokenizer:ollama_bpe]",
        "dedup.hint_verbosity = standard  [default]",
        "telemetry.sample_rate = 1.0  [default]",
    ):
        assert expected in lines, expected
    assert any(x.startswith("hints.schema_explainer = not allowed") for x in lines)


def test_show_with_the_old_flag_name_and_a_bad_option(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("schema_version: 2\nmckp:\n  recursion_depth: 2\n")
    assert main(["formats", "tune", "show", "--config", str(path)]) == 0
    captured = capsys.readouterr()
    assert "mckp.recursion_depth = 2  [file]" in captured.out
    assert "--config is deprecated here, use --adaptive-config" in captured.err
    with pytest.raises(SystemExit) as info:
        main(["formats", "tune", "show", "--read-share", "1.5"])
    assert info.value.code == 2 and "--read-share" in capsys.readouterr().err


def test_telemetry_dir_without_the_telemetry_module_says_to_pass_fingerprints(
    tmp_path, telemetry, monkeypatch, capsys
):
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name, *args):
        return None if name == "tersetalk.mcp.telemetry" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(SystemExit) as info:
        main(["formats", "tune", "analyze", "--telemetry-dir", str(telemetry[1]), "--out",
              str(tmp_path / "x.yaml")])  # fmt: skip
    assert info.value.code == 2
    assert "pass --fingerprints" in capsys.readouterr().err


# -- the measured rules: hand-made telemetry events replayed -------------------------------------

from tersetalk.mcp import tune_replay as TR  # noqa: E402


def event(session: str, seq: int, endpoint: str, body: int, *, chars: int = 500,
          kind: str = "passthrough", tokens: tuple[int, int] = (100, 100),
          fallback: str | None = None) -> dict:  # fmt: skip
    return {"session_hash": session, "seq": seq, "endpoint_class": endpoint,
            "content_sha_prefix": f"{body:032x}", "response_chars": chars, "kind": kind,
            "tokens": {"o200k_base": list(tokens)}, "fallback": fallback,
            "context_partition": 0, "sample_rate": 1.0, "shape": "nested_object",
            "ts_ms": 1}  # fmt: skip


def session(name: str, bodies: list[int], refs: frozenset[int] = frozenset(), **kw) -> list[dict]:
    """Events of one session: ``bodies`` in order; the positions in ``refs`` were sent as
    references (20 tokens)."""
    return [event(name, i, "read", b, kind="ref" if i in refs else "passthrough",
                  tokens=(100, 20) if i in refs else (100, 100), **kw)
            for i, b in enumerate(bodies)]  # fmt: skip


def test_covering_size_catches_95_percent_of_the_repeats_and_is_bounded():
    assert TR.covering_size([]) is None
    assert TR.covering_size([0] * 19 + [9]) == 1  # 19 of 20 need one entry
    assert TR.covering_size([0] * 18 + [9, 9]) == 10
    assert TR.covering_size([100] * 20) == TR.LRU_MAX == 32


def test_the_lru_is_sized_from_repeat_distances_and_only_where_the_replay_saves():
    # eight bodies, then the same eight again: each repeat 7 distinct bodies after its
    # copy, all missed by an LRU of 5; a body repeated at once was a reference (20 tokens)
    evs = session("a", [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9], frozenset({17}))
    out, changes = T.tune(T.AdaptiveConfig(), [], [], evs)
    assert [(c.rule, c.knob, c.old, c.new) for c in changes] == [("R3", "dedup.lru_size", 5, 8)]
    assert changes[0].tokens_saved == 8 * (100 - 20)
    assert out.dedup.lru_size == 8 and out.tuned == {"dedup.lru_size": "R3"}
    assert T.tune(out, [], [], evs) == (out, [])  # idempotent
    # repeats all within the default cache: nothing to gain, nothing changed (the old
    # rules sized the LRU from the sessions' length or a burst statistic regardless)
    near = session("b", [1, 2, 1, 2, 3, 3], frozenset({2, 3, 5}))
    assert T.tune(T.AdaptiveConfig(), [], [], near) == (T.AdaptiveConfig(), [])


def test_a_repeat_a_write_made_the_proxy_forget_stays_a_miss():
    # a hit at distance 3 proves a cache of 4 or more: the miss at distance 1 was forgotten
    evs = session("a", [1, 2, 3, 4, 1, 5, 4], frozenset({4}))
    tr = TR.trace(evs)
    elig = TR.eligibility(200, {})
    assert TR.blocked(tr, elig) == {(0, 6)}
    assert TR.replay(tr, 5, elig, TR.blocked(tr, elig)).hits == 1


def test_min_body_chars_changes_only_when_the_replay_saves():
    small = T.endpoint_stats([fingerprint("read", response_chars_p25=150.0)])
    # bodies of 150 characters repeated: under 200 today; a reference (20 tokens) saves
    # on a body of 100 tokens but costs on one of 10
    for body_tokens, changed in ((100, True), (10, False)):
        evs = [event("a", i, "read", b, chars=150, tokens=(body_tokens, body_tokens))
               for i, b in enumerate([1, 2, 1, 2])]  # fmt: skip
        evs.append(event("a", 9, "read", 7, kind="ref", tokens=(100, 20)))
        out, changes = T.tune(T.AdaptiveConfig(), small, [], evs)
        assert (out.dedup.min_body_chars == 150) is changed
        assert [c.rule for c in changes] == (["R5"] if changed else [])
    # the aggregates alone lower it whatever it saves (what a replay prevents)
    assert T.tune(T.AdaptiveConfig(), small)[0].dedup.min_body_chars == 150


def test_dedup_is_never_turned_off_and_templates_and_depth_are_left_when_measured():
    eps = T.endpoint_stats([ISSUES, PIPELINE])
    evs = session("a", [1, 2, 3])
    assert T.tune(T.AdaptiveConfig(), eps, [], evs) == (T.AdaptiveConfig(), [])
    assert {c.rule for c in T.tune(T.AdaptiveConfig(), eps)[1]} >= {"R1", "R2"}


def test_decode_failures_and_edits_turn_a_tools_re_encoding_off():
    evs = [
        event("a", 0, "query", 1, kind="encoded", tokens=(100, 60)),
        *(event("a", i, "query", 1 + i, fallback="readback") for i in (1, 2, 3)),
        event("a", 4, "get_config", 10, kind="encoded", tokens=(80, 50)),
        event("a", 5, "edit_file", 11, chars=20),
        event("a", 6, "get_config", 12, kind="encoded", tokens=(80, 50)),
        event("a", 7, "list_tables", 13),
        event("a", 8, "str_replace", 14, chars=20),
        event("a", 9, "list_tables", 15, kind="encoded", tokens=(90, 40)),
    ]
    out, changes = T.tune(T.AdaptiveConfig(), [], [], evs)
    by = {c.endpoint: c for c in changes}
    assert set(by) == {"query", "get_config"}
    assert (by["query"].rule, by["query"].value, by["query"].tokens_saved) == ("R6", 0.75, -40)
    assert (by["get_config"].rule, by["get_config"].value) == ("R7", 2.0)
    assert out.encoding.per_endpoint == {"query": False, "get_config": False}
    eff = T.resolve(out)
    proxy, missing = T.to_proxy_config(eff, ProxyConfig())
    assert proxy.tools["query"].encode is False and proxy.tools["get_config"].encode is False
    assert "encoding.per_endpoint.query" in T.applied_knobs(eff)
    assert not any(k.startswith("encoding") for k in missing)
    assert eff.source("encoding.per_endpoint.query") == "rule R6"
    assert T.tune(out, [], [], evs) == (out, [])


def test_sessions_sampled_below_one_are_not_replayed():
    evs = [{**e, "sample_rate": 0.5} for e in session("a", [1, 2, 3, 4, 5, 6, 1])]
    tr = TR.trace(evs)
    assert tr.sessions == () and tr.skipped_sessions == 1


def test_the_lru_is_sized_by_the_tokens_its_repeats_save_not_by_their_count():
    # a large result (2,000 tokens) comes back once, 19 distinct small results later;
    # the 19 small ones each come back at once (references already). By count, one entry
    # catches 19 of the 20 repeats: no change. By tokens, the far repeat is nearly all a
    # cache can save, and 20 entries catch it
    evs = [event("a", 0, "read", 1, tokens=(2000, 2000))]
    for body in range(2, 21):
        evs.append(event("a", len(evs), "read", body))
        evs.append(event("a", len(evs), "read", body, kind="ref", tokens=(100, 20)))
    evs.append(event("a", len(evs), "read", 1, tokens=(2000, 2000)))
    distances = TR.replay(TR.trace(evs), 5, TR.eligibility(200, {})).distances
    assert TR.covering_size(distances) == 1
    out, changes = T.tune(T.AdaptiveConfig(), [], [], evs)
    assert [(c.rule, c.new) for c in changes] == [("R3", 20)]
    assert changes[0].tokens_saved == 2000 - 20
    assert TR.saving_size(100, {6: 100, 7: 100}) == (None, 0)  # nothing saved, no size


def test_writes_are_inferred_and_repeats_across_them_do_not_size_the_lru():
    # A is a hit after B (the cache held 2 bodies), then missed right after a call of
    # `save`: `save` forgot it (a write). Later C comes back 6 distinct reads on, but
    # across another `save`: no cache size catches it, so the LRU is left as it is
    reads = [1, 2, 1, None, 1, 3, 4, 5, 6, 7, 8, 9, None, 3]
    evs = [event("a", i, "save", 100 + i, chars=20, tokens=(5, 5)) if b is None
           else event("a", i, "read", b, kind="ref" if i == 2 else "passthrough",
                      tokens=(100, 20) if i == 2 else (100, 100))
           for i, b in enumerate(reads)]  # fmt: skip
    tr = TR.trace(evs)
    elig = TR.eligibility(200, {})
    assert TR.writes(tr, elig) == {"save"}
    assert TR.covering_size(TR.replay(tr, 5, elig).distances) == 7  # without the writes
    assert TR.replay(tr, 5, elig, forget=frozenset({"save"})).distances == (1,)
    assert T.tune(T.AdaptiveConfig(), [], [], evs) == (T.AdaptiveConfig(), [])
    # the same sessions without the second write: the far repeat is caught by 7 entries
    kept = [e for e in evs if e["seq"] != 12]
    out, changes = T.tune(T.AdaptiveConfig(), [], [], kept)
    assert out.dedup.lru_size == 7 and "writes inferred: save" in changes[0].threshold
