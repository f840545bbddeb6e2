"""The layout rules of a workbook: columns wide enough for what they show, charts beside the data, brand styles.

``cell_overflow``: a number wider than its column (Excel and LibreOffice show ``####``), or text cut off by a
non-empty neighbour (text that is not wrapped). Widths are estimated in the cell's font from the image's metrics,
numbers formatted by their number format (thousands separators, decimals, percent). Formula cells are measured
only when the file stores their last value. ``chart_overlap``: a chart anchored over cells that hold data.
``brand_font``, ``brand_color``, ``font_missing``/``font_substituted`` for the fonts and fills the cells use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lxml.etree import _Element as Element

from orchestrator.validate.layout.findings import Brand, Collector
from orchestrator.validate.layout.fonts import FontTable, text_width_pt
from orchestrator.validate.layout.package import R_ID, Package, emu, q

MAX_SHEETS = 50
MAX_CELLS = 200_000
MAX_STRINGS = 200_000
DEFAULT_WIDTH = 8.43
PX_PER_PT = 96 / 72
_CELL = re.compile(r"^([A-Z]{1,3})([0-9]{1,7})$")
_BUILTIN_FORMATS = {1: "0", 2: "0.00", 3: "#,##0", 4: "#,##0.00", 9: "0%", 10: "0.00%"}



@dataclass(frozen=True)
class _Font:
    name: str
    size_pt: float
    bold: bool
    color: str | None


def _x(name: str) -> str:
    return q("x", name)


def _column_index(letters: str) -> int:
    index = 0
    for char in letters:
        index = index * 26 + ord(char) - 64
    return index


def _letters(index: int) -> str:
    out = ""
    while index > 0:
        index, rest = divmod(index - 1, 26)
        out = chr(65 + rest) + out
    return out


def _argb(element: Element | None) -> str | None:
    value = (element.get("rgb") or "") if element is not None else ""
    return value[-6:].upper() if re.fullmatch(r"[0-9A-Fa-f]{6}([0-9A-Fa-f]{2})?", value) else None


class _Styles:
    def __init__(self, root: Element | None) -> None:
        self.fonts: list[_Font] = []
        self.fills: list[str | None] = []
        self.xfs: list[tuple[int, int, str, bool]] = []  # font, fill, number format, wrapped
        if root is None:
            return
        formats = {emu(f.get("numFmtId")): f.get("formatCode") or "" for f in root.iter(_x("numFmt"))}
        for font in root.iter(_x("font")):
            name, size = font.find(_x("name")), font.find(_x("sz"))
            self.fonts.append(_Font(
                name=(name.get("val") or "") if name is not None else "",
                size_pt=min(400.0, max(1.0, _float(size))),
                bold=font.find(_x("b")) is not None,
                color=_argb(font.find(_x("color"))),
            ))
        for fill in root.iter(_x("fill")):
            pattern = fill.find(_x("patternFill"))
            solid = pattern is not None and pattern.get("patternType") == "solid"
            self.fills.append(_argb(pattern.find(_x("fgColor"))) if solid and pattern is not None else None)
        xfs = root.find(_x("cellXfs"))
        for xf in xfs if xfs is not None else []:
            number = emu(xf.get("numFmtId"))
            align = xf.find(_x("alignment"))
            self.xfs.append((emu(xf.get("fontId")), emu(xf.get("fillId")),
                             formats.get(number, _BUILTIN_FORMATS.get(number, "General")),
                             align is not None and align.get("wrapText") in ("1", "true")))

    def of(self, index: int) -> tuple[_Font, str | None, str, bool]:
        font_id, fill_id, fmt, wrapped = self.xfs[index] if 0 <= index < len(self.xfs) else (0, 0, "General", False)
        font = self.fonts[font_id] if 0 <= font_id < len(self.fonts) else _Font("Calibri", 11.0, False, None)
        fill = self.fills[fill_id] if 0 <= fill_id < len(self.fills) else None
        return font, fill, fmt, wrapped


def _float(element: Element | None) -> float:
    try:
        return float((element.get("val") or "11") if element is not None else "11")
    except ValueError:
        return 11.0


def _display(value: str, fmt: str) -> str:
    """The text a spreadsheet shows for the number ``value`` under the format ``fmt`` (the common formats)."""
    try:
        number = float(value)
    except ValueError:
        return value
    section = fmt.split(";")[0]
    if "%" in section:
        number *= 100
    decimals = len(section.split(".")[1].rstrip("%")) if "." in section else 0
    if section in ("General", ""):
        text = f"{number:.10g}"
    else:
        text = f"{number:,.{decimals}f}" if "," in section else f"{number:.{decimals}f}"
    return text + ("%" if "%" in section else "")


def check_workbook(package: Package, table: FontTable, brand: Brand | None, out: Collector) -> None:
    main = package.main_part("xl/workbook.xml")
    workbook = package.xml(main)
    rels = package.rels(main)
    styles_part = package.related(main, "styles")
    styles = _Styles(package.xml(styles_part) if styles_part else None)
    strings_part = package.related(main, "sharedStrings")
    strings = [
        "".join(t.text or "" for t in si.iter(_x("t")))
        for _, si in zip(range(MAX_STRINGS), package.xml(strings_part).iter(_x("si")), strict=False)
    ] if strings_part else []
    default = styles.fonts[0] if styles.fonts else _Font("Calibri", 11.0, False, None)
    digit_px = text_width_pt("0", table.face(default.name or "Carlito"), default.size_pt) * PX_PER_PT
    sheets = list(workbook.iter(_x("sheet")))
    for sheet in sheets[:MAX_SHEETS]:
        part = rels.get(sheet.get(R_ID) or "", ("", ""))[1]
        if part:
            _check_sheet(package, part, f"sheet '{(sheet.get('name') or '')[:31]}'", styles, strings, table, brand,
                         max(1.0, digit_px), out)


def _check_sheet(package: Package, part: str, name: str, styles: _Styles, strings: list[str], table: FontTable,
                 brand: Brand | None, digit_px: float, out: Collector) -> None:
    root = package.xml(part)
    fmt_pr = root.find(_x("sheetFormatPr"))
    default_width = float(fmt_pr.get("defaultColWidth") or DEFAULT_WIDTH) if fmt_pr is not None else DEFAULT_WIDTH
    widths: dict[int, float] = {}
    for col in root.iter(_x("col")):
        low, high = emu(col.get("min"), 1), min(emu(col.get("max"), 1), 16_384)
        for index in range(max(1, low), min(high, low + 200) + 1):
            widths[index] = _float_attr(col.get("width"), default_width)
    cells: dict[tuple[int, int], tuple[str, int, bool]] = {}
    for count, cell in enumerate(root.iter(_x("c"))):
        if count >= MAX_CELLS:
            out.add("too_large", name, f"only the first {MAX_CELLS} cells were checked")
            break
        match = _CELL.match(cell.get("r") or "")
        value = cell.findtext(_x("v"))
        kind = cell.get("t") or "n"
        if kind == "inlineStr":
            value = "".join(t.text or "" for t in cell.iter(_x("t")))
        elif kind == "s" and value is not None:
            position = emu(value, -1)
            value = strings[position] if 0 <= position < len(strings) else ""
        if match is None or value is None or value == "":
            continue
        column, row = _column_index(match.group(1)), int(match.group(2))
        cells[(row, column)] = (value, emu(cell.get("s")), kind in ("s", "inlineStr", "str"))
    used_fonts: set[str] = set()
    for (row, column), (value, style, is_text) in sorted(cells.items()):
        font, fill, fmt, wrapped = styles.of(style)
        used_fonts.add(font.name)
        where = f"{name}, cell {_letters(column)}{row}"
        if brand is not None:
            for color, what in ((font.color, "text colour"), (fill, "fill")):
                if color and not brand.allows_color(color):
                    out.add("brand_color", where, f"{what} #{color} is not one of the brand's colours "
                            f"({brand.color_list})")
        if wrapped:
            continue
        shown = value if is_text else _display(value, fmt)
        needed = text_width_pt(shown, table.face(font.name or "Carlito"), font.size_pt, font.bold) * PX_PER_PT + 5
        width = widths.get(column, default_width)
        room = width * digit_px + 5
        if needed <= room * 1.02:
            continue
        if not is_text:
            out.add("cell_overflow", where, f"the number {shown} needs a column about {needed / digit_px:.1f} "
                    f"wide, column {_letters(column)} is {width:g} (it shows ####); widen the column")
        elif (row, column + 1) in cells:
            out.add("cell_overflow", where, f"the text '{shown[:60]}' is cut off by the cell to its right (needs "
                    f"a column about {needed / digit_px:.1f} wide, column {_letters(column)} is {width:g}); widen "
                    "the column or wrap the text")
    _check_fonts(used_fonts, name, table, brand, out)
    _check_charts(package, part, name, cells, out)


def _float_attr(value: str | None, default: float) -> float:
    try:
        return min(255.0, max(0.0, float(value))) if value is not None else default
    except ValueError:
        return default


def _check_fonts(fonts: set[str], name: str, table: FontTable, brand: Brand | None, out: Collector) -> None:
    for font in sorted(f for f in fonts if f):
        if brand is not None and not brand.allows_font(font):
            out.add("brand_font", name, f"cells use the font '{font}', not one of the brand's fonts "
                    f"({brand.font_list})")
        if not table.has(font):
            alias = table.alias(font)
            rule, text = ("font_substituted", f"renders with the metric-compatible '{alias}'") if alias else (
                "font_missing", "renders substitute another face")
            out.add(rule, name, f"the font '{font}' is not in the sandbox image; it {text}")


def _check_charts(package: Package, part: str, name: str, cells: dict[tuple[int, int], tuple[str, int, bool]],
                  out: Collector) -> None:
    drawing = package.related(part, "drawing")
    if not drawing:
        return
    for number, anchor in enumerate(package.xml(drawing).iter(q("xdr", "twoCellAnchor")), start=1):
        if anchor.find(f".//{q('c', 'chart')}") is None:
            continue
        start, end = anchor.find(q("xdr", "from")), anchor.find(q("xdr", "to"))
        if start is None or end is None:
            continue
        c0, r0 = emu(start.findtext(q("xdr", "col"))) + 1, emu(start.findtext(q("xdr", "row"))) + 1
        c1, r1 = emu(end.findtext(q("xdr", "col"))) + 1, emu(end.findtext(q("xdr", "row"))) + 1
        covered = sorted((r, c) for (r, c) in cells if r0 <= r <= r1 and c0 <= c <= c1)
        if covered:
            row, column = covered[0]
            out.add("chart_overlap", f"{name}, chart {number}", f"lies over cells {_letters(c0)}{r0}:{_letters(c1)}"
                    f"{r1}, which hold data ({_letters(column)}{row} and {len(covered) - 1} more); anchor it beside "
                    "the table")
