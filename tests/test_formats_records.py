"""The table path of a long array of flat records: the knapsack's text without its tree,
lossless by its read-back, and None wherever the knapsack should lay the array out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tersetalk.bench.mb5 import payload
from tersetalk.formats import records as R
from tersetalk.formats.solver import decode, encode
from tersetalk.formats.tree import from_python, same_value

TOK = "o200k_base"
LONG = 33  # the least the sampled search (16) treats as long


def _knapsack(value):
    """What the proxy's knapsack sends for ``value`` (its sampled search)."""
    return encode(from_python(value), "mckp", tokenizer=TOK, sample=16)


def _tabled(value):
    records = R.table_records(value, LONG)
    assert records is not None
    return R.encode_records(value, records, tokenizer=TOK)


@pytest.mark.parametrize(
    "value",
    [
        [{"a": 1}] * 40,
        [{"a": i, "b": [1, "x", None, 2.5], "c": None, "d": True} for i in range(40)],
        [{"x": float(i) / 3, "y": -0.0, "z": ""} for i in range(50)],
    ],
)
def test_flat_records_takes_long_lists_of_same_keyed_rows_of_scalars_and_lists(value):
    records = R.table_records(value, LONG)
    assert records == R.Records(tuple(value[0]), tuple((k,) for k in value[0]))
    assert not records.nests


def _nested_rows(n: int) -> list:
    """Rows with an object, an object in it, an empty object and a list of objects, with
    URLs (aliased) in the objects and in the list's."""
    return [{"id": i, "owner": {"login": f"u{i % 5}", "site": {"url": f"https://x.org/u{i}"}},
             "meta": {}, "labels": [{"url": f"https://x.org/labels/{i % 4}"}] * (i % 3)}
            for i in range(n)]  # fmt: skip


def test_records_of_one_nested_shape_are_taken_with_their_leaves_paths():
    records = R.table_records(_nested_rows(40), LONG)
    assert records.keys == ("id", "owner", "meta", "labels") and records.nests
    assert records.paths == (("id",), ("owner", "login"), ("owner", "site", "url"), ("meta",),
                             ("labels",))  # fmt: skip


def _deep(levels: int) -> dict:
    value: dict = {"x": 1}
    for _ in range(levels):
        value = {"x": value}
    return value


@pytest.mark.parametrize(
    "value",
    [
        [{"a": 1}] * 32,  # short: the knapsack lays it out item by item
        [{"a": 1}] * 39 + [{"b": 1}],  # keys differ
        [{"a": 1, "b": 2}] * 39 + [{"b": 2, "a": 1}],  # the same keys in another order
        [{"a": 1}] * 39 + [{"a": {"b": 1}}],  # an object in a cell: a path table's
        [{"a": 1}] * 39 + [{"a": [[float("nan")]]}],  # not JSON, in a list
        [{"a": 1}] * 39 + [{"a": float("nan")}],  # not JSON
        [{"a": {"b": 1}}] * 39 + [{"a": {"c": 1}}],  # nested keys differ
        [{"a": {"b": 1}}] * 39 + [{"a": 1}],  # an object in one row, a scalar in another
        [{"a": {"b": 1}}] * 39 + [{"a": {}}],  # ... an empty object
        [{"a": {"b": {1: 2}}}] * 40,  # a nested key that is no string
        [{"a": {"b": (1,)}}] * 40,  # no JSON data
        [{"a": _deep(R.MAX_NEST)}] * 40,  # objects nested deeper than the path follows
        [{"a": [_deep(R.MAX_NEST)]}] * 40,  # ... in a list
        [{"a": 1}] * 39 + [[1]],
        [{}] * 40,
        {"a": [{"b": 1}] * 40},
        [{1: "a"}] * 40,  # a literal's key that is no string
    ],
)
def test_records_refuses_every_other_shape(value):
    assert R.table_records(value, LONG) is None


def _scalar_rows(kib: int) -> list:
    rows = json.loads(payload(kib))
    for row in rows:
        del row["tags"]
    return rows


def _path_rows(n: int) -> list:
    """Rows whose paths share long prefixes: the knapsack names them with aliases."""
    return [
        {"id": i, "path": f"/srv/data/projects/alpha/src/module{i % 7}/f{i}.py", "ok": i % 2 == 0}
        for i in range(n)
    ]


@pytest.mark.parametrize(
    "value, option",
    [
        (json.loads(payload(32)), "csv"),  # list cells: the container's csv block
        (_scalar_rows(32), "single:csv"),  # scalars only: the csv format's own, shorter hint
        (_path_rows(120), None),
        # quotes and commas in cells: quoted by csv, bare in a Markdown table
        ([{"q": f'say "a, b" {i}', "n": [i, i + 1]} for i in range(40)], "csv"),
        # objects in the records: a column per key path
        (
            [dict(r, owner={"login": r["name"], "id": r["id"]}) for r in _scalar_rows(32)],
            "csv_paths",
        ),  # fmt: skip
        (_nested_rows(60), None),
    ],
    ids=["mb5-32k", "scalars", "aliased-paths", "quoted", "nested", "nested-aliased"],
)
def test_the_table_path_sends_the_knapsacks_text(value, option):
    tabled, knapsack = _tabled(value), _knapsack(value)
    assert tabled is not None
    assert tabled.text == knapsack.text and tabled.tokens == knapsack.tokens
    assert tabled.choices == knapsack.choices[:1] and tabled.aliases == knapsack.aliases
    assert tabled.lossless and tabled.read_back and tabled.value_total == knapsack.value_total
    assert same_value(decode(tabled.text), value)
    if option:
        assert tabled.choices[0][1] == option
    else:
        assert tabled.aliases > 0  # the alias layer paid here, as in the knapsack


