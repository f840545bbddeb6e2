"""Deterministic text helpers used by tools: extractive summaries, diffs, source-line scrubbing."""

from __future__ import annotations

import difflib
import re

_SENTENCE_END = re.compile(r"(?<=[.!?。])\s+")


def summarize_text(text: str, *, max_items: int = 8, max_chars: int = 1200) -> str:
    """An extractive summary: Markdown headings and the first sentence of each paragraph, in order."""
    items: list[str] = []
    paragraph: list[str] = []
    in_code = False

    def flush() -> None:
        if paragraph:
            first = _SENTENCE_END.split(" ".join(paragraph).strip(), maxsplit=1)[0]
            if first:
                items.append(first[:240])
            paragraph.clear()

    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("```") or line.startswith("~~~"):
            in_code = not in_code
            flush()
            continue
        if in_code:
            continue
        if line.startswith("#"):
            flush()
            items.append(line)
        elif not line:
            flush()
        elif line.startswith(("- ", "* ", "+ ")) or re.match(r"^\d+[.)] ", line):
            flush()
            items.append(line[:240])
        else:
            paragraph.append(line)
    flush()
    out: list[str] = []
    size = 0
    for item in items[: max_items * 3]:
        if len(out) >= max_items or size + len(item) > max_chars:
            break
        out.append(item)
        size += len(item) + 1
    omitted = len(items) - len(out)
    if omitted > 0:
        out.append(f"[... {omitted} more items]")
    return "\n".join(out)


def diff_summary(a: str, b: str, *, a_name: str, b_name: str, max_lines: int = 60) -> dict[str, object]:
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), a_name, b_name, lineterm="", n=1))
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    shown = lines[:max_lines]
    if len(lines) > max_lines:
        shown.append(f"[... {len(lines) - max_lines} more diff lines]")
    return {"identical": not lines, "added": added, "removed": removed, "diff": "\n".join(shown)}


def diff_texts(a: str, b: str, a_name: str, b_name: str) -> dict[str, object]:
    """:func:`diff_summary` with positional arguments (the bounded child calls it)."""
    return diff_summary(a, b, a_name=a_name, b_name=b_name)


def scrub_source_lines(text: str, source: str, *, placeholder: str = "<script source line hidden>") -> str:
    """Replace every line of ``text`` that repeats a non-trivial line of ``source`` (e.g. in a traceback).

    Script source must never reach the model; interpreters print source lines in tracebacks.
    """
    if not text or not source:
        return text
    source_lines = {line.strip() for line in source.splitlines() if len(line.strip()) >= 4}
    if not source_lines:
        return text
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and (stripped in source_lines or _contains_source_line(stripped, source_lines)):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}{placeholder}")
        else:
            out.append(line)
    return "\n".join(out)


def _contains_source_line(line: str, source_lines: set[str]) -> bool:
    # Node prints the failing source line verbatim; Python 3.11 adds ^^^ markers on a separate line.
    return len(line) >= 12 and any(len(s) >= 12 and s in line for s in source_lines)


_WORD = re.compile(r"[a-z0-9]+")
ECHO_WORDS = 4
ECHO_SHARE = 0.5


def repeats(text: str, said: str) -> bool:
    """True when ``text`` mostly repeats ``said``: half or more of its runs of ``ECHO_WORDS`` words (case and
    punctuation aside) are in ``said``. How a model's answer that only echoes the runtime's own words is told from
    an answer of its own that happens to share a phrase."""
    mine = _WORD.findall(text.lower())
    theirs = _WORD.findall(said.lower())
    runs = {tuple(theirs[i : i + ECHO_WORDS]) for i in range(len(theirs) - ECHO_WORDS + 1)}
    own = [tuple(mine[i : i + ECHO_WORDS]) for i in range(len(mine) - ECHO_WORDS + 1)]
    return bool(own) and sum(run in runs for run in own) >= ECHO_SHARE * len(own)
