"""The typed tree and the lossless encoders of the format-adaptive encoding.

The contract the solver will rely on: an encoder is eligible only where it loses
nothing, so for every eligible node ``decode(encode(node))`` is exactly the JSON
value (types, key order, float sign). The strategies aim at the cases where a
careless encoder loses data: numeric strings, "null"/"true"/"" strings, nested
values in table cells, keys with commas, quotes, pipes, colons and newlines.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import toon
from hypothesis import given, settings
from hypothesis import strategies as st

from tersetalk.formats.encoders import (
    ENCODERS,
    FormatDecodeError,
    eligible_encoders,
    get_encoder,
)
from tersetalk.formats.tree import (
    Blockquote,
    CodeFence,
    Document,
    ListBlock,
    Object,
    Paragraph,
    Section,
    Table,
    TreeError,
    from_python,
    parse_json,
    parse_markdown,
    same_value,
    table_to_json,
    to_python,
)

TOON_FIXTURES = Path(__file__).parent / "data" / "toon-spec" / "fixtures"

# --- strategies ---------------------------------------------------------------------

TRICKY = [
    "",
    " ",
    "null",
    "true",
    "false",
    "0",
    "12",
    "-1",
    "1.5",
    "1e5",
    "1E5",
    "007",
    "a,b",
    'say "hi"',
    "line\nbreak",
    "cr\rlf",
    "a|b",
    "a\\|b",
    "k: v",
    ": ",
    "#",
    "- item",
    "[1]",
    "{x}",
    " padded ",
    "tab\there",
    "ünïcode",
    "[]",
    "{}",
]
tricky_text = st.sampled_from(TRICKY) | st.text(max_size=8)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | tricky_text
)
keys = st.sampled_from(["id", "name", "a,b", 'q"k', "new\nline", "p|ipe", "c: d", "", "x"]) | (
    st.text(max_size=6)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def records(draw, cell=scalars | json_values):
    """Arrays of objects sharing one key list: the shape tables and CSV claim."""
    ks = draw(st.lists(keys, min_size=1, max_size=4, unique=True))
    n = draw(st.integers(min_value=1, max_value=4))
    return [{k: draw(cell) for k in ks} for _ in range(n)]


safe_text = st.text(
    alphabet=st.characters(categories=["L", "N"], max_codepoint=0x2FF), min_size=1, max_size=8
).filter(lambda s: s not in ("true", "false") and not s[0].isdigit() and s[0] != "-")
safe_cells = st.none() | st.booleans() | st.integers(-1000, 1000) | safe_text


@st.composite
def safe_records(draw):
    """Records every cell format must accept (plain keys, cells that read back)."""
    ks = draw(st.lists(safe_text, min_size=1, max_size=4, unique=True))
    n = draw(st.integers(min_value=1, max_value=4))
    return [{k: draw(safe_cells) for k in ks} for _ in range(n)]


payloads = json_values | records() | st.dictionaries(keys, scalars, max_size=5)


def _roundtrip(name: str, value) -> bool:
    """Check the contract for one encoder on one value; True if it was eligible."""
    enc = get_encoder(name)
    node = from_python(value)
    if not enc.eligible(node):
        with pytest.raises(ValueError):
            enc.encode(node)
        return False
    text = enc.encode(node)
    assert isinstance(text, str)
    back = enc.decode(text)
    assert same_value(back, to_python(node)), (name, value, text, back)
    assert same_value(back, value)
    return True


# --- the tree -----------------------------------------------------------------------


@settings(max_examples=200)
@given(json_values)
def test_json_tree_roundtrip_keeps_types(value):
    node = from_python(value)
    assert same_value(to_python(node), value)
    assert same_value(to_python(parse_json(json.dumps(value))), value)


def test_scalars_keep_their_json_type():
    node = parse_json('{"s": "12", "i": 12, "f": 12.0, "b": true, "n": null, "e": ""}')
    assert isinstance(node, Object)
    types = {k: type(v.value) for k, v in node.items}
    assert types == {"s": str, "i": int, "f": float, "b": bool, "n": type(None), "e": str}


def test_same_value_is_strict():
    assert not same_value(1, True)
    assert not same_value(1, 1.0)
    assert not same_value(0.0, -0.0)
    assert not same_value(None, "")
    assert not same_value({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert same_value({"a": [1, 2.5, None]}, {"a": [1, 2.5, None]})


@pytest.mark.parametrize(
    "a, b",
    [
        ([1, {"x": True}], [1, {"x": 1}]),  # == holds inside containers, the text differs
        ([{"x": 1.0}], [{"x": 1}]),
        ({"x": [0.0]}, {"x": [-0.0]}),
        ([{"a": 1, "b": 2}], [{"b": 2, "a": 1}]),
        ({"1": 0}, {1: 0}),  # the same JSON text, not equal
        ([{1: 0}], [{1.0: 0}]),  # equal, another text: node by node (keys compare by ==)
    ],
)
def test_same_value_compares_containers_whole_as_it_does_node_by_node(a, b):
    from tersetalk.formats.tree import _same, exact_text

    assert same_value(a, b) == _same(a, b)
    assert same_value(a, b, exact_text(b)) == _same(a, b)  # b's text written beforehand


@given(json_values, json_values)
def test_same_value_whole_agrees_with_node_by_node(a, b):
    from tersetalk.formats.tree import _same, exact_text

    assert same_value(a, b) == _same(a, b)
    assert same_value(a, json.loads(json.dumps(a)))
    assert same_value(a, b, exact_text(b)) == _same(a, b)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1: "x"}, (1, 2), {1, 2}])
def test_non_json_values_are_refused(bad):
    with pytest.raises(TreeError):
        from_python(bad)


def test_nan_literal_is_refused():
    with pytest.raises(TreeError):
        parse_json('{"x": NaN}')


MARKDOWN = """\
Intro paragraph.

