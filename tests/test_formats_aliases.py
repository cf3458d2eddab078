"""String-prefix aliases, the dictionary layer of ``mckp`` (tersetalk.formats.aliases).

Properties run at least 200 examples each (the ``ci`` Hypothesis profile keeps that).
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tersetalk.core.tokens import count_tokens
from tersetalk.formats import aliases as A
from tersetalk.formats.solver import BudgetError, decode, encode, solve
from tersetalk.formats.tree import from_python, same_value

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_HOSTS = ["https://api.github.com/repos/octocat/Hello-World", "https://api.github.com/users/a",
          "/srv/data/projects/tersetalk"]  # fmt: skip
_TAILS = ["", "/issues", "/pulls{/number}", "/events", "/a/b/c", "/12", "/$1", "/]"]
# strings that start with a marker or look like an alias must come back unchanged
_TRAPS = ["$1/issues", "$", "~2", "^9x", "$10", "price: $3", "https://x", "a]b/c/d/e/f/g"]
_url = st.builds(lambda h, t: h + t, st.sampled_from(_HOSTS), st.sampled_from(_TAILS))
_string = st.one_of(_url, st.sampled_from(_TRAPS), st.text(max_size=10))
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-99, 99), _string)
values = st.recursive(
    _scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.dictionaries(
            st.sampled_from(["url", "html_url", "$1", "name", "id"]), inner, max_size=5
        ),  # fmt: skip
    ),
    max_leaves=30,
)


@PROPS
@given(values)
@example({"a": "$1/x", "b": [_HOSTS[0] + "/issues"] * 3, "c": "~1", "d": "^1"})
def test_round_trip_and_never_dearer_than_without_aliases(value):
    node = from_python(value)
    enc, plain = encode(node), encode(node, "mckp_plain")
    assert enc.lossless and same_value(decode(enc.text), value), enc.text
    assert json.dumps(decode(enc.text)) == json.dumps(value)
    assert enc.tokens <= plain.tokens
    assert plain.aliases == 0 and "> [alias:" not in plain.text


@PROPS
@given(values, st.integers(1, 300), st.sampled_from(["exact", "greedy"]))
def test_budget_counts_the_alias_hints(value, budget, method):
    try:
        enc = solve(from_python(value), budget=budget, method=method)
    except BudgetError:
        return
    assert enc.tokens <= budget == enc.budget
    assert enc.tokens == count_tokens(enc.text, "o200k_base")
    if enc.lossless:
        assert same_value(decode(enc.text), value)


def test_repeated_urls_are_named_once_and_read_back():
    base = _HOSTS[0]
    value = {f"{k}_url": f"{base}/{k}" for k in ("issues", "pulls", "events", "forks", "tags")}
    value["html_url"] = "https://github.com/octocat/Hello-World"
    enc = encode(from_python(value))
    assert enc.aliases == 1 and f"> [alias: $1={base}]" in enc.text
    assert "$1/issues" in enc.text and base + "/issues" not in enc.text
    assert decode(enc.text) == value
    assert enc.tokens < encode(from_python(value), "mckp_plain").tokens


def test_marker_is_a_character_no_value_starts_with():
    base = _HOSTS[0]
    value = [f"{base}/{i}" for i in range(6)] + ["$5 off", "~tilde"]
    table = A.choose(from_python(value), lambda s: count_tokens(s, "o200k_base"))
    assert table and all(alias.startswith("^") for alias in table)
    enc = encode(from_python(value))
    assert decode(enc.text) == value and "$5 off" in enc.text
    # every marker taken: no aliases at all
    value += ["^caret"]
    assert A.choose(from_python(value), lambda s: count_tokens(s, "o200k_base")) == {}
    assert decode(encode(from_python(value)).text) == value


def test_keys_are_never_rewritten():
    base = _HOSTS[0]
    value = {base + "/k": base + "/v", "x": [base + "/a", base + "/b", base + "/c"]}
    enc = encode(from_python(value))
    assert enc.aliases and base + "/k" in enc.text
    assert decode(enc.text) == value


def test_alias_hint_parses_and_expands_only_named_aliases():
    assert A.parse("alias: $1=https://a/b") == ("$1", "https://a/b")
    assert A.parse("alias: $0=x") is None and A.parse("encoded: mckp") is None
    table = {"$1": "https://a/b"}
    assert A.expand({"k": ["$1/c", "$2/c", "$1"], "$1": 3}, table) == {
        "k": ["https://a/b/c", "$2/c", "https://a/b"], "$1": 3}  # fmt: skip
