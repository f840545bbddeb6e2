"""The layout rules of a Word document: what flows is not checked (Word reflows text), what does not flow is.

``off_page`` (a picture or table wider than the text column, a page size Word refuses), ``duplicate_text`` (a
paragraph repeating the one before it, or a long paragraph repeated anywhere), ``brand_font``, ``brand_color``,
``font_missing``/``font_substituted`` — fonts and colours resolved through the run, its character style, the
paragraph style chain, the document defaults and the theme.
"""

from __future__ import annotations

import re
import unicodedata

from lxml import etree
from lxml.etree import _Element as Element

from orchestrator.validate.layout.findings import Brand, Collector
from orchestrator.validate.layout.fonts import FontTable
from orchestrator.validate.layout.package import NS, Package, emu, q

EMU_PER_TWIP = 635
MIN_PAGE_TWIPS, MAX_PAGE_TWIPS = 1_440, 31_680  # Word: 1 to 22 inches
MAX_PARAGRAPHS = 20_000
LONG_PARAGRAPH = 40
TOLERANCE = 1.02

_W_VAL = f"{{{NS['w']}}}val"


def _w(name: str) -> str:
    return q("w", name)


def check_document(package: Package, table: FontTable, brand: Brand | None, out: Collector) -> None:
    main = package.main_part("word/document.xml")
    document = package.xml(main)
    styles_part = package.related(main, "styles")
    theme_part = package.related(main, "theme")
    styles = _Styles(package.xml(styles_part) if styles_part else None,
                     package.xml(theme_part) if theme_part else None)
    width = _text_width(document, out)
    if width is not None:
        _check_objects(document, width, out)
    _check_paragraphs(document, styles, table, brand, out)


def _text_width(document: Element, out: Collector) -> int | None:
    sections = list(document.iter(_w("sectPr")))
    if not sections:
        return None
    section = sections[-1]
    size, margins = section.find(_w("pgSz")), section.find(_w("pgMar"))
    page_w = emu(size.get(_w("w")) if size is not None else None, 11_906)
    page_h = emu(size.get(_w("h")) if size is not None else None, 16_838)
    if not (MIN_PAGE_TWIPS <= page_w <= MAX_PAGE_TWIPS and MIN_PAGE_TWIPS <= page_h <= MAX_PAGE_TWIPS):
        out.add("off_page", "", f"the page size {page_w} x {page_h} twips is outside what Word accepts (1 to 22 in); "
                "use A4 (11906 x 16838) or Letter (12240 x 15840)")
        return None
    left = emu(margins.get(_w("left")) if margins is not None else None, 1_440)
    right = emu(margins.get(_w("right")) if margins is not None else None, 1_440)
    return max(1, page_w - left - right)


def _check_objects(document: Element, width_twips: int, out: Collector) -> None:
    limit_emu = width_twips * EMU_PER_TWIP
    for number, inline in enumerate(document.iter(q("wp", "inline")), start=1):
        extent = inline.find(q("wp", "extent"))
        cx = emu(extent.get("cx") if extent is not None else None)
        if cx > limit_emu * TOLERANCE:
            out.add("off_page", f"picture {number}", f"is {cx / 914_400:.2f} in wide, the text column "
                    f"{limit_emu / 914_400:.2f} in; scale it to the column")
    for number, grid in enumerate(document.iter(_w("tblGrid")), start=1):
        total = sum(emu(col.get(_w("w"))) for col in grid.iter(_w("gridCol")))
        if total > width_twips * TOLERANCE:
            out.add("off_page", f"table {number}", f"is {total / 1440:.2f} in wide, the text column "
                    f"{width_twips / 1440:.2f} in; narrow its columns")


