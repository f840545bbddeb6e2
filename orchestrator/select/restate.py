"""The goal restated by the model: one line in English naming the task a tool must do, searched beside the goal.

The index reads a goal with a small sentence encoder and dictionaries. The user's model reads it better: it
translates what the dictionaries lack ("새벽 3시에 자꾸 깨고", everyday Korean) and names the task behind a
situation ("the notetaker bot was recording it": meeting transcripts). Asked first, with a few examples, for one
short line, its restatement is ranked as a second query and the two scores are added, so a restatement that
misreads the goal costs ranks, not the skills the goal's own words find (measured in
docs/concepts/selection-measurements.md). ``selection.restate`` says for which goals, when retrieval cuts the
library.

What the model answers is text from outside: only its first line is used, cut to :data:`MAX_CHARS`, and a model
that fails leaves the goal ranked by its own words.
"""

from __future__ import annotations

import re
from functools import cache

from orchestrator.errors import ModelError
from orchestrator.llm.interface import ChatModel, Message
from orchestrator.logs import get_logger
from orchestrator.prompts import load_prompt
from orchestrator.select import european

_log = get_logger("orchestrator.select")

#: The longest restatement searched (characters): a line names a task; more is a model running on.
MAX_CHARS = 300
_ARROW = "→"
_WRAPPING = " \t\"'`*>→-:"


@cache
def _examples() -> tuple[tuple[str, str], ...]:
    """``(request, restatement)`` pairs from ``prompts/restate_examples.md`` (a request line, then ``→ line``)."""
    pairs = []
    for block in load_prompt("restate_examples").split("\n\n"):
        request, _, restated = block.strip().partition(f"\n{_ARROW}")
        if request.strip() and restated.strip():
            pairs.append((request.strip(), restated.strip()))
    return tuple(pairs)


def restate_request(goal: str) -> list[Message]:
    messages = [Message(role="system", content=load_prompt("restate_system"))]
    for request, restated in _examples():
        messages += [Message(role="user", content=request), Message(role="assistant", content=restated)]
    return [*messages, Message(role="user", content=goal)]


def first_line(reply: str) -> str:
    """The reply's first line with text, without control characters, or quotes and markup around it, cut to
    :data:`MAX_CHARS`."""
    for line in reply.splitlines():
        printable = "".join(c for c in re.sub(r"\s+", " ", line) if c.isprintable())
        text = printable.strip(_WRAPPING)
        if text:
            return text[:MAX_CHARS].strip()
    return ""


#: Below this share of Latin letters a goal is in another script (Chinese, Japanese, Korean, Cyrillic, ...).
LATIN_SHARE = 0.7


def written_in_english(goal: str) -> bool:
    """False for a goal mostly in another script, or in a European language the index reads
    (:func:`orchestrator.select.european.language`); True otherwise (English, or a language nothing here tells)."""
    letters = [c for c in goal if c.isalpha()]
    if not letters:
        return True
    if sum(1 for c in letters if c < "\u0250") < LATIN_SHARE * len(letters):
        return False
    return european.language(goal) is None


def should_restate(goal: str, mode: str) -> bool:
    """Whether ``selection.restate`` (``off`` | ``other-languages`` | ``always``) asks for ``goal`` to be restated."""
    return mode == "always" or (mode == "other-languages" and not written_in_english(goal))


def restated_goal(goal: str, model: ChatModel) -> str | None:
    """The model's one-line English restatement of ``goal``; None when it fails or says nothing."""
    try:
        reply = model.complete(restate_request(goal), purpose="select")
    except ModelError as e:
        _log.warning("select.restate_failed", model=model.name, error=str(e), reason="the goal is ranked by its words")
        return None
    return first_line(reply.content or "") or None
