"""The participants of a conversation: the one table of role letters and names.

Messages name their sender and receiver by letter (``M``, ``W``, ``C``, ``W1``, ``W2``);
records name token columns by letter (``tokens_M_W``) and call logs by role name. The
engine speaks with these participants and the analysis reads their columns, so the
table stands on the ground floor for both.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PARTICIPANTS", "Participant", "participant"]


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
            "(add it to tersetalk.core.participants.PARTICIPANTS)"
        ) from None
