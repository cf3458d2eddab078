"""Each task's topology label: which topology its questions are expected to need.

The topology study (issue 16) scores a router by how often it picks the label of the
example's task. Direct-optimal tasks are answered from what the brief already holds
(a yes/no or one option out of five); collaborative-optimal tasks need a chain of
steps (multi-hop retrieval, arithmetic, code that must pass tests), where a second
Worker and a verify/fix loop can pay for themselves.
"""

from __future__ import annotations

DIRECT = "direct"
CHAIN = "chain"

TOPOLOGY_LABELS: dict[str, str] = {
    "boolq": DIRECT,
    "commonsenseqa": DIRECT,
    "socialiqa": DIRECT,
    "hotpotqa": CHAIN,
    "gsm8k": CHAIN,
    "humaneval": CHAIN,
}


def topology_label(task: str) -> str:
    """The label of ``task`` (``direct`` or ``chain``); a task without one is an error."""
    try:
        return TOPOLOGY_LABELS[task]
    except KeyError:
        known = ", ".join(sorted(TOPOLOGY_LABELS))
        raise KeyError(
            f"task {task!r} has no topology label; the topology study runs on: {known}"
        ) from None
