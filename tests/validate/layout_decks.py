"""Crafted Office files for the layout check: good ones that must pass, and one per defect, made with the same
libraries skills use (python-pptx, python-docx, openpyxl)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from docx import Document
from docx.shared import Inches as DocxInches
from openpyxl import Workbook
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.util import Inches, Pt

WIDE = (Inches(13.333), Inches(7.5))
BRAND = {
    "name": "Acme",
    "colors": {"primary": "#1F3A5F", "accent": "#F28C28", "background": "#FFFFFF", "text": "#1A1A1A"},
    "fonts": {"heading": "Lato", "body": "Source Sans 3"},
    "sizes_pt": {"title": 36, "body": 20, "min": 14},
    "rules": [],
}


def brand_file(folder: Path) -> Path:
    path = folder / "brand.json"
    path.write_text(json.dumps(BRAND), encoding="utf-8")
    return path


def wide_deck() -> Presentation:
    deck = Presentation()
    deck.slide_width, deck.slide_height = WIDE
    return deck


def text_box(slide, x: float, y: float, w: float, h: float, lines: str | list[str], *, size: int = 20,  # noqa: ANN001
             font: str = "Source Sans 3", color: str = "1A1A1A", name: str | None = None):  # noqa: ANN201
    shape = slide.shapes.add_textbox(Inches(x), Inches(y), Inches(w), Inches(h))
    if name:
        shape.name = name
    frame = shape.text_frame
    frame.word_wrap = True
    for number, line in enumerate([lines] if isinstance(lines, str) else lines):
        paragraph = frame.paragraphs[0] if number == 0 else frame.add_paragraph()
        run = paragraph.add_run()
        run.text = line
        run.font.size, run.font.name, run.font.color.rgb = Pt(size), font, RGBColor.from_string(color)
    return shape


def _title(slide, text: str, **kw) -> None:  # noqa: ANN001, ANN003
    text_box(slide, 0.5, 0.4, 12.33, 1.0, text, size=36, font="Lato", color="1F3A5F", name="Title", **kw)


def _save(deck: Presentation, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    deck.save(str(path))
    return path


# --- decks that must pass -----------------------------------------------------------------------------------------


def good_wide_deck(path: Path) -> Path:
    """16:9, title and body across the slide, a chart-like picture beside the bullets, brand fonts and colours."""
    deck = wide_deck()
    blank = deck.slide_layouts[6]
    slide = deck.slides.add_slide(blank)
    text_box(slide, 0.5, 2.4, 12.33, 1.4, "Q3 results", size=44, font="Lato", color="1F3A5F", name="Title")
    text_box(slide, 0.5, 4.0, 12.33, 0.8, "Board review, 21 Nov 2026", size=24, name="Subtitle")
    slide = deck.slides.add_slide(blank)
    _title(slide, "Revenue 4.2 M EUR, up 12 %")
    text_box(slide, 0.5, 1.7, 6.0, 4.8, ["4.2 M EUR, +12 % vs Q2", "Subscriptions 61 % of revenue"], name="Body")
    bar = slide.shapes.add_shape(1, Inches(7.0), Inches(1.7), Inches(5.8), Inches(4.8))  # a chart's place
    bar.fill.solid()
    bar.fill.fore_color.rgb = RGBColor.from_string("F28C28")
    slide = deck.slides.add_slide(blank)
    _title(slide, "Next steps for Q4")
    text_box(slide, 0.5, 1.7, 12.33, 4.8, ["Launch EU pricing by 15 Dec (Sales)", "Hire two engineers by Jan (CTO)"],
             name="Body")
    return _save(deck, path)


def good_default_deck(path: Path) -> Path:
    """python-pptx's own 4:3 template with every placeholder filled (Calibri from its theme: a warning only)."""
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[0])
    slide.shapes.title.text = "Quarterly numbers"
    slide.placeholders[1].text = "Finance team, 21 Nov 2026"
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Revenue grew 12 %"
    slide.placeholders[1].text = "Subscriptions led the growth\nCosts stayed flat"
    return _save(deck, path)


# --- one defect each --------------------------------------------------------------------------------------------


def off_slide_deck(path: Path) -> Path:
    deck = wide_deck()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    _title(slide, "Costs")
    text_box(slide, 11.5, 2.0, 4.0, 1.0, "Sticks out on the right", name="Stray note")
    return _save(deck, path)


def outside_entirely_deck(path: Path) -> Path:
    deck = wide_deck()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    _title(slide, "Costs")
    slide.shapes.add_picture(str(_png(path.parent)), Inches(20), Inches(2), Inches(3), Inches(2)).name = "Lost chart"
    return _save(deck, path)


def overlap_deck(path: Path) -> Path:
    deck = wide_deck()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    _title(slide, "Margins")
    text_box(slide, 0.5, 2.0, 8.0, 1.0, "Operating margin 31 %", size=24, name="Left note")
    text_box(slide, 2.0, 2.2, 8.0, 1.0, "Cash 9.8 M EUR at quarter end", size=24, name="Right note")
    return _save(deck, path)


