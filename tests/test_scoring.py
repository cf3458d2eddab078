"""The official scorers of HotpotQA (EM/F1 of ``hotpot_evaluate_v1.py``) and GSM8K
(the number after ``#### ``), each in its task's module."""

from __future__ import annotations

import gzip
import json
import string
from pathlib import Path

import official_hotpot
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tersetalk.tasks.base import ScoringError
from tersetalk.tasks.gsm8k import extract_number, gsm8k_correct, gsm8k_gold
from tersetalk.tasks.hotpotqa import hotpot_aggregate, hotpot_em, hotpot_f1, normalize_answer

DATA = Path(__file__).resolve().parents[1] / "data"

# Real GSM8K test answers (the first and a comma-formatted one).
JANET_ANSWER = (
    "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n"
    "She makes 9 * 2 = $<<9*2=18>>18 every day at the farmer\u2019s market.\n"
    "#### 18"
)
JOHN_ANSWER = (
    "He makes 2000*52=$<<2000*52=104000>>104,000 a year\n"
    "So the raise is worth .05*104,000=$<<.05*104000=5200>>5200\n"
    "So he makes 104,000+5200=$<<104000+5200=109200>>109,200 from his salary\n"
    "So in total he made 109,200+5,000=$<<109200+5000=114200>>114,200\n"
    "#### 114,200"
)


# --------------------------------------------------------------------------- #
# normalize_answer
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("THE BEATLES", "beatles"),
        ("an apple, a pear and the plum", "apple pear and plum"),
        # articles only as whole words: "the" inside "theory", "an" in "Ann"
        ("The Theory of Relativity", "theory of relativity"),
        ("Ann and Thea", "ann and thea"),
        ("  Barack\t  Obama \n", "barack obama"),
        ("U.S.A.", "usa"),
        ("it's", "its"),
        # punctuation is removed *before* articles: "the-end" -> "theend"
        ("the-end", "theend"),
        ("(a) first", "first"),
        ("a", ""),
        ("", ""),
        # only ASCII punctuation is removed, as in the official script
        ("\u201cHi\u201d", "\u201chi\u201d"),
        ("1,000", "1000"),
    ],
)
def test_normalize_answer(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


# --------------------------------------------------------------------------- #
# hotpot_f1 / hotpot_em
# --------------------------------------------------------------------------- #


def test_exact_answer_scores_one() -> None:
    assert hotpot_f1("The Eiffel Tower.", "eiffel tower") == (1.0, 1.0, 1.0)
    assert hotpot_em("The Eiffel Tower.", "eiffel tower") == 1.0


def test_partial_f1_by_hand() -> None:
    # pred tokens: eiffel tower in paris (4); gold: eiffel tower (2); overlap 2
    f1, precision, recall = hotpot_f1("the Eiffel Tower in Paris", "Eiffel Tower")
    assert precision == pytest.approx(0.5)
    assert recall == pytest.approx(1.0)
    assert f1 == pytest.approx(2 / 3)
    assert hotpot_em("the Eiffel Tower in Paris", "Eiffel Tower") == 0.0


def test_f1_counts_repeated_tokens_as_a_multiset() -> None:
    # "new" appears 3 times in the prediction but once in gold: overlap is 1
    f1, precision, recall = hotpot_f1("new new new", "New York")
    assert precision == pytest.approx(1 / 3)
    assert recall == pytest.approx(1 / 2)
    assert f1 == pytest.approx(0.4)


def test_no_common_tokens_is_zero() -> None:
    assert hotpot_f1("London", "Paris") == (0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("yes", "no", (0.0, 0.0, 0.0)),
        ("no", "yes", (0.0, 0.0, 0.0)),
        ("yes", "yes", (1.0, 1.0, 1.0)),
        ("Yes.", "yes", (1.0, 1.0, 1.0)),
        ("noanswer", "noanswer", (1.0, 1.0, 1.0)),
        # special on the prediction side: no partial credit despite overlap
        ("yes", "yes it is", (0.0, 0.0, 0.0)),
        # special on the gold side
        ("yes indeed", "yes", (0.0, 0.0, 0.0)),
        ("no answer", "no", (0.0, 0.0, 0.0)),
        ("noanswer", "Paris", (0.0, 0.0, 0.0)),
    ],
)
def test_yes_no_noanswer_rule(
    prediction: str, gold: str, expected: tuple[float, float, float]
) -> None:
    assert hotpot_f1(prediction, gold) == expected