def test_rows_whose_head_is_no_table_go_to_the_knapsack(monkeypatch):
    value = json.loads(payload(4))
    asked = []

    def head(rows, tokenizer):
        asked.append(len(rows))
        return "list"  # the knapsack's answer for rows it lays out item by item

    monkeypatch.setattr(R, "head_option", head)
    assert _tabled(value) is None and asked == [R.HEAD_ROWS]


def test_a_table_that_does_not_read_back_is_passed_over(monkeypatch):
    value = _scalar_rows(4) * 2
    real = R.same_value
    refused = []

    def strict(a, b, b_text=None):  # the cheapest text is refused once: the next one is sent
        if not refused:
            refused.append(True)
            return False
        return real(a, b, b_text)

    monkeypatch.setattr(R, "same_value", strict)
    tabled = _tabled(value)
    assert tabled is not None and refused
    assert tabled.text != _knapsack(value).text and same_value(decode(tabled.text), value)
    monkeypatch.setattr(R, "same_value", lambda a, b, b_text=None: False)
    assert _tabled(value) is None  # none reads back: the knapsack decides


def test_the_counts_made_are_handed_back():
    value = json.loads(payload(4))
    known: dict[str, int] = {}
    tabled = R.encode_records(value, R.table_records(value, LONG), tokenizer=TOK, known=known)
    assert known[tabled.text] == tabled.tokens


def test_the_corpora_long_flat_arrays_get_the_knapsacks_text():
    from tersetalk.formats.corpus import load_corpus

    data = Path(__file__).resolve().parents[1] / "data"
    payloads = [p for d in ("toolresponses", "mastodon")
                for p in load_corpus(data / d, kinds=("json",))]  # fmt: skip
    flat = [p for p in payloads if R.table_records(p.value, LONG) is not None]
    assert len(payloads) > 200 and flat  # the one long flat array (the rest nest objects)
    for p in flat:
        tabled = _tabled(p.value)
        assert tabled is not None and tabled.text == _knapsack(p.value).text, p.id


def _random_rows(rng) -> list:
    """Rows of a few columns of one kind each: numbers, words, sentences with commas and
    quotes, lines, lists, URLs."""
    words = "alpha beta gamma delta river city album north south season".split()
    kinds = {
        "int": lambda i: rng.randint(0, 10 ** rng.randint(1, 9)),
        "float": lambda i: round(rng.random() * 100, rng.randint(0, 4)),
        "bool": lambda i: rng.random() < 0.5,
        "null": lambda i: None if rng.random() < 0.7 else "x",
        "word": lambda i: rng.choice(words),
        "sentence": lambda i: ", ".join(rng.choice(words) for _ in range(rng.randint(2, 12))),
        "quoted": lambda i: f'say "{rng.choice(words)}, {rng.choice(words)}"',
        "lines": lambda i: rng.choice(words) + "\n" + rng.choice(words),
        "list": lambda i: [rng.choice(words) for _ in range(rng.randint(0, 4))],
        "url": lambda i: f"https://api.example.com/v1/{rng.choice(words)}/{i}",
    }
    columns = [rng.choice(sorted(kinds)) for _ in range(rng.randint(1, 6))]
    return [{f"k{j}": kinds[c](i) for j, c in enumerate(columns)}
            for i in range(rng.choice([33, 40, 60]))]  # fmt: skip


def test_random_rows_read_back_and_cost_what_the_knapsacks_text_costs():
    import random

    rng = random.Random(7)
    same = tabled_n = 0
    for _ in range(30):
        value = _random_rows(rng)
        tabled = _tabled(value)
        if tabled is None:  # the head is no table: the knapsack lays it out
            continue
        tabled_n += 1
        assert same_value(decode(tabled.text), value)
        knapsack = _knapsack(value)
        same += tabled.text == knapsack.text
        # where the head does not show the whole array's best layout (TOON, say), the
        # table costs a little more
        assert tabled.tokens <= knapsack.tokens * 1.01
    assert tabled_n >= 20 and same >= tabled_n - 2


def test_with_the_count_helper_the_head_and_the_counts_are_its_and_the_text_the_same():
    from tersetalk.core import counter
    from tersetalk.core.tokens import start_count_helper, stop_count_helper

    value = json.loads(payload(32))
    alone = _tabled(value)
    assert start_count_helper([TOK], preload=("tersetalk.formats.records",))
    try:
        helped = _tabled(value)
        asked = counter._HELPER.sent
    finally:
        stop_count_helper()
    assert helped.text == alone.text and helped.tokens == alone.tokens
    assert asked == 3  # the head's question, the csv and the Markdown table's counts


def test_random_nested_rows_get_the_knapsacks_text():
    import random

    rng = random.Random(11)
    tabled_n = same = 0
    for _ in range(20):
        groups = rng.choice([2, 3])  # columns moved into one or two nested objects
        value = []
        for row in _random_rows(rng):
            out: dict = {}
            for j, (key, v) in enumerate(row.items()):
                if j % groups == 0:
                    out[key] = v
                else:
                    out.setdefault(f"g{j % groups}", {}).setdefault("in", {})[key] = v
            value.append(out)
        tabled = _tabled(value)
        if tabled is None:
            continue
        tabled_n += 1
        assert same_value(decode(tabled.text), value)
        same += tabled.text == _knapsack(value).text
    assert tabled_n >= 15 and same == tabled_n
