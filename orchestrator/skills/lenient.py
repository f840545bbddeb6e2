"""What a sloppy SKILL.md plainly means: its delimiter lines, a closer glued to the body, the body's first paragraph,
and whether it asks not to be picked.

Mirrors and editors damage public SKILL.md files in a few recurring ways: a no-break space (U+00A0) or an
ideographic space (U+3000) after ``---``, a newline lost after the closing ``---`` (``---# Title``), a frontmatter
without ``description``. The parser reads through each of them and reports it as a warning. Every reading here is
bounded (lines scanned, characters kept) and none uses a pattern that backtracks on a long line. Characters that
YAML refuses in a frontmatter are refused the same way in a value read from elsewhere.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import yaml

#: Whitespace that may follow a delimiter: space, tab and the Unicode space separators (category Zs).
_SPACE_CLASS = "[ \t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]"
_DELIMITER = re.compile(rf"^---({_SPACE_CLASS}*)$")
_CLOSER = re.compile(rf"^(?:---|\.\.\.)({_SPACE_CLASS}*)$")
#: The words that set a flag to true when YAML reads them as text (quoted, or ``!!str``); YAML 1.1 reads them unquoted.
TRUE_WORDS = ("true", "yes", "on")
#: What may come before a top-level key without indenting it: spaces YAML does not count as indentation (U+00A0 and
#: the other space separators) and characters that do not show (zero-width, word joiner, a byte-order mark).
_INVISIBLE = "\u00a0\u1680\u202f\u205f\u2060\u3000\ufeff" + "".join(map(chr, range(0x2000, 0x200E)))
#: ``disable-model-invocation`` set to true however it is spelt (quotes, case, Unicode spaces, YAML 1.1 yes/on).
_ASKS_NOT_TO_BE_PICKED = re.compile(
    rf"^[{_INVISIBLE}]*disable-model-invocation{_SPACE_CLASS}*:{_SPACE_CLASS}*([\"']?)(?:{'|'.join(TRUE_WORDS)})\1"
    rf"{_SPACE_CLASS}*(?:#.*)?$",
    re.IGNORECASE,
)
#: Where YAML breaks a line besides LF (NEL, U+2028, U+2029): what follows is a line of its own to YAML.
_YAML_BREAKS = re.compile("[\x85\u2028\u2029]")
#: What YAML's reader refuses in a frontmatter (control characters and the like).
_NOT_YAML_PRINTABLE: re.Pattern[str] = yaml.reader.Reader.NON_PRINTABLE

PARAGRAPH_SCAN_LINES = 200
"""Body lines looked at for a first paragraph; one that starts later is not found."""
PARAGRAPH_SCAN_CHARS = 8192
"""Characters of a paragraph gathered before it is cleaned and cut (a 200,000-character line is cut here)."""
DESCRIPTION_FROM_BODY_MAX = 1024

_FENCES = ("```", "~~~")
_NOT_PROSE = ("#", "|", "![", "[![", "<", ">")
_LIST_ITEM = re.compile(r"^(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_RULE_CHARS = frozenset("-*_=")
_LINK = re.compile(r"\[([^\[\]\n]{1,200})\]\([^()\s]{0,500}\)")
_EMPHASIS = re.compile(r"\*{2,3}|_{2,3}|`+")


@dataclass(frozen=True)
class Note:
    """A warning for the parser to report: what was read leniently, and on which line of SKILL.md."""

    code: str
    message: str
    line: int | None


@dataclass(frozen=True)
class Delimiter:
    """A delimiter line: its 0-based index, the whitespace after the dashes, and, for a closer whose newline was
    lost, the rest of the line (the body's first line)."""

    index: int
    spaces: str = ""
    glued: str = ""


def opener(line: str) -> Delimiter | None:
    """Line 1 as the opening ``---`` (trailing whitespace of any kind allowed), or None."""
    match = _DELIMITER.match(line)
    return Delimiter(0, match.group(1)) if match else None


def blank_lines_before_opener(lines: list[str]) -> int:
    """How many whitespace-only lines come before an opening ``---`` (an editor's or a mirror's leading newline);
    0 when the file starts with one, or when its first line with text is not one."""
    for i, line in enumerate(lines):
        if line.strip():
            return i if i and opener(line) is not None else 0
    return 0


def blank_lines_note(blank: int) -> Note:
    plural = "s" if blank > 1 else ""
    message = f"{blank} blank line{plural} before the opening '---' on line {blank + 1} (skipped)"
    return Note("frontmatter_after_blank_lines", message, blank + 1)


def closer(lines: list[str], start: int = 1) -> Delimiter | None:
    """The first line after line 1 (from index ``start`` on) that closes the frontmatter: ``---`` or ``...`` with
    only whitespace after it, or ``---`` glued to the body's first line (``---# Title``). ``----`` and a table rule
    (``---|---``) are not closers; neither is ``--- text`` (a space then text, which YAML reads as a new document)."""
    for i in range(start, len(lines)):
        line = lines[i]
        if not line.startswith(("---", "...")):
            continue
        match = _CLOSER.match(line)
        if match:
            return Delimiter(i, match.group(1))
        if line.startswith("---") and not (line[3] in "-|" or line[3].isspace()):
            return Delimiter(i, glued=line[3:])
    return None


def odd_space(spaces: str) -> str | None:
    """The first character of ``spaces`` that is neither a space nor a tab, named (``U+00A0 NO-BREAK SPACE``)."""
    for ch in spaces:
        if ch not in " \t":
            return f"U+{ord(ch):04X} {unicodedata.name(ch, 'SPACE')}"
    return None


def delimiter_notes(opening: Delimiter, closing: Delimiter) -> list[Note]:
    """Warnings for delimiter lines read leniently: odd whitespace after the dashes, a joined closer."""
    notes = []
    for delimiter, role in ((opening, "opening"), (closing, "closing")):
        odd = odd_space(delimiter.spaces)
        if odd is not None:
            line = delimiter.index + 1
            message = f"line {line} is '---' followed by {odd}; read as the frontmatter's {role} line"
            notes.append(Note("frontmatter_delimiter_whitespace", message, line))
    if closing.glued:
        line = closing.index + 1
        shown = closing.glued if len(closing.glued) <= 40 else closing.glued[:37] + "..."
        message = (
            f"line {line} is the closing '---' joined to {shown!r} (a lost newline); read as the closing line, "
            "the rest as the body's first line"
        )
        notes.append(Note("frontmatter_closer_joined", message, line))
    return notes


def flag_scan_end(lines: list[str], closing: Delimiter) -> int:
    """Where to stop looking for ``disable-model-invocation``: the closer, or for a joined closer the next closer of
    either kind (what the frontmatter would have been had the joined line not been taken as the closer)."""
    later = closer(lines, closing.index + 1) if closing.glued else None
    return later.index if later is not None else closing.index


def name_from_folder(folder_name: str | None, line: int | None) -> Note | None:
    """The warning for a name read from the skill folder, or None when the folder's name cannot stand in (unknown,
    longer than a file name can be, or holding characters YAML refuses)."""
    if not folder_name or len(folder_name) > 255 or not printable(folder_name):
        return None
    where = f"line {line} leaves 'name' empty" if line else "no 'name' in the frontmatter"
    return Note("name_from_folder", f"{where}; read the skill folder's name {folder_name!r} as the name", line)


def description_from_body(body: str, body_line: int, key_line: int | None) -> tuple[str, Note] | None:
    """The body's first paragraph as the description and its warning, or None when the body has none."""
    found = first_paragraph(body)
    if found is None:
        return None
    text, offset = found
    at = body_line + offset
    where = f"line {key_line} leaves 'description' empty" if key_line else "no 'description' in the frontmatter"
    message = f"{where}; read the body's first paragraph (line {at}, {len(text)} characters) as the description"
    return text, Note("description_from_body", message, at)


def asks_not_to_be_picked(lines: list[str]) -> int | None:
    """The 0-based index of the first top-level line that sets ``disable-model-invocation`` to true in any
    spelling, or None. Every line is looked at, and each part of it after a line break YAML knows (U+2028, NEL): a
    bound here could let a skill that asked not to be picked be picked."""
    for i, line in enumerate(lines):
        for part in _YAML_BREAKS.split(line):
            if part.lstrip(_INVISIBLE)[:1] in ("d", "D") and _ASKS_NOT_TO_BE_PICKED.match(part):
                return i
    return None


def printable(text: str) -> bool:
    """True when YAML would accept every character of ``text`` in a frontmatter."""
    return _NOT_YAML_PRINTABLE.search(text) is None


def first_paragraph(body: str) -> tuple[str, int] | None:
    """The body's first paragraph of prose as one line of text, and its 0-based line in ``body``; None if there
    is none in the first :data:`PARAGRAPH_SCAN_LINES` lines.

    Headings, blank lines, code fences, HTML comments and tags, tables, images, block quotes, list items and rules
    are skipped; a paragraph underlined as a heading (``===``) is skipped too. Link targets and emphasis markers
    (``**``, ``__``, backticks) are dropped, and the text is cut to :data:`DESCRIPTION_FROM_BODY_MAX` characters.
    A paragraph holding a character YAML refuses, or nothing but characters that do not show, is passed over.
    """
    lines = body.split("\n", PARAGRAPH_SCAN_LINES)[:PARAGRAPH_SCAN_LINES]
    fence = comment = False
    parts: list[str] = []
    start, size = -1, 0
    for i, raw in enumerate([*lines, ""]):
        line = raw.strip()
        if fence or comment:
            fence = fence and not line.startswith(_FENCES)
            comment = comment and "-->" not in line
            continue
        if start >= 0 and (not line or _rule(line) or _not_prose(line)):
            text = _cleaned(" ".join(parts)) if not _rule(line) or line[0] not in "=-" else None
            if text:
                return text, start
            start, size = -1, 0
            parts = []
        if not line or _rule(line):
            continue
        if line.startswith(_FENCES):
            fence = True
        elif line.startswith("<!--"):
            comment = "-->" not in line[4:]
        elif not _not_prose(line):
            if start < 0:
                start = i
            if size < PARAGRAPH_SCAN_CHARS:
                parts.append(line[: PARAGRAPH_SCAN_CHARS - size])
                size += len(parts[-1]) + 1
    return None


def _rule(line: str) -> bool:
    """A thematic break or a heading underline (``---``, ``***``, ``===``, ``==``), spaces allowed between."""
    marks = set(line) - {" "}
    return len(marks) == 1 and marks <= _RULE_CHARS and (len(line) >= 3 or marks == {"="})


def _not_prose(line: str) -> bool:
    return line.startswith(_NOT_PROSE) or line.startswith(_FENCES) or _LIST_ITEM.match(line) is not None


def _cleaned(text: str) -> str | None:
    if not printable(text):
        return None
    text = " ".join(_EMPHASIS.sub("", _LINK.sub(r"\1", text)).split())
    if not text.strip(_INVISIBLE):  # zero-width characters only: nothing a reader (or the model) would see
        return None
    if len(text) > DESCRIPTION_FROM_BODY_MAX:
        cut = text[: DESCRIPTION_FROM_BODY_MAX - 1]
        space = cut.rfind(" ")
        text = (cut[:space] if space > DESCRIPTION_FROM_BODY_MAX - 120 else cut).rstrip() + "\u2026"
    return text or None
