"""The one JSON value a model's answer holds, however it was wrapped.

Asked for "a JSON object and nothing else", small models still say "Sure! Here is the plan:" before a ```json fence,
add a note after the object, or write a Python dict (single quotes, ``True``/``None``). A plan, a verdict or scores
written that way are the model's answer all the same; asking again costs a whole request (minutes on a local
server) and the second answer is often wrapped the same way. :func:`json_in_reply` finds the value: the whole text,
else a fenced block, else the first complete JSON value in the text, else the first Python literal of dicts, lists,
strings, numbers and booleans. Text with none of these raises ``ValueError`` with the JSON error of the whole text.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from typing import Any

MAX_CHARS = 200_000
"""Only the start of an answer is searched (answers are bounded by ``max_tokens`` anyway)."""
MAX_STARTS = 32
"""At most this many ``{``/``[`` positions are tried as the start of a value (hostile text stays cheap)."""
MAX_LITERAL_CHARS = 64_000
THINKING = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[^\n]*\n(.*?)```", re.DOTALL)
_PYTHON_WORDS = re.compile(r"\b(True|False|None)\b")
_JSON_WORDS = {"True": "true", "False": "false", "None": "null"}


def json_in_reply(text: str) -> Any:
    """The JSON value of an answer (see the module's doc); ``json.JSONDecodeError`` (a ``ValueError``) of the whole
    text when there is none."""
    text = THINKING.sub("", text[:MAX_CHARS])  # what a reasoning model thought first is not its answer
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        first = error
    for match in _FENCE.finditer(text):
        if match.group(1).lower() not in ("", "json", "json5", "javascript", "js", "python", "py"):
            continue
        found = _value_in(match.group(2))
        if found is not _NOTHING:
            return found
    found = _value_in(text)
    if found is not _NOTHING:
        return found
    if isinstance(first, json.JSONDecodeError):
        raise first
    raise ValueError(str(first))


class _Nothing:
    pass


_NOTHING: Any = _Nothing()


def _value_in(text: str) -> Any:
    """The first JSON value (then Python literal) that starts at a ``{`` or ``[`` of ``text``."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        pass
    decoder = json.JSONDecoder(strict=False)
    found: list[Any] = []
    start, tried = _next_start(text, 0), 0
    while start is not None and tried < MAX_STARTS:
        tried += 1
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            closing = _balanced_end(text, start)
            if closing is None:  # never closed: whatever follows is inside it, not a value of its own
                break
            value, end = _repaired(text[start:closing]), closing
        if isinstance(value, dict | list) and value:
            found.append(value)
        start = _next_start(text, end if value is not _NOTHING else start + 1)
    # an object is the answer; a list only when there is no object ("see [1]" before the answer is not it)
    return next((v for v in found if isinstance(v, dict)), found[0] if found else _NOTHING)


def _next_start(text: str, at: int) -> int | None:
    starts = [i for i in (text.find("{", at), text.find("[", at)) if i >= 0]
    return min(starts) if starts else None


def loads_lenient(text: str) -> Any:
    """``text`` as one JSON value, with what small models get wrong forgiven: raw line breaks inside strings, trailing
    commas, Python's quotes and constants. ``json.JSONDecodeError`` of the strict reading when none of that helps."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        first = error
    except RecursionError as error:
        raise ValueError("nested too deeply") from error
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and _balanced_end(stripped, 0) == len(stripped):
        value = _repaired(stripped)
        if value is not _NOTHING:
            return value
    raise first


def value_at(text: str, start: int) -> tuple[Any, int] | None:
    """The value whose ``{``/``[`` is at ``start``, read leniently (see :func:`loads_lenient`), and where it ends."""
    end = _balanced_end(text, start)
    if end is None:
        return None
    value = _repaired(text[start:end])
    return None if value is _NOTHING else (value, end)


def _repaired(source: str) -> Any:
    if len(source) > MAX_LITERAL_CHARS:
        return _NOTHING
    try:
        return json.loads(_without_trailing_commas(source), strict=False)
    except (ValueError, RecursionError):
        pass
    try:
        value = ast.literal_eval(source)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        if not _PYTHON_WORDS.search(source):
            return _NOTHING
        try:  # JSON-ish text with Python's constants
            value = json.loads(_PYTHON_WORDS.sub(lambda m: _JSON_WORDS[m[1]], source), strict=False)
        except (ValueError, RecursionError):
            return _NOTHING
    try:
        return json.loads(json.dumps(value))  # only JSON data (no sets, bytes, complex numbers, tuples as such)
    except (TypeError, ValueError, RecursionError):
        return _NOTHING


def _scan(text: str, quotes: str, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, str, bool]]:
    """``(index, char, inside)`` for each character, ``inside`` true within a string quoted by one of ``quotes``
    (backslash escapes respected; the quotes themselves count as outside)."""
    quote, escaped = "", False
    for index in range(start, len(text) if stop is None else min(len(text), stop)):
        char = text[index]
        inside = bool(quote) and not (char == quote and not escaped)
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in quotes:
            quote = char
        yield index, char, inside


def _without_trailing_commas(source: str) -> str:
    """``{"a": 1,}`` → ``{"a": 1}``: commas right before a closing bracket, outside strings, dropped."""
    out: list[str] = []
    for _, char, inside in _scan(source, '"'):
        if not inside and char in "}]":
            while out and out[-1].isspace():
                out.pop()
            if out and out[-1] == ",":
                out.pop()
        out.append(char)
    return "".join(out)


def _balanced_end(text: str, start: int) -> int | None:
    """Where the bracket opened at ``start`` closes (quotes of either kind respected), or None."""
    depth = 0
    for index, char, inside in _scan(text, "'\"", start, start + MAX_LITERAL_CHARS):
        if inside:
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
    return None