def test_special_rule_uses_normalised_form() -> None:
    # "No Answer" normalises to "no answer" (two tokens), not "noanswer",
    # so ordinary overlap applies: P = 2/2, R = 2/3
    f1, precision, recall = hotpot_f1("No Answer", "no answer given")
    assert precision == pytest.approx(1.0)
    assert recall == pytest.approx(2 / 3)
    assert f1 == pytest.approx(0.8)


def test_empty_prediction() -> None:
    assert hotpot_f1("", "Paris") == (0.0, 0.0, 0.0)
    assert hotpot_em("", "Paris") == 0.0


def test_both_normalise_to_empty_is_em_one_but_f1_zero() -> None:
    # Official quirk: EM compares strings, F1 needs at least one shared token.
    assert hotpot_em("The.", "a") == 1.0
    assert hotpot_f1("The.", "a") == (0.0, 0.0, 0.0)


def test_scores_are_floats() -> None:
    assert all(type(x) is float for x in hotpot_f1("yes", "no"))
    assert type(hotpot_em("x", "y")) is float


# --------------------------------------------------------------------------- #
# hotpot_aggregate
# --------------------------------------------------------------------------- #


def test_aggregate_counts_missing_prediction_as_zero() -> None:
    golds = {"q1": "Paris", "q2": "yes", "q3": "Eiffel Tower"}
    predictions = {"q1": "paris", "q3": "the Eiffel Tower in Paris", "stray": "x"}
    result = hotpot_aggregate(predictions, golds)
    assert result["n"] == 3
    assert result["em"] == pytest.approx(1 / 3)
    assert result["f1"] == pytest.approx((1 + 2 / 3) / 3)
    assert result["precision"] == pytest.approx((1 + 0.5) / 3)
    assert result["recall"] == pytest.approx((1 + 1) / 3)


def test_aggregate_perfect() -> None:
    golds = {"a": "yes", "b": "Ed Wood"}
    result = hotpot_aggregate({"a": "Yes", "b": "ed wood."}, golds)
    assert result == {"em": 1.0, "f1": 1.0, "precision": 1.0, "recall": 1.0, "n": 2}


def test_aggregate_no_predictions_is_zero() -> None:
    result = hotpot_aggregate({}, {"a": "yes"})
    assert result == {"em": 0.0, "f1": 0.0, "precision": 0.0, "recall": 0.0, "n": 1}


def test_aggregate_rejects_empty_gold() -> None:
    with pytest.raises(ScoringError):
        hotpot_aggregate({"a": "x"}, {})


# --------------------------------------------------------------------------- #
# GSM8K gold
# --------------------------------------------------------------------------- #


def test_gsm8k_gold_real_line() -> None:
    assert gsm8k_gold(JANET_ANSWER) == "18"


def test_gsm8k_gold_removes_thousands_commas() -> None:
    assert gsm8k_gold(JOHN_ANSWER) == "114200"
    assert gsm8k_gold("Total is 1,000 apples.\n#### 1,000") == "1000"


def test_gsm8k_gold_uses_last_marker_and_strips() -> None:
    assert gsm8k_gold("#### 1\nrevised\n#### -7  \n") == "-7"


@pytest.mark.parametrize("field", ["The answer is 18", "####18", "#### ", "####   \n"])
def test_gsm8k_gold_without_value_raises(field: str) -> None:
    with pytest.raises(ScoringError):
        gsm8k_gold(field)


def test_scoring_error_is_value_error() -> None:
    assert issubclass(ScoringError, ValueError)


