"""How much room a text frame's paragraphs need: greedy line breaking with the image's font metrics.

An estimate of what LibreOffice (and PowerPoint) do: words break at spaces, a word longer than the line breaks
inside, CJK text breaks between any two characters, each word is as wide as its characters' advances in its own
face, and each line is as tall as the paragraph's largest size times ``LINE_EM`` times its line spacing; space
before a paragraph counts from the second paragraph on. Kerning and ligatures are left out (a few per cent at most).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from orchestrator.validate.layout.fonts import FontTable, text_width_pt
from orchestrator.validate.layout.pptx_model import Para

_PIECE = re.compile(r"\n|[^\S\n]+|[^\s]+")
# A line at 100 % spacing is 1.2 em in PowerPoint and in LibreOffice's rendering of a .pptx, whatever the face's own
# ascent, descent and gap (measured in the sandbox for DejaVu, Carlito, Noto Sans, Liberation, Source Sans 3, Lato
# and Noto Sans CJK alike).
LINE_EM = 1.2


@dataclass(frozen=True)
class Extent:
    height_pt: float
    width_pt: float
    """The widest line."""
    lines: int


def _is_wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in ("W", "F")


def _pieces(text: str) -> list[str]:
    out: list[str] = []
    for piece in _PIECE.findall(text):
        if any(_is_wide(ch) for ch in piece):
            out.extend(piece)  # CJK text may break after any character
        else:
            out.append(piece)
    return out


def measure(paras: list[Para], table: FontTable, width_pt: float, *, wrap: bool = True, scale: float = 1.0,
            line_reduction: float = 0.0) -> Extent:
    """The height and widest line of ``paras`` set in a frame ``width_pt`` wide (after insets)."""
    height = widest = 0.0
    lines = 0
    for number, para in enumerate(paras):
        available = max(1.0, width_pt - para.margin_pt)
        size = max((r.size_pt for r in para.runs if r.text.strip()), default=para.empty_size_pt) * scale
        line = para.line_pt if para.line_pt is not None else (
            size * LINE_EM * (para.line_pct or 1.0) * (1 - line_reduction))
        count, para_widest = _lines(para, table, available, wrap, scale)
        lines += count
        widest = max(widest, para_widest)
        height += count * line + _space(para.after_pt, size)
        if number:
            height += _space(para.before_pt, size)
    return Extent(height_pt=height, width_pt=widest, lines=lines)


def _space(value: float, size: float) -> float:
    return -value * size if value < 0 else value


def _lines(para: Para, table: FontTable, available: float, wrap: bool, scale: float) -> tuple[int, float]:
    count, line, widest = 1, 0.0, 0.0
    for run in para.runs:
        face = table.face(run.font or "Liberation Sans")
        size = run.size_pt * scale
        for piece in _pieces(run.text):
            if piece == "\n":
                widest, line, count = max(widest, line), 0.0, count + 1
                continue
            width = text_width_pt(piece, face, size, run.bold)
            if piece.isspace():
                line += width
                continue
            if not wrap or line + width <= available or line == 0.0:
                line += width
                if wrap and line > available:  # one word wider than the line: broken inside the word
                    extra = int(line // available)
                    count += extra
                    widest = max(widest, available)
                    line -= extra * available
                continue
            widest = max(widest, line)
            count += 1
            line = width
    return count, max(widest, line)
