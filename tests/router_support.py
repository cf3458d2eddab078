"""What the router's tests share: the scripted double that answers a routed run's Worker,
Critic and structured calls (control flow only: no number in a table comes from it)."""

from __future__ import annotations

import json


def scripted(messages, gen, schema):
    """A Worker that answers 42 and a Critic that accepts, in prose or under a schema."""
    if schema is not None:
        if schema.__name__ == "CriticReply":
            return json.dumps({"verdict": "A", "note": ""})
        return json.dumps({"plan": [], "need": [], "answer": "42"})
    return "ACCEPT. fine" if "Critic" in messages[0]["content"] else "Answer: 42"
