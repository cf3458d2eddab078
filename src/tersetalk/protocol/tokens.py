"""The default token counter of the protocol package: an approximation.

Caps are measured in tokens, but the protocol must not depend on a tokenizer
library. ``approx_token_count`` counts words and punctuation marks, which tracks
BPE token counts of English text roughly (it undercounts rare long words and
overcounts nothing-but-punctuation). Production code passes the model's real
counter (e.g. ``tersetalk.core.tokens.count_tokens``) wherever ``count_tokens`` is taken.
"""

from __future__ import annotations

import re
from collections.abc import Callable

TokenCounter = Callable[[str], int]

_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def approx_token_count(text: str) -> int:
    """Words plus punctuation marks: an approximation, used only as the default."""
    return sum(1 for _ in _TOKEN_RE.finditer(text))
