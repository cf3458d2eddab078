"""Path tables for nested records: exact inverses, eligible only
where they round-trip, the knapsack never dearer than compact JSON, and the saving
target on the shared corpus's nested payloads and on the held-out set (data/mastodon).
"""

from __future__ import annotations

import graphlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tersetalk.formats import pathtable as PT
from tersetalk.formats.container import (
    PATH_TABLES,
    block_ok,
    parse_block,
    render_block,
)
from tersetalk.formats.corpus import SHA256, CorpusError, load_corpus
from tersetalk.formats.encoders import FormatDecodeError
from tersetalk.formats.nested import CORPORA, NESTED_SHAPES, shape_of, summary
from tersetalk.formats.solver import decode, encode
from tersetalk.formats.tree import from_python, same_value

ROOT = Path(__file__).resolve().parents[1]
TARGET_PCT = 20.0  # the target: mckp at least 20% below compact JSON

# --- strategies ------------------------------------------------------------------------

#: keys that stress the column names: separators, escapes, quotes, empty, numbers
TRICKY_KEYS = ["a.b", "a\\b", "x=y", "", "a,b", '"q', "[x", "{y", " sp", "-", "1", "é", "a\\.b"]
KEYS = st.one_of(st.sampled_from(["id", "user", "login", "tags", "name", *TRICKY_KEYS]), st.text())
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "null", "1", ",", '"', "[", "{}", "a,b", '<p class="x">a, b</p>', " x"]),
    st.text(max_size=12),
)


def _values(depth: int):
    if depth == 0:
        return SCALARS
    inner = _values(depth - 1)
    return st.one_of(
        SCALARS,
        st.lists(inner, max_size=3),
        st.dictionaries(KEYS, inner, max_size=4),
    )


@st.composite
def templates(draw, depth: int = 2):
    """A record schema: ordered keys, each a scalar slot or a nested schema."""
    keys = draw(st.lists(KEYS, min_size=1, max_size=5, unique=True))
    out = {}
    for k in keys:
        out[k] = draw(templates(depth - 1)) if depth and draw(st.booleans()) else None
    return out


@st.composite
def record_from(draw, template: dict):
    """A record of ``template``: any key may be absent, any slot any value (a nested
    slot an object of its schema, or sometimes null / {} / a scalar)."""
    out = {}
    for k, sub in template.items():
        if draw(st.integers(0, 3)) == 0:
            continue  # optional key: absent in this row
        if sub is None or draw(st.integers(0, 4)) == 0:
            # no object with keys here: two of them could disagree on key order
            out[k] = draw(st.one_of(SCALARS, st.lists(_values(1), max_size=2), st.just({})))
        else:
            out[k] = draw(record_from(sub))
    return out


@st.composite
def nested_records(draw):
    """An array of records of one schema (nested objects, optional keys): the rows
    agree on a key order, so a path table must carry them."""
    template = draw(templates())
    return draw(st.lists(record_from(template), min_size=1, max_size=6))


any_records = st.lists(st.dictionaries(KEYS, _values(2), max_size=4), min_size=1, max_size=5)

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- properties ------------------------------------------------------------------------


def _has_a_key(rows) -> bool:
    return any(rows)


@FAST
@given(nested_records())
def test_a_path_table_carries_records_that_agree_on_key_order(rows):
    """Eligible where it should be (a row with no key at all has no line in csv_paths),
    and then exact: types, absent vs null vs "" vs {}, every key order."""
    node = from_python(rows)
    for fmt in PATH_TABLES:
        text = None
        try:
            text = render_block(node, fmt)
        except ValueError:
            pass
        if text is None:
            # refused only for what the grammar cannot hold: no column, an empty row line,
            # or a Markdown cell that is not one trimmed line
            assert not _has_a_key(rows) or {} in rows or fmt == "markdown_paths"
            continue
        assert same_value(parse_block(text, fmt), rows), text
    if _has_a_key(rows) and {} not in rows:
        assert block_ok(node, "csv_paths")


