"""SKILL.md bytes -> text with LF line endings, and the problems found along the way.

A byte-order mark, UTF-16, bytes that are not UTF-8 and CR line endings are read and reported; NUL bytes mean the
file is binary and is not read as text.
"""

from __future__ import annotations

from orchestrator.skills.parsed import Problem, Severity

_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


class Collector:
    """The problems found in one file, in the order they were found. ``lines_before``: lines of the file before the
    text the parser numbers from 1 (blank lines above the frontmatter), added to every line reported."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.items: list[Problem] = []
        self.lines_before = 0

    def add(
        self,
        code: str,
        message: str,
        severity: Severity,
        *,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        if line is not None:
            line += self.lines_before
        self.items.append(
            Problem(code=code, message=message, severity=severity, path=self.path, line=line, field=field)
        )


def decode_text(data: bytes, problems: Collector) -> str | None:
    """Bytes -> text with LF line endings; None for binary data. Encoding findings go to ``problems``."""
    offset = 0
    if data.startswith(_UTF8_BOM):
        problems.add("encoding_bom", "UTF-8 byte-order mark at byte 0 (removed)", "warning", line=1)
        data, offset = data[3:], 3
    elif data.startswith(_UTF16_BOMS):
        problems.add("encoding_utf16", "UTF-16 text (byte-order mark at byte 0); expected UTF-8", "warning", line=1)
        text = data.decode("utf-16", errors="replace")
        return _normalize_newlines(text, problems)
    if b"\0" in data:
        at = data.index(b"\0") + offset
        problems.add("skill_md_binary", f"binary data: NUL byte at byte offset {at}", "error")
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        at = e.start + offset
        line = data.count(b"\n", 0, e.start) + 1
        text = data.decode("utf-8", errors="replace")
        bad = text.count("\ufffd") - data.decode("utf-8", errors="ignore").count("\ufffd")
        problems.add(
            "invalid_utf8",
            f"not UTF-8: invalid byte 0x{data[e.start]:02x} at byte offset {at} (line {line}); "
            f"{bad} invalid sequence(s) replaced by U+FFFD",
            "warning",
            line=line,
        )
    return _normalize_newlines(text, problems)


def _normalize_newlines(text: str, problems: Collector) -> str:
    if "\r" not in text:
        return text
    first = text.index("\r")
    problems.add(
        "crlf_line_endings",
        f"CRLF/CR line endings (first at line {text.count(chr(10), 0, first) + 1}); read as LF",
        "warning",
        line=text.count("\n", 0, first) + 1,
    )
    return text.replace("\r\n", "\n").replace("\r", "\n")