# Repos

> [query: repos | total=3 | returned=2]

| name | stars | note |
| --- | ---: | --- |
| tersetalk | 12 | a\\|b |
| toon | 7 | |

## Steps

- clone
- run
  1. snakemake
  2. report

```bash
snakemake --cores all
```

# Next

Done.
"""


def test_markdown_parses_into_sections_tables_lists():
    doc = parse_markdown(MARKDOWN)
    assert isinstance(doc, Document)
    intro, repos, nxt = doc.children
    assert intro == Paragraph("Intro paragraph.")
    assert isinstance(repos, Section) and (repos.level, repos.heading) == (1, "Repos")
    quote, table, steps = repos.children
    assert quote == Blockquote((Paragraph("[query: repos | total=3 | returned=2]"),))
    assert table == Table(
        ("name", "stars", "note"), (("tersetalk", "12", "a|b"), ("toon", "7", ""))
    )
    assert isinstance(steps, Section) and (steps.level, steps.heading) == (2, "Steps")
    lst, fence = steps.children
    assert isinstance(lst, ListBlock) and not lst.ordered
    assert lst.items[0] == (Paragraph("clone"),)
    run, sub = lst.items[1]
    assert run == Paragraph("run")
    assert sub == ListBlock(True, ((Paragraph("snakemake"),), (Paragraph("report"),)))
    assert fence == CodeFence("bash", "snakemake --cores all\n")
    assert nxt == Section(1, "Next", (Paragraph("Done."),))
    assert to_python(table) == [
        {"name": "tersetalk", "stars": "12", "note": "a|b"},
        {"name": "toon", "stars": "7", "note": ""},
    ]


def test_table_with_repeated_header_has_no_json_value():
    with pytest.raises(TreeError):
        table_to_json(Table(("a", "a"), (("1", "2"),)))


def test_markdown_nodes_other_than_tables_have_no_json_value():
    with pytest.raises(TreeError):
        to_python(Paragraph("x"))


# --- encoders: round trip wherever eligible ------------------------------------------


@pytest.mark.parametrize("name", sorted(ENCODERS))
@settings(max_examples=200)
@given(value=payloads)
def test_roundtrip_wherever_eligible(name, value):
    _roundtrip(name, value)


@pytest.mark.parametrize("name", ["csv", "markdown_table"])
@settings(max_examples=200)
@given(value=records())
def test_table_formats_roundtrip_or_refuse_records(name, value):
    eligible = _roundtrip(name, value)
    cells = [v for row in value for v in row.values()]
    if any(isinstance(v, list | dict) for v in cells):
        assert not eligible, "a nested value in a cell must never be flattened or dropped"
    if any(isinstance(v, str) and v in ("", "12", "true", "1e5", "-1") for v in cells):
        assert not eligible, "a string that reads back as null, a number or a bool is loss"


@pytest.mark.parametrize("name", ["csv", "markdown_table", "toon", "json_compact"])
@settings(max_examples=200)
@given(value=safe_records())
def test_table_formats_are_eligible_on_plain_records(name, value):
    assert _roundtrip(name, value)


@settings(max_examples=200)
@given(value=st.dictionaries(safe_text, safe_cells, min_size=1, max_size=5))
def test_kv_is_eligible_on_plain_flat_objects(value):
    assert _roundtrip("kv", value)


@settings(max_examples=200)
@given(value=json_values)
def test_json_and_text_are_eligible_wherever_they_claim(value):
    node = from_python(value)
    assert get_encoder("json_pretty").eligible(node)
    assert get_encoder("json_compact").eligible(node)
    assert get_encoder("text").eligible(node) == isinstance(value, str)


@pytest.mark.parametrize(
    ("value", "refused"),
    [
        ([{"id": 1, "v": "12"}], {"csv", "markdown_table"}),  # numeric string -> number
        ([{"id": 1, "v": ""}], {"csv", "markdown_table"}),  # "" would read back as null
        ([{"id": 1, "v": "true"}], {"csv", "markdown_table"}),
        ([{"id": 1, "v": {"x": 1}}], {"csv", "markdown_table"}),  # nested cell
        ([{"id": 1, "v": [1, 2]}], {"csv", "markdown_table"}),
        ([{"id": 1}, {"id": 2, "extra": 3}], {"csv", "markdown_table"}),  # dropped key
        ([{"a": 1, "b": 2}, {"b": 2, "a": 1}], {"csv", "markdown_table"}),  # key order
        ([], {"csv", "markdown_table", "kv"}),
        ([{"id": 1, "v": " x "}], {"markdown_table"}),  # GFM trims cells
        ([{"id": 1, "v": "two\nlines"}], {"markdown_table"}),
        ({"a": "x", "b": ""}, {"kv"}),
        ({"a: b": 1}, {"kv"}),
        ({"a": "two\nlines"}, {"kv"}),
        ({"a": {"nested": 1}}, {"kv"}),
        ({"f": 1e16}, {"toon"}),  # TOON writes 1e16 without exponent: an int comes back
        ({"f": -0.0}, {"toon"}),
        ("text", {"csv", "markdown_table", "kv"}),
        (12, {"text", "csv", "markdown_table", "kv"}),
    ],
)
def test_encoders_fail_closed_on_lossy_shapes(value, refused):
    eligible = set(eligible_encoders(from_python(value)))
    assert not (eligible & refused), eligible & refused
    for name in eligible:
        _roundtrip(name, value)


def test_csv_quotes_as_rfc4180():
    value = [{"k,1": 'a "q"', "k2": "x\ny"}, {"k,1": "plain", "k2": None}]
    text = get_encoder("csv").encode(from_python(value))
    assert text == '"k,1",k2\n"a ""q""","x\ny"\nplain,\n'