@FAST
@given(any_records)
def test_a_path_table_is_exact_or_not_eligible(rows):
    """Rows that disagree on key order, repeat nothing, hold anything: fail closed."""
    node = from_python(rows)
    for fmt in PATH_TABLES:
        if block_ok(node, fmt):
            assert same_value(parse_block(render_block(node, fmt), fmt), rows)


@SLOW
@given(st.one_of(nested_records(), st.fixed_dictionaries({"items": nested_records()})))
def test_the_knapsack_round_trips_and_is_never_dearer_than_compact_json(value):
    node = from_python(value)
    enc = encode(node, "mckp")
    assert enc.fallback is None or "does not read back" in enc.fallback
    assert same_value(decode(enc.text), value)
    assert enc.tokens <= encode(node, "json_compact").tokens


@FAST
@given(st.lists(st.text(), min_size=1, max_size=4))
def test_column_names_are_an_exact_inverse(path):
    assert PT.parse_path(PT.path_text(tuple(path))) == tuple(path)


# --- escaping and the grammar, by example ------------------------------------------------


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (("user", "login"), "user.login"),
        (("user.login",), "user\\.login"),
        (("a\\b",), "a\\\\b"),
        (("x=y",), "x\\=y"),
        (("",), ""),
        (("a", ""), "a."),
        (("", "x"), ".x"),
        (("a\\.b", "c"), "a\\\\\\.b.c"),
    ],
)
def test_path_escaping(path, text):
    assert PT.path_text(path) == text
    assert PT.parse_path(text) == path


@pytest.mark.parametrize("bad", ["a\\", "a\\x", "\\,"])
def test_a_bad_escape_is_refused(bad):
    with pytest.raises(PT.PathTableError):
        PT.parse_path(bad)


def test_absent_null_empty_string_and_empty_object_are_four_cells():
    rows = [
        {"id": 1, "user": {"login": "a", "id": 7}, "note": ""},
        {"id": 2, "user": None, "note": None},
        {"id": 3, "user": {}},
        {"id": 4, "user": {"login": "b,c", "bio": "<p>hi</p>", "id": 9}, "note": "x"},
    ]
    text = render_block(from_python(rows), "csv_paths")
    assert text.split("\n") == [
        "id,user,user.login,user.bio,user.id,note",
        '1,,a,,7,""',
        "2,null,,,,null",
        "3,{},,,,",
        '4,,"b,c",<p>hi</p>,9,x',
    ]
    assert same_value(parse_block(text, "csv_paths"), rows)  # every row's key order too


def test_a_column_equal_in_every_row_is_written_once():
    rows = [{"id": i, "app": {"name": "Mastodon.py, tests"}, "x": None} for i in range(3)]
    text = render_block(from_python(rows), "csv_paths")
    assert text.split("\n") == ['id,app.name="Mastodon.py, tests",x=null', "0", "1", "2"]
    assert same_value(parse_block(text, "csv_paths"), rows)
    same = [{"a": 1}, {"a": 1}]  # every column equal: the rows keep their cells
    assert render_block(from_python(same), "csv_paths") == "a\n1\n1"


def test_column_names_with_separators_quotes_and_equals_read_back():
    rows = [
        {"a,b": 1, '"q': {"x=y": 2, "": 3}, "": "e", "k.v": [1, {"a": "b"}]},
        {"a,b": 2, '"q': {"x=y": None, "": 4}, "": "f", "k.v": []},
    ]
    node = from_python(rows)
    for fmt in PATH_TABLES:
        assert block_ok(node, fmt), fmt
        assert same_value(parse_block(render_block(node, fmt), fmt), rows)


def _one_order_keeps(objects: list[dict]) -> bool:
    """Whether one key order keeps every object's, and so on inside each key's objects
    (every pair of keys an object puts in order is an edge; a cycle: no such order)."""
    graph: dict = {}
    inside: dict = {}
    for obj in objects:
        keys = list(obj)
        for i, k in enumerate(keys):
            graph.setdefault(k, set()).update(keys[:i])
            if isinstance(obj[k], dict) and obj[k]:
                inside.setdefault(k, []).append(obj[k])
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError:
        return False
    return all(_one_order_keeps(objs) for objs in inside.values())


