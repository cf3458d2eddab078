from tersetalk.agents.roles import (
    build_brief,
    extract_prediction,
    parse_verdict,
    render_brief,
)
from tersetalk.tasks.hotpotqa import hotpot_facts

HOTPOT = {
    "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
    "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0], ["Ed Wood", 9]],
    "context": [
        ["Ed Wood", ["Edward Davis Wood Jr. was an American filmmaker.", " He was born in 1924."]],
        ["Scott Derrickson", ["Scott Derrickson is an American director."]],
        ["Other", ["Unrelated."]],
    ],
}


def test_hotpot_brief_uses_supporting_sentences_in_order():
    brief = build_brief("hotpotqa", HOTPOT, {"facts": "supporting"})
    # the out-of-range sentence id 9 has no text to send
    assert brief.facts == [
        "Scott Derrickson: Scott Derrickson is an American director.",
        "Ed Wood: Edward Davis Wood Jr. was an American filmmaker.",
    ]
    text = render_brief(brief)
    assert text.startswith("Goal: ") and text.endswith("Question: " + HOTPOT["question"])


def test_hotpot_context_mode_sends_every_paragraph():
    facts = hotpot_facts(HOTPOT, "context")
    assert len(facts) == 3
    assert (
        facts[0] == "Ed Wood: Edward Davis Wood Jr. was an American filmmaker. He was born in 1924."
    )


def test_gsm8k_brief_splits_facts_and_question():
    rec = {"question": "Janet has 3 apples. She buys 2 more. How many apples does she have?"}
    brief = build_brief("gsm8k", rec)
    assert brief.facts == ["Janet has 3 apples.", "She buys 2 more."]
    assert brief.question == "How many apples does she have?"


def test_verdict_parsing():
    assert parse_verdict("ACCEPT. Looks right.") == ("accept", True)
    assert parse_verdict("I would Revise this: wrong year") == ("revise", True)
    assert parse_verdict("Escalated: facts missing") == ("escalate", True)
    assert parse_verdict("Looks fine to me") == ("accept", False)


def test_prediction_extraction():
    assert extract_prediction("hotpotqa", "Answer: yes.\nBecause both are American.") == "yes"
    assert extract_prediction("hotpotqa", '  "Chief of Protocol"  ') == "Chief of Protocol"
    assert extract_prediction("hotpotqa", "The answer is Kansas City.") == "Kansas City"
    assert extract_prediction("gsm8k", "16-3-4=9, 9*2=18\nAnswer: 18") == "18"
    assert extract_prediction("gsm8k", "no idea") == ""
