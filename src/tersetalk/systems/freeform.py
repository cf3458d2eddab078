"""``freeform``: the baseline. Every message is plain natural language.

Manager -> Worker: the brief. Worker -> Critic: the draft, with the brief
forwarded so the Critic can judge it. Critic -> Worker: the verdict. One revise
round when asked. Worker -> Manager: the final answer.
"""

from __future__ import annotations

from tersetalk.agents.codecs.prose import ProseCodec
from tersetalk.systems import register

register("freeform", codec=ProseCodec)