class _Styles:
    """Paragraph and character styles with their ``basedOn`` chains, the document defaults and theme fonts/colours."""

    def __init__(self, styles: Element | None, theme: Element | None) -> None:
        self.by_id: dict[str, Element] = {}
        self.default_para: str | None = None
        self.defaults: Element | None = None
        if styles is not None:
            for style in styles.iter(_w("style")):
                style_id = style.get(_w("styleId")) or ""
                self.by_id.setdefault(style_id, style)
                if style.get(_w("type")) == "paragraph" and style.get(_w("default")) in ("1", "true"):
                    self.default_para = style_id
            self.defaults = styles.find(f"{_w('docDefaults')}/{_w('rPrDefault')}/{_w('rPr')}")
        self.fonts: dict[str, str] = {}
        self.colors: dict[str, str] = {}
        if theme is not None:
            for kind, key in (("majorFont", "major"), ("minorFont", "minor")):
                latin = theme.find(f".//{q('a', kind)}/{q('a', 'latin')}")
                if latin is not None:
                    self.fonts[key] = latin.get("typeface") or ""
            scheme = theme.find(f".//{q('a', 'clrScheme')}")
            for child in scheme if scheme is not None else []:
                color = child.find(q("a", "srgbClr"))
                if color is None:
                    color = child.find(q("a", "sysClr"))
                if color is not None:
                    self.colors[etree.QName(child).localname] = (color.get("val") if color.get("lastClr") is None
                                                                 else color.get("lastClr") or "").upper()

    def chain(self, style_id: str | None) -> list[Element]:
        out: list[Element] = []
        seen: set[str] = set()
        while style_id and style_id not in seen and len(seen) < 32:
            seen.add(style_id)
            style = self.by_id.get(style_id)
            if style is None:
                break
            rpr = style.find(_w("rPr"))
            if rpr is not None:
                out.append(rpr)
            based = style.find(_w("basedOn"))
            style_id = based.get(_W_VAL) if based is not None else None
        return out

    def font(self, sources: list[Element]) -> str:
        for rpr in sources:
            fonts = rpr.find(_w("rFonts"))
            if fonts is None:
                continue
            name = fonts.get(_w("ascii")) or fonts.get(_w("hAnsi"))
            if name:
                return str(name)
            theme = fonts.get(_w("asciiTheme")) or fonts.get(_w("hAnsiTheme"))
            if theme:
                return self.fonts.get("major" if theme.startswith("major") else "minor", "")
        return ""

    def color(self, sources: list[Element]) -> str | None:
        for rpr in sources:
            color = rpr.find(_w("color"))
            if color is None:
                continue
            theme = color.get(_w("themeColor"))
            if theme:
                key = {"text1": "dk1", "background1": "lt1", "text2": "dk2", "background2": "lt2"}.get(theme, theme)
                return self.colors.get(key)
            value = (color.get(_W_VAL) or "").upper()
            return value if re.fullmatch(r"[0-9A-F]{6}", value) else None
        return None


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()


def _check_paragraphs(document: Element, styles: _Styles, table: FontTable, brand: Brand | None,
                      out: Collector) -> None:
    previous = ""
    long_seen: dict[str, int] = {}
    body = document.find(_w("body"))
    for number, para in enumerate(body.iter(_w("p")) if body is not None else [], start=1):
        if number > MAX_PARAGRAPHS:
            out.add("too_large", "", f"only the first {MAX_PARAGRAPHS} paragraphs were checked")
            break
        ppr = para.find(_w("pPr"))
        pstyle = ppr.find(_w("pStyle")) if ppr is not None else None
        para_chain = styles.chain(pstyle.get(_W_VAL) if pstyle is not None else styles.default_para)
        text = ""
        for run in para.iter(_w("r")):
            run_text = "".join(t.text or "" for t in run.iter(_w("t")))
            text += run_text
            if run_text.strip():
                _check_run(run, para_chain, styles, table, brand, f"paragraph {number}", out)
        key = _norm(text)
        if key and key == previous:
            out.add("duplicate_text", f"paragraph {number}", f"'{text[:80]}' repeats the paragraph before it; say "
                    "it once")
        elif len(key) >= LONG_PARAGRAPH and key in long_seen:
            out.add("duplicate_text", f"paragraph {number}", f"'{text[:80]}' repeats paragraph {long_seen[key]}")
        if len(key) >= LONG_PARAGRAPH:
            long_seen.setdefault(key, number)
        previous = key or previous


def _check_run(run: Element, para_chain: list[Element], styles: _Styles, table: FontTable, brand: Brand | None,
               where: str, out: Collector) -> None:
    rpr = run.find(_w("rPr"))
    rstyle = rpr.find(_w("rStyle")) if rpr is not None else None
    sources = [s for s in [rpr, *styles.chain(rstyle.get(_W_VAL) if rstyle is not None else None), *para_chain,
                           styles.defaults] if s is not None]
    font = styles.font(sources)
    if font:
        if brand is not None and not brand.allows_font(font):
            out.add("brand_font", where, f"uses the font '{font}', not one of the brand's fonts ({brand.font_list})")
        if not table.has(font):
            alias = table.alias(font)
            if alias:
                out.add("font_substituted", where, f"the font '{font}' is not in the sandbox image; it renders with "
                        f"the metric-compatible '{alias}'")
            else:
                out.add("font_missing", where, f"the font '{font}' is not in the sandbox image, so renders "
                        "substitute another face")
    color = styles.color(sources)
    if brand is not None and color and not brand.allows_color(color):
        out.add("brand_color", where, f"text colour #{color} is not one of the brand's colours ({brand.color_list})")
