"""Reading ``name`` and ``description`` line by line from a frontmatter that plain YAML rejects.

Public skills often carry quoting slips that YAML refuses as a whole: an unquoted ``: `` inside a description
("Use when: ..."), a description starting with ``*`` or ``@``, a closing quote followed by more text. The fields a
library needs are still plain to read: a top-level ``key:`` line, its value on the same line (quoted or not), a
block scalar (``|``/``>``) or indented continuation lines. Only the keys in :data:`RECOVERABLE` are read this way;
everything else in such a frontmatter is ignored (and the parser says so).
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import yaml

#: The keys read line by line: what the library needs to list a skill, and the flag that keeps a skill from
#: being picked on its own (a quoting slip must not make a skill invocable that asked not to be).
RECOVERABLE = ("name", "description", "disable-model-invocation")

_TOP_KEY = re.compile(r"^([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")
_BLOCK = re.compile(r"^[|>][+-]?[1-9]?[+-]?$")
_COMMENT = re.compile(r"[ \t]+#.*$")
# A continuation line that opens a list item or a nested key: the value is a collection, not text.
_NESTED = re.compile(r"^[ \t]+(?:-(?:[ \t]|$)|[\w.-]+:(?:[ \t]|$))")


def recover_fields(yaml_text: str, first_line: int = 2) -> dict[str, tuple[Any, int]]:
    """``{key: (value, line)}`` for the keys of :data:`RECOVERABLE` that can be read line by line.

    ``first_line`` is the file line of the first YAML line. A value that is a list or a mapping (or a flow
    collection such as ``[a, b``) is not text and is left out.
    """
    lines = yaml_text.split("\n")
    found: dict[str, tuple[Any, int]] = {}
    i = 0
    while i < len(lines):
        match = _TOP_KEY.match(lines[i])
        if match is None:
            i += 1
            continue
        key, rest = match.group(1), match.group(2) or ""
        start = i
        i += 1
        while i < len(lines) and (not lines[i].strip() or lines[i][:1] in (" ", "\t")):
            i += 1
        if key not in RECOVERABLE:
            continue
        value = _value(rest, lines[start + 1 : i])
        if value is not None:
            found[key] = (value, start + first_line)
    return found


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
