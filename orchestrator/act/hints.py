"""What to do next, in the skill's own words: for each expected output still missing, the step of the SKILL.md that
makes it. A retry and a Micro-Reflect then say *what* is missing and *which concrete action* the skill gives for it,
instead of only the reason the last attempt ended (a small model re-plans from that far better than from "no new
artifact")."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

MAX_ACTION_CHARS = 300
_NUMBERED = re.compile(r"^\s{0,3}\d{1,2}[.)]\s+")
_BULLET = re.compile(r"^\s{0,3}[-*+]\s+")
_MARKUP = re.compile(r"`|\*\*|__|\[([^\]]*)\]\([^)]*\)")


def next_actions(body: str, missing: Sequence[str], *, limit: int = 3) -> list[str]:
    """For each name in ``missing`` (output paths, ``build/`` or not), the SKILL.md step that mentions it: a numbered
    step first, then a bullet, then any line; without markup, at most ``MAX_ACTION_CHARS``. Names the body never
    mentions give nothing."""
    items = _items(body)
    actions: list[str] = []
    for name in missing:
        wanted = PurePosixPath(name.strip().removeprefix("build/")).name.casefold()
        if not wanted:
            continue
        found = [(rank, text) for rank, text in items if wanted in text.casefold()]
        if found:
            best = min(found, key=lambda item: item[0])[1]
            text = _plain(best)
            if text not in actions:
                actions.append(text)
        if len(actions) >= limit:
            break
    return actions


def _items(body: str) -> list[tuple[int, str]]:
    """The body's list items (with their continuation lines) and other lines, each ranked: 0 a numbered step,
    1 a bullet, 2 anything else. Fenced code is skipped."""
    items: list[tuple[int, str]] = []
    in_code = False
    for line in body.splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code or not line.strip() or line.lstrip().startswith(("#", "|")):
            continue
        if _NUMBERED.match(line):
            items.append((0, line))
        elif _BULLET.match(line):
            items.append((1, line))
        elif line.startswith((" ", "\t")) and items and items[-1][0] < 2:  # a list item's next line
            items[-1] = (items[-1][0], items[-1][1] + " " + line.strip())
        else:
            items.append((2, line))
    return items


def _plain(text: str) -> str:
    text = _NUMBERED.sub("", _BULLET.sub("", text.strip()))
    text = _MARKUP.sub(lambda m: m.group(1) or "", text)
    text = " ".join(text.split())
    return text if len(text) <= MAX_ACTION_CHARS else text[: MAX_ACTION_CHARS - 1] + "…"
