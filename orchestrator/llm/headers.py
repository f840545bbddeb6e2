"""The ``X-Orch-*`` HTTP headers our model client sends and our scenario servers read: their one home.

- ``X-Orch-Purpose``: why the runtime asks (``plan``, ``select``, ``act``, ``reflect``, ``semantic``, ``answer``), for
  tracing and for a scenario step's ``purpose`` check.
- ``X-Orch-Job``: the job a request belongs to, so a server shared by many goals keeps their conversations apart.
- ``X-Orch-Cursor``: where a scripted conversation stands — the one way to resume one. A scenario server answers
  every request with the position after it; the client sends it back with its next request, and the server plays
  from there. A worker keeps it in the goal's saved state between phases: a phase run again after a takeover sends
  the position saved before it, so its steps are played again; a goal's next phase on another worker continues.
  Turns the client answered from its response cache never reach the server, so the client counts them into the
  cursor itself: ``POSITION+PURPOSE=N…`` (:func:`pass_over`), and the server passes over that many steps of each
  purpose before it plays. The count travels wherever the cursor does (a retried request, the next phase, another
  worker), and the next answer's position replaces it.
"""

from __future__ import annotations

import re

PREFIX = "X-Orch-"
"""Every header of ours starts so (a recorder keeps them all)."""
PURPOSE = "X-Orch-Purpose"
JOB = "X-Orch-Job"
CURSOR = "X-Orch-Cursor"

MAX_CURSOR_CHARS = 2000
_PASSES = re.compile(r"^([^+]*)((?:\+[a-z_]{1,20}=\d{1,6}){0,10})$")


def pass_over(cursor: str | None, purpose: str) -> str:
    """``cursor`` with one more turn of ``purpose`` answered from the response cache (None: a conversation whose
    position is not tracked, so the server passes over from where it stands)."""
    position, passes = split_cursor(cursor or "")
    passes[purpose] = min(passes.get(purpose, 0) + 1, 999_999)
    return position + "".join(f"+{p}={n}" for p, n in passes.items())


def passed_over(cursor: str | None) -> int:
    """How many turns ``cursor`` counts as answered from the cache that its server has not yet been told of."""
    return sum(split_cursor(cursor or "")[1].values())


def split_cursor(cursor: str) -> tuple[str, dict[str, int]]:
    """``(position, {purpose: turns answered from the cache since})`` of a cursor; text that does not parse is all
    position (the server judges it)."""
    match = _PASSES.match(cursor[:MAX_CURSOR_CHARS])
    if match is None:
        return cursor[:MAX_CURSOR_CHARS], {}
    passes: dict[str, int] = {}
    for part in filter(None, match.group(2).split("+")):
        purpose, _, count = part.partition("=")
        passes[purpose] = passes.get(purpose, 0) + int(count)
    return match.group(1), passes