def _rows_of(keys: str, inner):
    """Rows over a few shared keys in any order: they often disagree on it."""
    row = st.lists(st.sampled_from(list(keys)), unique=True, max_size=len(keys)).flatmap(
        lambda ks: st.tuples(*(inner for _ in ks)).map(lambda vs: dict(zip(ks, vs, strict=True)))
    )
    return st.lists(row, min_size=1, max_size=5)


shuffled_records = _rows_of("abcd", st.one_of(st.integers(0, 3), _rows_of("xyz", st.none()).map(
    lambda rows: rows[0])))  # fmt: skip


@FAST
@given(st.one_of(shuffled_records, any_records))
def test_a_path_table_is_declined_exactly_where_no_column_order_keeps_the_rows(rows):
    """Declined at once (no rendering, count or round trip) where no key order keeps
    every row's, and only there (or where no row has a key); decided here by a
    topological sort over every pair of keys, not the table's own merge."""
    declined = PT.flatten(from_python(rows)) is None
    assert declined == (not _has_a_key(rows) or not _one_order_keeps(rows))


def test_rows_that_disagree_on_key_order_are_not_eligible():
    node = from_python([{"a": 1, "b": 2}, {"b": 3, "a": 4}])
    assert not any(block_ok(node, fmt) for fmt in PATH_TABLES)
    for fmt in PATH_TABLES:  # declined before anything is written
        with pytest.raises(ValueError, match="agree on one order"):
            render_block(node, fmt)
    # three rows, each pair of them in order, no order for all three; and one level down
    for rows in ([{"a": 1, "b": 2}, {"b": 1, "c": 2}, {"c": 1, "a": 2}],
                 [{"u": {"a": 1, "b": 2}}, {"u": {"b": 3, "a": 4}}]):  # fmt: skip
        assert PT.flatten(from_python(rows)) is None
    assert PT.flatten(from_python([{"a": 1, "c": 2}, {"b": 1, "c": 2}, {"a": 1, "b": 2}]))
    enc = encode(node, "mckp")  # the knapsack still carries it, in another option
    assert same_value(decode(enc.text), to_python_rows(node))


def to_python_rows(node):
    from tersetalk.formats.tree import to_python

    return to_python(node)


def test_a_row_whose_cells_are_all_constants_keeps_one_in_the_row():
    rows = [{"a": 1}, {"a": 1, "b": 2}, {"a": 1}]
    text = render_block(from_python(rows), "csv_paths")
    assert text.split("\n") == ["a,b", "1,", "1,2", "1,"]
    assert same_value(parse_block(text, "csv_paths"), rows)
    rows = [{"a": 1, "c": 0}, {"a": 1, "b": 2, "c": 0}]
    text = render_block(from_python(rows), "csv_paths")
    assert text.split("\n") == ["a,b,c=0", "1,", "1,2"]
    assert same_value(parse_block(text, "csv_paths"), rows)


def test_a_row_without_keys_has_no_csv_paths_line():
    node = from_python([{"a": 1}, {}])
    with pytest.raises(ValueError):
        render_block(node, "csv_paths")
    assert block_ok(node, "markdown_paths")


@pytest.mark.parametrize(
    "text",
    [
        "a,b\n1",  # too few cells
        "a\n[1,",  # JSON cell that does not end
        'a\n"x"y',  # something after a JSON cell
        "a,a\n1,2",  # a repeated column
        "a,a.b\n1,2",  # a value inside a non-object
        "a\\\n1",  # a bad escape
    ],
)
def test_malformed_csv_paths_is_a_decode_error(text):
    with pytest.raises(FormatDecodeError):
        parse_block(text, "csv_paths")