# --------------------------------------------------------------------------- #
# extract_number
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is $1,234.", "1234"),
        ("#### 42", "42"),
        ("so she makes 18 dollars. ", "18"),
        ("-3", "-3"),
        ("3.50", "3.5"),
        ("18.00", "18"),
        ("There is no number here.", None),
        ("", None),
        # "####" wins over a later number
        ("She has 3 + 4 = 7 apples.\n#### 7\nDouble-check: 3 and 4.", "7"),
        # "answer is" wins over the last number in the text
        ("The answer is 12.\nCheck: 12 - 3 = 9 left over.", "12"),
        ("Final Answer: 25%", "25"),
        ("**Answer:** $-5", "-5"),
        ("The answer is: -$5.", "-5"),
        ("Total cost is 2 * $7 = $14 per week.", "14"),
        # subtraction is not a negative number
        ("16-3-4 = 9", "9"),
        ("Then 20 - 3", "3"),
        ("She has 16-3", "3"),
        ("Cases of COVID-19", "19"),
        ("$-5 and (-2)", "-2"),
        ("(2 + 3)-1", "1"),
        ("It rose from 1,234,567.89 to 2,000,000 units", "2000000"),
        ("So the result is \\boxed{1,000}.", "1000"),
        ("(-3)", "-3"),
        # phrase without a number on its line falls back to the last number
        ("The answer is eighteen\nbecause 3 * 6 = 18", "18"),
        (JANET_ANSWER, "18"),
    ],
)
def test_extract_number(text: str, expected: str | None) -> None:
    assert extract_number(text) == expected


# --------------------------------------------------------------------------- #
# gsm8k_correct
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("She makes $18.00 every day.", JANET_ANSWER, True),
        ("The answer is 18", JANET_ANSWER, True),
        ("The answer is 19", JANET_ANSWER, False),
        ("I don't know.", JANET_ANSWER, False),
        ("In total he made $114,200.", JOHN_ANSWER, True),
        ("#### 114200.0000001", JOHN_ANSWER, True),
        ("#### 114200.001", JOHN_ANSWER, False),
        ("The answer is -3.", "#### -3", True),
        ("The answer is 3.", "#### -3", False),
    ],
)
def test_gsm8k_correct(prediction: str, gold: str, expected: bool) -> None:
    assert gsm8k_correct(prediction, gold) is expected


def test_gsm8k_correct_accepts_an_already_extracted_gold() -> None:
    # run records store gsm8k_gold(...) output, not the raw answer field
    assert gsm8k_correct("18", gsm8k_gold(JANET_ANSWER)) is True
    assert gsm8k_correct("$114,200", "114,200") is True
    assert gsm8k_correct("17", "18") is False


@pytest.mark.parametrize("gold", ["#### eighteen", "eighteen", "", "#### NaN", "inf"])
def test_gsm8k_correct_bad_gold_raises(gold: str) -> None:
    with pytest.raises(ScoringError):
        gsm8k_correct("18", gold)


# --------------------------------------------------------------------------- #
# properties
# --------------------------------------------------------------------------- #


@given(st.text())
def test_normalize_is_idempotent(s: str) -> None:
    once = normalize_answer(s)
    assert normalize_answer(once) == once


@given(st.text())
def test_self_f1_is_one_when_normalisation_nonempty(s: str) -> None:
    f1, precision, recall = hotpot_f1(s, s)
    if normalize_answer(s):
        assert (f1, precision, recall) == (1.0, 1.0, 1.0)
    else:
        assert (f1, precision, recall) == (0.0, 0.0, 0.0)


@given(st.text(), st.text())
def test_em_implies_full_f1_and_scores_bounded(prediction: str, gold: str) -> None:
    f1, precision, recall = hotpot_f1(prediction, gold)
    assert 0.0 <= f1 <= 1.0 and 0.0 <= precision <= 1.0 and 0.0 <= recall <= 1.0
    assert f1 <= max(precision, recall) + 1e-12
    if hotpot_em(prediction, gold) == 1.0 and normalize_answer(gold):
        assert f1 == 1.0


@given(st.text())
def test_extract_number_never_raises_and_is_canonical(text: str) -> None:
    found = extract_number(text)
    if found is not None:
        float(found)
        assert "," not in found and "$" not in found
        assert not found.endswith(".")
        assert found != "-0"


@given(
    st.integers(min_value=-(10**9), max_value=10**9),
    st.sampled_from(["{}", "{:,}", "${:,}", "{}.00", "{:,} dollars.", "{}%"]),
)
def test_extract_number_roundtrips_integers(value: int, template: str) -> None:
    text = f"Some working: 2 + 2 = 4. So the answer is {template.format(value)}"
    assert extract_number(text) == str(value)
    assert gsm8k_correct(text, f"#### {value:,}")


