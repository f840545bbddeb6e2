"""Paging through long text: a window of characters, and a cut marker that names the exact call for the rest.

Offsets count characters (Unicode code points) of the decoded text, so a page never splits a character, whatever
its UTF-8 length. A page ends at a line break when one lies in the last fifth of the window; otherwise it ends
inside the line (a minified file has no line breaks) and the next page starts exactly there. Every page but the
last carries ``next_offset`` and a marker with the call that reads on; following the markers from offset 0 reads
every character once, so nothing is unreachable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from orchestrator.prompts import render_prompt
from orchestrator.tokens import CHARS_PER_TOKEN

MAX_PAGE_CHARS = 200_000


@dataclass(frozen=True)
class Page:
    """``text[offset:end]`` of a text of ``total`` characters; ``next_offset`` is None on the last page."""

    text: str
    offset: int
    end: int
    total: int

    @property
    def next_offset(self) -> int | None:
        return self.end if self.end < self.total else None


def page_of(text: str, *, offset: int = 0, limit_chars: int | None = None, max_tokens: int) -> Page:
    """The page of ``text`` starting at ``offset``: at most ``limit_chars`` characters and ``max_tokens`` tokens.

    Always at least one character when ``offset`` is before the end (so paging always moves on). Raises
    ``ValueError`` for an offset past the end.
    """
    total = len(text)
    if offset < 0 or offset > total or (offset == total and total > 0):
        raise ValueError(f"offset {offset} is outside the text ({total} characters; offsets 0..{max(total - 1, 0)})")
    window = min(limit_chars or MAX_PAGE_CHARS, MAX_PAGE_CHARS)
    end = min(total, offset + max(1, window))
    end = offset + _fit_tokens(text[offset:end], max_tokens)
    if end < total:
        newline = text.rfind("\n", offset, end)
        if newline >= 0 and newline + 1 - offset > (end - offset) * 0.8:
            end = newline + 1
    return Page(text=text[offset:end], offset=offset, end=end, total=total)


def _fit_tokens(chunk: str, max_tokens: int) -> int:
    """How many leading characters of ``chunk`` fit ``max_tokens`` (the heuristic of ``orchestrator.tokens``)."""
    budget = max(1, max_tokens) * CHARS_PER_TOKEN  # in quarter tokens: ASCII costs 1, anything else 4
    used = 0
    for i, ch in enumerate(chunk):
        used += 1 if ord(ch) < 128 else CHARS_PER_TOKEN
        if used > budget:
            return max(1, i)
    return len(chunk)


def next_call(tool: str, path: str, offset: int, limit: int | None = None) -> dict[str, object]:
    """The tool call that reads the page starting at ``offset``, as the model would write it."""
    args: dict[str, object] = {"path": path, "offset": offset}
    if limit is not None:
        args["limit"] = limit
    return {"tool": tool, "arguments": args}


def cut_marker(page: Page, call: dict[str, object]) -> str:
    """The line appended to a page that is not the last: what was shown, what is left, which call reads on."""
    assert page.next_offset is not None
    left = page.total - page.end
    arguments = json.dumps(call["arguments"], ensure_ascii=False)
    marker = render_prompt(
        "notes/page_cut", start=page.offset, end=page.end, total=page.total, left=left, tool=call["tool"],
        arguments=arguments,
    )
    return "\n" + marker