def test_the_format_hint_names_a_root_path_table_and_decode_reads_it():
    rows = [
        {"id": i, "user": {"login": f"u{i}"}, **({"extra": True} if i else {})} for i in range(4)
    ]
    enc = encode(from_python(rows), "mckp_plain")
    assert enc.text.split("\n")[0] == "> [encoded: mckp | csv_paths]"
    assert same_value(decode(enc.text), rows)


def test_cli_decode_reads_a_path_table(tmp_path):
    rows = [{"id": str(i), "account": {"id": str(i), "note": "<p>a, b</p>"}} for i in range(3)]
    src = tmp_path / "rows.json"
    src.write_text(json.dumps(rows))
    run = [sys.executable, "-m", "tersetalk", "formats"]
    enc = subprocess.run([*run, "encode", str(src)], capture_output=True, text=True, check=True)
    assert "csv_paths" in enc.stdout
    dec = subprocess.run([*run, "decode"], input=enc.stdout, capture_output=True, text=True)
    assert dec.returncode == 0, dec.stderr
    assert same_value(json.loads(dec.stdout), rows)


# --- the shipped corpora -----------------------------------------------------------------


@pytest.fixture(scope="module")
def encoded():
    """Every JSON payload of both corpora in mckp and compact JSON (o200k_base), once."""
    out = []
    for corpus in CORPORA:
        for p in load_corpus(ROOT / corpus, kinds=("json",)):
            node = from_python(p.value)
            enc = encode(node, "mckp")
            out.append(
                {
                    "corpus": Path(corpus).name,
                    "item_id": p.id,
                    "shape": shape_of(p.shape, p.value),
                    "value": p.value,
                    "text": enc.text,
                    "mckp": enc.tokens,
                    "json_compact": encode(node, "json_compact").tokens,
                }
            )
    return out


def test_every_shipped_payload_round_trips(encoded):
    for row in encoded:
        assert same_value(decode(row["text"]), row["value"]), (row["corpus"], row["item_id"])


def test_the_held_out_set_uses_path_tables(encoded):
    held = [r for r in encoded if r["corpus"] == "mastodon"]
    assert len(held) == 134
    assert sum("csv_paths" in r["text"] for r in held) >= 10


def test_no_payload_is_dearer_than_compact_json(encoded):
    dearer = [(r["corpus"], r["item_id"]) for r in encoded if r["mckp"] > r["json_compact"]]
    assert dearer == []


def test_the_saving_target_holds_on_nested_payloads_and_the_held_out_set(encoded):
    table = summary(pd.DataFrame(encoded).drop(columns=["value", "text"]))
    by = table.set_index(["corpus", "shape"])
    shared = by.loc[("toolresponses", "nested")]
    assert shared["payloads"] == 121  # nested_object and arrays of objects whose values nest
    assert shared["saving_pct"] >= TARGET_PCT, table.to_string()
    for corpus in ("toolresponses", "mastodon"):
        for shape in ("nested", "all"):
            assert by.loc[(corpus, shape), "saving_pct"] >= TARGET_PCT, table.to_string()
    assert (table["above_json"] == 0).all()
    assert set(NESTED_SHAPES) <= set(table["shape"])


def test_the_held_out_file_is_checked_against_its_sha256(tmp_path):
    bad = tmp_path / "mastodon"
    bad.mkdir()
    shutil.copy(ROOT / "data" / "mastodon" / "json.jsonl", bad / "json.jsonl")
    assert load_corpus(bad, kinds=("json",))  # the shipped bytes pass
    with (bad / "json.jsonl").open("a") as fh:
        fh.write("\n")
    with pytest.raises(CorpusError, match="checksum mismatch"):
        load_corpus(bad, kinds=("json",))
    assert "mastodon/json.jsonl" in SHA256


def test_the_shapes_command_prints_the_per_shape_table():
    out = subprocess.run(
        [sys.executable, "-m", "tersetalk", "formats", "shapes", "--format", "csv"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "corpus,shape,tokenizer,payloads,json_compact,mckp,saving_pct,above_json"
    assert any(x.startswith("mastodon,all,o200k_base,134,") for x in lines)
