"""What each role says and how its words are read back.

The Manager is deterministic: its brief is built from the example, so every
system starts from the same information and differs only in how that
information travels. The Worker and the Critic are model calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import tersetalk.tasks.registry as _registry
from tersetalk.tasks import toolqa
from tersetalk.tasks.scoring import extract_number


@dataclass(frozen=True)
class Participant:
    """One agent of a conversation.

    ``letter`` names it in messages (``sender``/``receiver``) and in record columns
    (``tokens_M_W``); ``name`` is its role in the call log and in per-role columns
    (``tokens_sent_worker``); ``kind`` says whose prompts and reply format it uses, so
    a second worker of a chain (``W2``) speaks like the star's Worker.
    """

    letter: str
    name: str
    kind: str


#: Every participant a topology may use: the one table of role names.
PARTICIPANTS: dict[str, Participant] = {
    p.letter: p
    for p in (
        Participant("M", "manager", "manager"),
        Participant("W", "worker", "worker"),
        Participant("C", "critic", "critic"),
        Participant("W1", "worker1", "worker"),
        Participant("W2", "worker2", "worker"),
    )
}


def participant(letter: str) -> Participant:
    """The participant a message letter names; a clear error for an unknown one."""
    try:
        return PARTICIPANTS[letter]
    except KeyError:
        raise ValueError(
            f"unknown participant {letter!r}; known: {', '.join(PARTICIPANTS)} "
            "(add it to tersetalk.agents.roles.PARTICIPANTS)"
        ) from None


@dataclass
class Brief:
    """The Manager's content before any protocol encodes it.

    ``payload``: a tool response the Manager forwards whole (toolqa), as the tool
    returned it; a codec may re-encode it (the ``formats`` system). Not a fact: it is
    data to read, not sentences to cap or compress.
    """

    goal: str
    facts: list[str] = field(default_factory=list)
    question: str = ""
    payload: str = ""


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9$\"'(])")


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def hotpot_facts(record: dict, mode: str) -> list[str]:
    """Supporting sentences ("Title: sentence") or every context paragraph.

    A few HotpotQA supporting facts point past the end of their paragraph (the
    official data has them too); there is no sentence to send for those, so they
    are left out, and answer preservation only checks facts that have text.
    """
    paragraphs = {title: sents for title, sents in record["context"]}
    if mode == "context":
        return [f"{title}: {''.join(sents).strip()}" for title, sents in record["context"]]
    facts = []
    for title, sent_id in record["supporting_facts"]:
        sents = paragraphs.get(title, [])
        if 0 <= sent_id < len(sents):
            facts.append(f"{title}: {sents[sent_id].strip()}")
    return facts


def build_brief(task: str, record: dict, task_options: dict | None = None) -> Brief:
    task_options = task_options or {}
    if task == "hotpotqa":
        return Brief(
            goal="Answer the question with a short span taken from the facts.",
            facts=hotpot_facts(record, task_options.get("facts", "supporting")),
            question=record["question"].strip(),
        )
    if task == "gsm8k":
        sentences = split_sentences(record["question"])
        question = sentences[-1] if sentences else record["question"].strip()
        return Brief(
            goal="Solve the math word problem and give the final number.",
            facts=sentences[:-1],
            question=question,
        )
    if task == "toolqa":
        return Brief(goal=toolqa.GOAL, question=record["question"].strip(),
                     payload=record["payload"])  # fmt: skip
    if _registry.scored_here(task):  # BoolQ, CommonsenseQA, Social IQa, HumanEval
        parts = _registry.brief_parts(task, record)
        return Brief(goal=parts.goal, facts=parts.facts, question=parts.question)
    raise ValueError(f"unknown task {task!r}")


def render_brief(brief: Brief) -> str:
    """The free-form Manager message."""
    lines = [f"Goal: {brief.goal}"]
    if brief.facts:
        lines.append("Facts:")
        lines.extend(f"- {f}" for f in brief.facts)
    if brief.payload:
        lines.append("Tool response:")
        lines.append(brief.payload)
    lines.append(f"Question: {brief.question}")
    return "\n".join(lines)


WORKER_SYSTEM = {
    "hotpotqa": (
        "You are the Worker. The Manager sends you facts and a question. "
        "Reply with the answer only: a few words copied from the facts, or yes/no. "
        "No explanation."
    ),
    "gsm8k": (
        "You are the Worker. The Manager sends you a math word problem. "
        "Work it out in a few short steps, then end with a line 'Answer: <number>'."
    ),
    "toolqa": toolqa.WORKER_SYSTEM,
    **_registry.WORKER_SYSTEM,
}

CRITIC_SYSTEM = (
    "You are the Critic. You see the Manager's task and the Worker's answer. "
    "Start your reply with one word: ACCEPT if the answer is right, REVISE if it "
    "should be fixed, ESCALATE if the task cannot be answered from what was given. "
    "Then give one short sentence of feedback."
)

REVISE_INSTRUCTION = (
    "The Critic asked you to revise your answer. Critic: {feedback}\n"
    "Give your corrected reply in the same format as before."
)

VERDICTS = ("accept", "revise", "escalate")
_VERDICT_RE = re.compile(r"\b(accept|revise|escalate)\w*", re.IGNORECASE)


def parse_verdict(text: str) -> tuple[str, bool]:
    """The Critic's verdict and whether it was stated explicitly.

    A verdict the Critic never states is read as ``accept`` (no revision is forced
    on the Worker), and the record says it was defaulted.
    """
    m = _VERDICT_RE.search(text)
    if m:
        return m.group(1).lower(), True
    return "accept", False


def extract_prediction(task: str, text: str) -> str:
    """The final answer the Worker gave, as a string to score."""
    if task == "gsm8k":
        number = extract_number(text)
        return number if number is not None else ""
    if task == "humaneval":  # code: every line counts (the scorer strips a code fence)
        return text.strip("\n")
    answer = text.strip()
    marker = re.search(r"answer\s*(?:is|:)\s*", answer, re.IGNORECASE)
    if marker:
        answer = answer[marker.end() :]
    for line in answer.splitlines():
        if line.strip():
            answer = line.strip()
            break
    return answer.strip().strip("\"'*").rstrip(".").strip()
