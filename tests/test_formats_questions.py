"""Questions with gold answers by construction (comprehension) and the corpus loader."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tersetalk.formats.corpus import CorpusError, Payload, load_corpus
from tersetalk.formats.questions import KINDS, answer_matches, question_set, questions_for
from tersetalk.formats.solver import encode
from tersetalk.formats.tree import from_python

DATA = Path(__file__).resolve().parents[1] / "data" / "toolresponses"


def _payload(value, pid="t") -> Payload:
    return Payload(pid, "json", "test", "", "", json.dumps(value, indent=2), value)


def _get(value, path):
    for p in path:
        value = value[p]
    return value


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(DATA, kinds=("json",))


def test_gold_is_the_value_at_its_path_and_every_kind_occurs(corpus):
    qs = question_set(corpus, seed=0)
    kinds = Counter(q.kind for q in qs)
    assert set(kinds) == set(KINDS), kinds
    by_id = {p.id: p.value for p in corpus}
    for q in qs:
        if q.kind == "count":
            assert q.gold == str(len(_get(by_id[q.payload_id], q.path)))
        else:
            value = _get(by_id[q.payload_id], q.path)
            assert q.gold == (value if isinstance(value, str) else json.dumps(value))


def test_questions_are_seeded(corpus):
    assert question_set(corpus[:20], seed=1) == question_set(corpus[:20], seed=1)
    assert question_set(corpus[:20], seed=1) != question_set(corpus[:20], seed=2)


def test_scorer_rules():
    assert answer_matches("42", "42") and answer_matches("42.0", "42")
    assert answer_matches('The value of "id" is 42.', "42")
    assert answer_matches("`Octocat`", "octocat") and answer_matches('"open".', "open")
    assert answer_matches("Yes", "true") and answer_matches("None", "null")
    assert not answer_matches("43", "42") and not answer_matches("", "42")
    assert not answer_matches("octocat-2", "octocat")  # a neighbouring row's value


def test_a_count_said_as_a_sentence_is_scored_by_its_number():
    # what SmolLM2 answers to every count question, whatever the encoding
    assert answer_matches("The top-level array has 3 items.", "3")
    assert answer_matches("The array contains 1 element", "1")
    assert not answer_matches("The top-level array has 1 items.", "2")
    assert not answer_matches("The top-level array has 3 items.", "octocat")
    assert not answer_matches("Item 3 has 2 labels.", "3")  # not a count of items


def test_corpus_errors_name_file_and_line(tmp_path):
    (tmp_path / "json.jsonl").write_text('{"id": "a", "shape": "x", "body": 1}\n{oops\n')
    with pytest.raises(CorpusError, match=r"json.jsonl, line 2"):
        load_corpus(tmp_path, kinds=("json",))
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path, kinds=("markdown",))


# the design's encoder postmortem: a monolithic table of the largest array, primitive
# columns only, drops the wrapper's fields and the fields nested in the items
WRAPPED = {
    "company": "Acme",
    "year": 2026,
    "employees": [{"name": "Ann", "role": "dev"}, {"name": "Cy", "role": "ops"}],
}
ORDERS = {
    "orders": [
        {"id": 1, "total": 9.5, "customer": {"email": "a@b.c"}},
        {"id": 2, "total": 3.0, "customer": {"email": "d@e.f"}},
    ]
}


def naive_table(value) -> str:
    arr = max((v for v in value.values() if isinstance(v, list)), key=len)
    cols = [k for k, v in arr[0].items() if not isinstance(v, dict | list)]
    return "\n".join([",".join(cols)] + [",".join(str(x[c]) for c in cols) for x in arr])


@pytest.mark.parametrize("value,kind", [(WRAPPED, "wrapper_field"), (ORDERS, "nested_in_item")])
def test_postmortem_questions_lost_by_a_monolithic_table_kept_by_mckp(value, kind):
    qs = [q for q in questions_for(_payload(value)) if q.kind == kind]
    assert qs
    for q in qs:
        assert q.gold not in naive_table(value)
        assert q.gold in encode(from_python(value)).text
        assert q.gold in encode(from_python(value), "json_compact").text


def test_more_questions_per_kind_extend_the_smaller_set(corpus):
    """formats.comprehension.per_kind: a larger set starts with the smaller one, so the
    answers cached for it are reused and the paired comparison only gains questions."""
    one, three = question_set(corpus, seed=0), question_set(corpus, seed=0, per_kind=3)
    assert len(three) > 2 * len(one)
    assert {q.qid: q for q in one}.items() <= {q.qid: q for q in three}.items()
    per = Counter((q.payload_id, q.kind) for q in three)
    assert max(per.values()) == 3 and all(n == 1 for (_, k), n in per.items() if k == "count")
