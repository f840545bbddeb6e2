"""Token estimates that need no network.

Budgets count the tokens the model API *reports*. Estimates are only used where no API call is involved: the size of
the L1 index, the L2 cut and the scripted model server's usage figures. ``tiktoken`` would download its encodings on
first use, which fails offline, so the estimate is a documented heuristic instead:

* ASCII text: one token per 4 characters (the usual rule of thumb for English prose and code with BPE tokenizers);
* every non-ASCII character counts as one token (CJK and emoji are usually one or more tokens each), which errs on
  the high side for accented Latin text — the safe side for a limit.
"""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Estimated token count of ``text`` (0 for the empty string)."""
    if not text:
        return 0
    non_ascii = sum(1 for ch in text if ord(ch) > 127)
    ascii_chars = len(text) - non_ascii
    return math.ceil(ascii_chars / CHARS_PER_TOKEN) + non_ascii


def cut_to_tokens(text: str, max_tokens: int) -> tuple[str, int]:
    """Longest prefix of ``text`` whose estimate fits ``max_tokens``; returns (prefix, tokens cut off).

    Cuts at a line boundary when one is near, so a marker appended after the prefix starts on its own line.
    """
    total = estimate_tokens(text)
    if total <= max_tokens:
        return text, 0
    used = 0.0
    end = 0
    for i, ch in enumerate(text):
        cost = 1.0 if ord(ch) > 127 else 1.0 / CHARS_PER_TOKEN
        if used + cost > max_tokens:
            break
        used += cost
        end = i + 1
    newline = text.rfind("\n", 0, end)
    if newline > end * 0.8:
        end = newline + 1
    prefix = text[:end]
    return prefix, total - estimate_tokens(prefix)
