"""Independent oracles for the bundled skills' outputs: CSV totals computed here, spreadsheet formulas evaluated
here (the subset the skills write: cell and range references, SUM/AVERAGE/MIN/MAX/COUNT, + - * /)."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SKILLS = REPO / "skills"
SCENARIOS = REPO / "ops" / "scenarios"

_REFERENCE = re.compile(r"\b([A-Z]{1,3}\d+)(?::([A-Z]{1,3}\d+))?\b")
_FUNCTIONS = {
    "SUM": lambda *a: math.fsum(_numbers(a)),
    "AVERAGE": lambda *a: math.fsum(_numbers(a)) / len(_numbers(a)),
    "MIN": lambda *a: min(_numbers(a)),
    "MAX": lambda *a: max(_numbers(a)),
    "COUNT": lambda *a: len(_numbers(a)),
}


def _numbers(args: tuple[Any, ...]) -> list[float]:
    out: list[float] = []
    for arg in args:
        items = arg if isinstance(arg, list) else [arg]
        out += [x for x in items if isinstance(x, (int, float)) and not isinstance(x, bool)]
    return out


def evaluate(sheet: Any, formula: str) -> float:
    """The value a spreadsheet app computes for ``formula`` on ``sheet`` (an openpyxl worksheet)."""
    assert formula.startswith("="), formula
    expr = formula[1:]
    if re.search(r"[A-Z]+\(", expr) and not set(re.findall(r"([A-Z]+)\(", expr)) <= set(_FUNCTIONS):
        raise AssertionError(f"the test oracle cannot evaluate {formula}")
    expr = _REFERENCE.sub(lambda m: f"_range('{m[1]}', '{m[2]}')" if m[2] else f"_cell('{m[1]}')", expr)

    def cell(ref: str) -> Any:
        value = sheet[ref].value
        if isinstance(value, str) and value.startswith("="):
            return evaluate(sheet, value)
        return 0 if value is None else value

    def cells(a: str, b: str) -> list[Any]:
        return [cell(c.coordinate) for row in sheet[a:b] for c in row]

    scope = {"_cell": cell, "_range": cells, **_FUNCTIONS}
    return eval(expr, {"__builtins__": {}}, scope)  # noqa: S307 - a test oracle over formulas we just checked


def csv_totals(path: Path, by: str, value: str) -> dict[str, float]:
    """Sum of ``value`` per ``by`` (rows with an empty value left out), computed with the csv module."""
    totals: dict[str, float] = {}
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row[value].strip():
                totals[row[by]] = totals.get(row[by], 0.0) + float(row[value])
    return totals


def colour_share(png: Path, hex_colour: str) -> float:
    """Share of the image's pixels that have exactly this colour."""
    from PIL import Image

    rgb = tuple(int(hex_colour.lstrip("#")[i : i + 2], 16) for i in (0, 2, 4))
    with Image.open(png) as image:
        counts = dict((colour, n) for n, colour in image.convert("RGB").getcolors(maxcolors=1 << 24))
        return counts.get(rgb, 0) / (image.width * image.height)
