"""Text widths from the sandbox image's own fonts, and which fonts the image has.

``fontmetrics.json`` is made by ``python -m orchestrator sandbox fonts --write`` (``sandbox-image/font_probe.py``
inside the image: fontconfig's family list, and each Latin family's advance widths measured with Pillow/FreeType
at 1000 units per em). The layout check therefore estimates text as LibreOffice in the sandbox lays it out, on any
host, without the fonts installed there. A family the image lacks is measured with what fontconfig gives instead:
its metric-compatible alias (Calibri -> Carlito, Arial -> Liberation Sans, ...) or DejaVu Sans/Serif/Mono.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from functools import cache
from importlib import resources

# fontconfig's metric aliases (30-metric-aliases.conf) for the faces the image has.
METRIC_ALIASES = {
    "calibri": "Carlito",
    "cambria": "Caladea",
    "arial": "Liberation Sans",
    "helvetica": "Liberation Sans",
    "arial narrow": "Liberation Sans Narrow",
    "helvetica narrow": "Liberation Sans Narrow",
    "times new roman": "Liberation Serif",
    "times": "Liberation Serif",
    "courier new": "Liberation Mono",
    "courier": "Liberation Mono",
}
_SERIF_HINTS = ("serif", "times", "georgia", "garamond", "cambria", "roman", "book", "mincho", "song")
_MONO_HINTS = ("mono", "courier", "consol", "code", "typewriter")


@dataclass(frozen=True)
class Face:
    """One family's metrics in thousandths of an em."""

    family: str
    height: int
    regular: dict[str, int]
    bold: dict[str, int]

    def advance(self, char: str, bold: bool) -> int:
        widths = self.bold if bold else self.regular
        found = widths.get(char)
        if found is not None:
            return found
        if unicodedata.combining(char):
            return 0
        if unicodedata.east_asian_width(char) in ("W", "F"):
            return 1000
        base = unicodedata.normalize("NFD", char)[:1]
        return widths.get(base, widths.get("n", 500))


class FontTable:
    """The image's families (for "is it installed") and the measured faces (for widths)."""

    def __init__(self, data: dict[str, object]) -> None:
        chars = str(data["chars"])
        self.families = {str(name).casefold(): str(name) for name in data["families"]}  # type: ignore[attr-defined]
        self._faces: dict[str, Face] = {}
        for name, raw in dict(data["metrics"]).items():  # type: ignore[call-overload]
            self._faces[name.casefold()] = Face(
                family=name,
                height=int(raw["height"]),
                regular=dict(zip(chars, map(int, raw["regular"].split()), strict=True)),
                bold=dict(zip(chars, map(int, raw["bold"].split()), strict=True)),
            )

    def has(self, family: str) -> bool:
        return family.casefold() in self.families

    def alias(self, family: str) -> str | None:
        """The metric-compatible face fontconfig renders ``family`` with, when the image has that face."""
        target = METRIC_ALIASES.get(family.casefold())
        return target if target is not None and self.has(target) else None

    def face(self, family: str) -> Face:
        """The face text in ``family`` is measured with (the family itself, its alias, or a generic default)."""
        key = family.casefold()
        found = self._faces.get(key)
        if found is not None:
            return found
        alias = self.alias(family)
        if alias is not None and alias.casefold() in self._faces:
            return self._faces[alias.casefold()]
        generic = "DejaVu Sans Mono" if any(h in key for h in _MONO_HINTS) else (
            "DejaVu Serif" if any(h in key for h in _SERIF_HINTS) else "DejaVu Sans"
        )
        return self._faces.get(generic.casefold()) or next(iter(self._faces.values()))


@cache
def font_table() -> FontTable:
    text = resources.files("orchestrator.validate.layout").joinpath("fontmetrics.json").read_text(encoding="utf-8")
    return FontTable(json.loads(text))


def text_width_pt(text: str, face: Face, size_pt: float, bold: bool = False) -> float:
    return sum(face.advance(ch, bold) for ch in text) * size_pt / 1000
