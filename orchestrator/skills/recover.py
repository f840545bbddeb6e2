"""Reading ``name`` and ``description`` line by line from a frontmatter that plain YAML rejects.

Public skills often carry quoting slips that YAML refuses as a whole: an unquoted ``: `` inside a description
("Use when: ..."), a description starting with ``*`` or ``@``, a closing quote followed by more text. The fields a
library needs are still plain to read: a top-level ``key:`` line, its value on the same line (quoted or not), a
block scalar (``|``/``>``) or indented continuation lines. A plain ``name`` or ``description`` whose continuation
lines are not indented (a Markdown list pasted under ``description: **Features:**``) runs on to the next top-level
``key:`` line (or a code fence), at most :data:`LOOSE_LINES` lines and :data:`LOOSE_CHARS` characters. Only the keys in
:data:`RECOVERABLE` are read this way; everything else in such a frontmatter is ignored (and the parser says so).
"""

from __future__ import annotations

import re
import textwrap
from typing import Any, NamedTuple

import yaml

#: The keys read line by line: what the library needs to list a skill, and the flag that keeps a skill from
#: being picked on its own (a quoting slip must not make a skill invocable that asked not to be).
RECOVERABLE = ("name", "description", "disable-model-invocation")

#: The keys whose plain value may run on over lines that are not indented.
LOOSE_KEYS = ("name", "description")
LOOSE_LINES = 64
"""Lines after the key's line read as its unindented continuation; later ones are not part of the value."""
LOOSE_CHARS = 4096
"""Characters the unindented continuation adds to the value at most."""

# The value is stripped in code: a lazy value before ``[ \t]*$``, or ``[ \t]+#`` tried at every space of a run, takes
# time quadratic in the spaces of a line (a 300 KB line of spaces held `skills list` for minutes).
_TOP_KEY = re.compile(r"^([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t](.*))?$")
_BLOCK = re.compile(r"^[|>][+-]?[1-9]?[+-]?$")
_COMMENT = re.compile(r"(?<![ \t])[ \t]+#.*$")
# Where an unindented continuation stops: a line that starts like a top-level key (``key:`` then any whitespace,
# U+00A0 included, or the end), a line that starts like a recoverable key even without a space after the colon
# (``disable-model-invocation:true``: the flag is never swallowed), or a code fence (a pasted body, not a value).
_LOOSE_STOP = re.compile(
    r"^(?:[A-Za-z_][\w.-]*[ \t]*:(?:\s|$)|(?i:name|description|disable-model-invocation)[ \t]*:|[ \t]*(?:```|~~~))"
)
# A continuation line that opens a list item or a nested key: the value is a collection, not text.
_NESTED = re.compile(r"^[ \t]+(?:-(?:[ \t]|$)|[\w.-]+:(?:[ \t]|$))")


class Recovered(NamedTuple):
    """One key read line by line: its value, its line, and the last line of an unindented continuation (None if
    the value has none)."""

    value: Any
    line: int
    loose_to: int | None = None


def recover_fields(yaml_text: str, first_line: int = 2) -> dict[str, Recovered]:
    """The keys of :data:`RECOVERABLE` that can be read line by line.

    ``first_line`` is the file line of the first YAML line. A value that is a list or a mapping (or a flow
    collection such as ``[a, b``) is not text and is left out.
    """
    lines = yaml_text.split("\n")
    found: dict[str, Recovered] = {}
    i = 0
    while i < len(lines):
        match = _TOP_KEY.match(lines[i])
        if match is None:
            i += 1
            continue
        key, rest = match.group(1), (match.group(2) or "").strip(" \t")
        start = i
        i += 1
        while i < len(lines) and (not lines[i].strip() or lines[i][:1] in (" ", "\t")):
            i += 1
        if key not in RECOVERABLE:
            continue
        value = _value(rest, lines[start + 1 : i])
        loose_to = None
        if key in LOOSE_KEYS and isinstance(value, str) and _plain(rest):
            end = _loose_end(lines, start, i)
            tail = _loose_text(lines[i:end])
            if tail:
                value, loose_to = f"{value} {tail}", _last_text(lines, end) + first_line
            i = end
        if value is not None:
            found[key] = Recovered(value, start + first_line, loose_to)
    return found


def writes_key(yaml_text: str, key: str) -> bool:
    """Whether a top-level ``key:`` line is written, readable or not (as :func:`recover_fields` tells keys)."""
    return any((m := _TOP_KEY.match(line)) is not None and m.group(1) == key for line in yaml_text.split("\n"))


def _plain(rest: str) -> bool:
    """A value written on the key's line that is plain text: not quoted, not a block scalar, not a collection."""
    return bool(rest) and rest[:1] not in ("'", '"', "[", "{") and not _BLOCK.match(rest)


def _loose_end(lines: list[str], start: int, i: int) -> int:
    """The index after the unindented continuation that begins at ``i``: the next line that starts like a key or
    opens a code fence, the end, or :data:`LOOSE_LINES` lines after the key's line."""
    limit = min(len(lines), start + 1 + LOOSE_LINES)
    while i < limit and _LOOSE_STOP.match(lines[i]) is None:
        i += 1
    return i


def _loose_text(lines: list[str]) -> str:
    """The lines joined by spaces (blank ones and YAML comments left out), cut at :data:`LOOSE_CHARS`."""
    parts, size = [], 0
    for line in lines:
        text = line.strip()
        if text and not text.startswith("#") and size < LOOSE_CHARS:
            parts.append(text[: LOOSE_CHARS - size])
            size += len(parts[-1]) + 1
    return " ".join(parts)


def _last_text(lines: list[str], end: int) -> int:
    """The index of the last line before ``end`` that is not blank."""
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    return end - 1


def _value(rest: str, more: list[str]) -> Any:
    if _BLOCK.match(rest):
        return _block(rest, more)
    if rest[:1] in ("[", "{") or (not rest and any(_NESTED.match(line) for line in more)):
        return None
    if rest[:1] in ('"', "'"):
        return _quoted(" ".join([rest, *(line.strip() for line in more if line.strip())]))
    text = " ".join(part for part in [_COMMENT.sub("", rest), *(line.strip() for line in more)] if part)
    if text in ("true", "false", "True", "False"):
        return text.lower() == "true"
    return text or None


def _block(indicator: str, more: list[str]) -> str | None:
    body = textwrap.dedent("\n".join(more)).strip("\n")
    if not body.strip():
        return None
    if indicator.startswith("|"):
        return body
    # Folded: lines of a paragraph join with spaces; a blank line stays a line break.
    return "\n".join(" ".join(p.split("\n")) for p in body.split("\n\n"))


def _quoted(text: str) -> str:
    """A quoted scalar up to its closing quote (YAML's escapes applied); text after it is a slip and dropped."""
    quote, i = text[0], 1
    while i < len(text):
        if text[i] == "\\" and quote == '"':
            i += 2
            continue
        if text[i] == quote:
            if quote == "'" and text[i + 1 : i + 2] == "'":
                i += 2
                continue
            break
        i += 1
    try:
        value = yaml.safe_load(text[: i + 1])
    except yaml.YAMLError:
        value = None
    return value if isinstance(value, str) else text[1:i].strip()
