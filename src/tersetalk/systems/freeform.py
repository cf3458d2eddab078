"""``freeform``: the baseline. Every message is plain natural language.

Manager -> Worker: the brief. Worker -> Critic: the draft, with the brief
forwarded so the Critic can judge it. Critic -> Worker: the verdict. One revise
round when asked. Worker -> Manager: the final answer.
"""

from __future__ import annotations

from tersetalk.agents.conversation import Conversation
from tersetalk.agents.roles import (
    CRITIC_SYSTEM,
    REVISE_INSTRUCTION,
    WORKER_SYSTEM,
    build_brief,
    extract_prediction,
    parse_verdict,
    render_brief,
)
from tersetalk.systems import register
from tersetalk.systems.base import RunContext, SystemResult


def converse(example: dict, ctx: RunContext, manager_message: str) -> SystemResult:
    """The Manager -> Worker -> Critic loop, given the Manager's message as sent.

    Systems that change only how the Manager's message travels reuse this.
    """
    conv = Conversation(ctx.client)
    conv.send("M", "W", "brief", manager_message)
    worker_msgs = [
        {"role": "system", "content": WORKER_SYSTEM[ctx.task]},
        {"role": "user", "content": manager_message},
    ]
    draft = conv.ask("worker", worker_msgs, ctx.gen)
    conv.send("W", "C", "draft", draft)
    conv.send("M", "C", "brief", manager_message)
    critic_msgs = [
        {"role": "system", "content": CRITIC_SYSTEM},
        {
            "role": "user",
            "content": f"Manager's task:\n{manager_message}\n\nWorker's answer:\n{draft}",
        },
    ]
    critique = conv.ask("critic", critic_msgs, ctx.critic_gen)
    verdict, explicit = parse_verdict(critique)
    conv.send("C", "W", "verdict", critique)
    answer, revisions = draft, 0
    while verdict == "revise" and revisions < ctx.max_revisions:
        revisions += 1
        worker_msgs = worker_msgs + [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": REVISE_INSTRUCTION.format(feedback=critique)},
        ]
        answer = conv.ask("worker", worker_msgs, ctx.gen)
        # a revised answer goes back to the Manager; the Critic does not re-judge
        verdict = "revised"
    conv.send("W", "M", "final", answer)
    return SystemResult(
        prediction=extract_prediction(ctx.task, answer),
        raw_answer=answer,
        conversation=conv,
        verdict=parse_verdict(critique)[0],
        verdict_explicit=explicit,
        revisions=revisions,
    )


@register("freeform")
def run(example: dict, ctx: RunContext) -> SystemResult:
    brief = build_brief(ctx.task, example["record"], ctx.task_options)
    return converse(example, ctx, render_brief(brief))