# --------------------------------------------------------------------------- #
# agreement with an independent re-implementation of hotpot_evaluate_v1.py
# --------------------------------------------------------------------------- #

_PIECES = st.one_of(
    # words, with articles and the special answers in several casings
    st.sampled_from(
        "a an the A An THE The yes no Yes NO noanswer no-answer theory another than and "
        "Paris 1984 x".split()
        + ["No Answer"]
    ),
    # ASCII punctuation (removed) and Unicode punctuation/symbols (kept), glued to words
    st.sampled_from(list(string.punctuation) + ["\u2019", "\u2014", "\u00ab", "\u00bb", "\u00bf"]),
    # Unicode letters, digits, combining marks, case-changing letters
    st.sampled_from(
        ["\u00e9", "e\u0301", "a\u0301", "\u00df", "\u0130", "\u03a3", "\u0661", "\u00bd"]
        + ["\u00e0", "\u0391", "\u0410", "\u4e2d"]
    ),
    # odd whitespace
    st.sampled_from([" ", "  ", "\t", "\n", "\u00a0", "\u2003", ""]),
    st.text(max_size=4),
)
_ANSWERS = st.lists(_PIECES, max_size=10).map("".join)


@st.composite
def _answer_pairs(draw: st.DrawFn) -> tuple[str, str]:
    gold = draw(_ANSWERS)
    how = draw(st.sampled_from(["independent", "edited", "same", "special"]))
    if how == "special":  # a yes/no/noanswer side against an overlapping other side
        special = draw(st.sampled_from(["yes", "No", "noanswer", "No-Answer", "YES.", "the no"]))
        other = special + draw(st.sampled_from([" ", ", "])) + draw(_ANSWERS)
        return (special, other) if draw(st.booleans()) else (other, special)
    if how == "independent":
        return draw(_ANSWERS), gold
    if how == "same":
        return gold, gold
    # an edit of the gold, so partial overlaps are common
    words = gold.split(" ")
    kept = draw(st.lists(st.sampled_from(words), max_size=len(words) + 2))
    around = st.one_of(st.just(""), _ANSWERS)
    return draw(around) + " ".join(kept) + draw(around), gold


@given(_answer_pairs())
@example(("The the-end", "theend"))
@example(("the\u2019s answer", "\u2019s answer"))
@example(("a\u0301 b", "b"))
@example(("No, Answer!", "noanswer"))
@example(("yes", "Yes."))
@example(("an apple an apple", "apple"))
@example(("noanswer", "noanswer Paris"))
def test_hotpot_scores_equal_an_independent_official_reimplementation(
    pair: tuple[str, str],
) -> None:
    prediction, gold = pair
    assert normalize_answer(prediction) == official_hotpot.normalize_answer(prediction)
    assert hotpot_em(prediction, gold) == official_hotpot.exact_match(prediction, gold)
    ours = hotpot_f1(prediction, gold)
    theirs = official_hotpot.f1_score(prediction, gold)
    assert ours == pytest.approx(theirs, abs=1e-12), (prediction, gold)


# --------------------------------------------------------------------------- #
# the bundled data (skipped when absent)
# --------------------------------------------------------------------------- #


def _jsonl(path: Path) -> list[dict]:
    if not path.exists():
        pytest.skip(f"{path} not present")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_every_gsm8k_reference_solution_scores_correct() -> None:
    rows = _jsonl(DATA / "gsm8k" / "test.jsonl.gz")
    assert rows
    for row in rows:
        float(gsm8k_gold(row["answer"]))
        assert gsm8k_correct(row["answer"], row["answer"]), row["answer"]


def test_every_hotpot_gold_scores_one_against_itself() -> None:
    rows = _jsonl(DATA / "hotpotqa" / "hotpot_dev_distractor.jsonl.gz")
    assert rows
    golds = {row["id"]: row["answer"] for row in rows}
    result = hotpot_aggregate(golds, golds)
    assert result["n"] == len(golds)
    assert result["em"] == 1.0
    assert result["f1"] == pytest.approx(1.0)