def test_markdown_table_escapes_pipes():
    value = [{"a|b": "x|y", "n": 3}]
    text = get_encoder("markdown_table").encode(from_python(value))
    assert text == "| a\\|b | n |\n|---|---|\n| x\\|y | 3 |\n"


def test_decoders_reject_garbage():
    with pytest.raises(FormatDecodeError):
        get_encoder("json_compact").decode("{")
    with pytest.raises(FormatDecodeError):
        get_encoder("markdown_table").decode("no table here")
    with pytest.raises(FormatDecodeError):
        get_encoder("kv").decode("no separator")
    with pytest.raises(FormatDecodeError):
        get_encoder("csv").decode("a,b\n1\n")
    with pytest.raises(KeyError, match="known"):
        get_encoder("yaml")


def test_every_encoder_is_eligible_somewhere():
    samples = [[{"id": 1, "name": "x"}], {"id": 1, "name": "x"}, "prose"]
    seen = {n for s in samples for n in eligible_encoders(from_python(s))}
    assert seen == set(ENCODERS)


# --- TOON conformance (spec v4.0 fixtures) -------------------------------------------


def _fixture_cases(kind: str):
    for path in sorted((TOON_FIXTURES / kind).glob("*.json")):
        for case in json.loads(path.read_text(encoding="utf-8"))["tests"]:
            yield path.name, case


def _skip_reason(case) -> str | None:
    if case.get("options"):
        return "sets options"
    if case.get("shouldError"):
        return "expects an error"
    return None


@pytest.mark.parametrize(
    ("kind", "expected_pass"), [("encode", 148), ("decode", 233)], ids=["encode", "decode"]
)
def test_toon_conformance_fixtures(kind, expected_pass, capsys):
    """python-toon reproduces every v4.0 case that sets no options and expects no error."""
    passed, total, skipped, failures = Counter(), Counter(), Counter(), []
    for fname, case in _fixture_cases(kind):
        reason = _skip_reason(case)
        if reason:
            skipped[reason] += 1
            continue
        total[fname] += 1
        try:
            if kind == "encode":
                ok = toon.encode(case["input"]) == case["expected"]
            else:
                ok = same_value(toon.decode(case["input"]), case["expected"])
        except Exception as exc:  # a crash is a failed case, reported by name
            ok, case = False, {**case, "error": repr(exc)}
        if ok:
            passed[fname] += 1
        else:
            failures.append((fname, case["name"], case.get("error")))
    with capsys.disabled():
        print(f"\nTOON v4.0 {kind} fixtures (passed/total, no options, no error expected):")
        for fname in sorted(total):
            print(f"  {fname}: {passed[fname]}/{total[fname]}")
        print(f"  skipped: {dict(skipped)}")
    assert not failures, failures
    assert sum(passed.values()) == expected_pass
