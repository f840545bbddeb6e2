"""JSON cut off at ``max_tokens``: the value a reply began, closed where it stopped.

Small models run away (a 1.5B model repeated one sentence in a plan's ``evaluation`` until the reply hit its cap);
what they wrote before is often complete and usable. :func:`close_cut_json` ends an open string, drops an unfinished
key or value, and closes the open arrays and objects; the caller still validates what comes out (a plan's steps,
a verdict's fields) and says what was cut.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

MAX_CHARS = 200_000
MAX_TRIES = 64
MAX_DEPTH = 128
"""A reply nested deeper than this is not a plan or a verdict: nothing is completed."""
_CLOSE = {"{": "}", "[": "]"}


def close_cut_json(text: str) -> Any | None:
    """The JSON value ``text`` starts (after any prose or a ```json fence), completed where it was cut; None when no
    completion parses. Cheap on hostile input: one scan and at most a few dozen parses of a bounded text."""
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    body = text[start : start + MAX_CHARS]
    for candidate in _candidates(body):
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):
            continue
    return None


def _candidates(body: str) -> list[str]:
    """Completions to try, longest first: the whole text with an open string ended, then the text up to each place
    where a value had just ended (or a container had just opened), each with its open containers closed."""
    stack: list[str] = []
    in_string = escaped = False
    cuts: deque[tuple[int, str]] = deque(maxlen=MAX_TRIES)
    for index, char in enumerate(body):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                cuts.append((index + 1, "".join(_CLOSE[c] for c in reversed(stack))))
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
            if len(stack) > MAX_DEPTH:
                return []
            cuts.append((index + 1, "".join(_CLOSE[c] for c in reversed(stack))))
        elif char in "}]":
            if stack:
                stack.pop()
            cuts.append((index + 1, "".join(_CLOSE[c] for c in reversed(stack))))
            if not stack:
                break
        elif char in "0123456789el":  # the end of a number, true, false or null may be the end of a value
            cuts.append((index + 1, "".join(_CLOSE[c] for c in reversed(stack))))
    closers = "".join(_CLOSE[c] for c in reversed(stack))
    tries = [body + '"' + closers] if in_string else [body.rstrip().rstrip(",") + closers]
    tries += [body[:at] + close for at, close in reversed(cuts)]
    return tries