def stacked_deck(path: Path) -> Path:
    """Two text boxes half over each other; their short texts do not touch yet."""
    deck = wide_deck()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    _title(slide, "Margins")
    text_box(slide, 0.5, 2.0, 8.0, 2.0, "Operating margin 31 %", name="Upper")
    text_box(slide, 0.5, 3.0, 8.0, 2.0, "Cash 9.8 M EUR", name="Lower")
    return _save(deck, path)


def overflow_deck(path: Path) -> Path:
    deck = wide_deck()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    _title(slide, "Everything we did")
    lines = [f"Item {n}: a long sentence that wraps over more than one line in a narrow box" for n in range(8)]
    text_box(slide, 0.5, 1.7, 4.0, 1.5, lines, size=24, name="Crowded box")
    return _save(deck, path)


def empty_placeholder_deck(path: Path) -> Path:
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Only a title"
    return _save(deck, path)


def duplicate_text_deck(path: Path) -> Path:
    deck = wide_deck()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    _title(slide, "Q3 results")
    text_box(slide, 0.5, 1.7, 12.33, 2.0, ["Board review, 21 Nov 2026", "Board review", "21 Nov 2026"],
             name="Subtitle")
    return _save(deck, path)


def confined_deck(path: Path) -> Path:
    """A 16:9 slide whose title and body keep the 4:3 template's placeholders (the left 70 % of the slide)."""
    deck = Presentation()
    deck.slide_width, deck.slide_height = WIDE
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Revenue grew 12 %"
    slide.placeholders[1].text = "Subscriptions led the growth"
    return _save(deck, path)


def off_brand_deck(path: Path) -> Path:
    deck = wide_deck()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    text_box(slide, 0.5, 0.4, 12.33, 1.0, "Costs held flat", size=36, font="Comic Sans MS", color="FF0000",
             name="Title")
    text_box(slide, 0.5, 1.7, 12.33, 4.8, "2.9 M EUR, +1 % vs Q2", name="Body")
    return _save(deck, path)


def unwrapped_deck(path: Path, *, left_in: float) -> Path:
    """python-pptx's default text box (no word wrap, grows with its text) holding a line longer than the box."""
    deck = wide_deck()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    _title(slide, "Costs")
    shape = slide.shapes.add_textbox(Inches(left_in), Inches(2), Inches(3), Inches(0.6))
    shape.name = "Long line"
    shape.text_frame.text = "Costs held flat at 2.9 M EUR, plus one per cent on the second quarter"
    return _save(deck, path)


PPTX_DEFECTS: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    # name: (builder, rule, what the violation names)
    "off_slide": (off_slide_deck, "sticks out of the slide", "slide 1, shape 'Stray note'"),
    "outside": (outside_entirely_deck, "lies entirely outside the slide", "slide 1, shape 'Lost chart'"),
    "overlap": (overlap_deck, "overlaps the text of shape 'Right note'", "slide 1, shape 'Left note'"),
    "overflow": (overflow_deck, "does not fit its box at 24 pt", "slide 1, shape 'Crowded box'"),
    "empty_placeholder": (empty_placeholder_deck, "placeholder is empty", "slide 1, shape 'Content Placeholder 2'"),
    "duplicate_text": (duplicate_text_deck, "'Board review' repeats text", "slide 1, shape 'Subtitle'"),
    "confined": (confined_deck, "the content spans only 0.50 in to 9.50 in", "slide 1"),
}


def _png(folder: Path) -> Path:
    from PIL import Image

    path = folder / "chart.png"
    folder.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (300, 200), "#1F3A5F").save(path)
    return path


# --- documents and workbooks ---------------------------------------------------------------------------------------


def good_report(path: Path) -> Path:
    document = Document()
    document.add_heading("Q3 sales review", level=0)
    document.add_paragraph("Revenue reached 107,561 EUR in the quarter.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Region", "EUR"
    document.add_picture(str(_png(path.parent)), width=DocxInches(5))
    path.parent.mkdir(parents=True, exist_ok=True)
    document.save(str(path))
    return path


def wide_picture_report(path: Path) -> Path:
    document = Document()
    document.add_paragraph("The chart below is wider than the page.")
    document.add_picture(str(_png(path.parent)), width=DocxInches(9))
    document.save(str(path))
    return path


def repeated_paragraph_report(path: Path) -> Path:
    document = Document()
    document.add_paragraph("Revenue reached 107,561 EUR in the quarter.")
    document.add_paragraph("Revenue reached 107,561 EUR in the quarter.")
    document.save(str(path))
    return path


def good_workbook(path: Path) -> Path:
    workbook = Workbook()
    sheet = workbook.active
    sheet.append(["Item", "Q1"])
    sheet.append(["Rent", 1200])
    sheet["B2"].number_format = "#,##0.00"
    sheet.column_dimensions["B"].width = 14
    workbook.save(str(path))
    return path


def narrow_column_workbook(path: Path) -> Path:
    workbook = Workbook()
    sheet = workbook.active
    sheet.append(["Item", "Revenue"])
    sheet.append(["North", 123456789.25])
    sheet["B2"].number_format = "#,##0.00"
    sheet.column_dimensions["B"].width = 6
    workbook.save(str(path))
    return path


def cut_text_workbook(path: Path) -> Path:
    workbook = Workbook()
    sheet = workbook.active
    sheet.append(["Total revenue of the northern region in euros", "EUR"])
    sheet.column_dimensions["A"].width = 8
    workbook.save(str(path))
    return path
