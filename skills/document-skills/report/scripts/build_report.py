#!/usr/bin/env python3
"""Builds a report as .docx (python-docx) or .pdf (reportlab) from a JSON spec of sections.

Args: a JSON object on stdin (or as the only command-line argument): {"spec": PATH} or {"report": {...}}, plus
"output" (build/NAME.docx or build/NAME.pdf) and optional "brand". Result: JSON on stdout. Bad input exits 2
with {"ok": false, "error": ...} on stdout and the reason on stderr.
"""
import json
import re
import sys
from pathlib import PurePosixPath

MAX_SECTIONS = 60
MAX_TEXT = 20_000
MAX_TABLE_CELLS = 5_000
MAX_IMAGE_BYTES = 10 * 1024 * 1024
HEX = re.compile(r"^#[0-9A-Fa-f]{6}$")
KNOWN_ARGS = {"spec", "report", "output", "brand"}
KNOWN_REPORT = {"title", "subtitle", "author", "date", "sections"}
KNOWN_SECTION = {"heading", "paragraphs", "bullets", "table", "image", "caption"}
# Fonts the sandbox image has (python -m orchestrator sandbox fonts): what the document names is what renders.
DEFAULT_STYLE = {"primary": "#1F2A44", "text": "#222222", "background": "#FFFFFF",
                 "heading_font": "Liberation Sans", "body_font": "Liberation Sans", "body_pt": 11}


class BadInput(Exception):
    pass


def fail(message):
    sys.stderr.write(f"build_report: {message}\n")
    print(json.dumps({"ok": False, "error": message}))
    sys.exit(2)


def read_args():
    text = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    try:
        args = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise BadInput(f"args are not valid JSON: {exc}") from exc
    if not isinstance(args, dict):
        raise BadInput('args must be a JSON object such as {"spec": "build/report.json", "output": '
                       '"build/report.docx"}')
    unknown = sorted(set(args) - KNOWN_ARGS)
    if unknown:
        raise BadInput(f"unknown args {unknown}; known: {sorted(KNOWN_ARGS)}")
    if ("spec" in args) == ("report" in args):
        raise BadInput("give exactly one of 'spec' (a path such as build/report.json) or 'report' (the spec)")
    return args


def input_path(value, what):
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{what} must be a path")
    path = PurePosixPath(value)
    if ".." in path.parts:
        raise BadInput(f"{what} {value!r} must not contain '..'")
    if path.is_absolute() and path.parts[1:2] != ("inputs",):
        raise BadInput(f"{what} {value!r}: absolute paths must be under /inputs/")
    return str(path)


def output_path(value):
    path = PurePosixPath(value if isinstance(value, str) else "")
    if path.is_absolute() or ".." in path.parts or path.parts[:1] != ("build",) or len(path.parts) < 2:
        raise BadInput(f"output {value!r} must be a path under build/, e.g. build/report.docx")
    if path.suffix.lower() not in (".docx", ".pdf"):
        raise BadInput(f"output {value!r} must end with .docx or .pdf")
    return str(path)


def load_json(path, what):
    try:
        with open(input_path(path, what), encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError as exc:
        raise BadInput(f"{what} not found: {path}") from exc
    except (OSError, ValueError) as exc:
        raise BadInput(f"{what} {path} is not valid JSON: {exc}") from exc


def text(value, where, limit=MAX_TEXT):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"
    if not isinstance(value, str):
        raise BadInput(f"{where} must be text")
    if len(value) > limit:
        raise BadInput(f"{where} is longer than {limit} characters")
    return value


def summary_table(path):
    """The group totals of a csv-summary summary.json as a table."""
    summary = load_json(path, "summary")
    totals = summary.get("totals") if isinstance(summary, dict) else None
    if not isinstance(totals, dict) or not isinstance(totals.get("groups"), list):
        raise BadInput(f"summary {path} has no 'totals' (run csv-summary with group_by and value)")
    value = str(totals.get("value", "value"))
    rows = [[g.get("key"), g.get("count"), g.get("sum"), g.get("mean")] for g in totals["groups"]]
    return {"columns": [str(totals.get("by", "group")), "rows", f"total {value}", f"mean {value}"], "rows": rows}


def check_table(table, where):
    if isinstance(table, dict) and set(table) == {"summary"}:
        table = summary_table(table["summary"])
    if not isinstance(table, dict) or not isinstance(table.get("columns"), list) or not table["columns"]:
        raise BadInput(f"{where} needs 'columns' (names) and 'rows' (lists of cells), or {{'summary': PATH}}")
    columns = [text(c, f"{where} column") for c in table["columns"]]
    rows = table.get("rows", [])
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == len(columns) for r in rows):
        raise BadInput(f"{where}: every row must be a list of {len(columns)} cells")
    if len(columns) * (len(rows) + 1) > MAX_TABLE_CELLS:
        raise BadInput(f"{where} has more than {MAX_TABLE_CELLS} cells")
    cells = [[("" if c is None else text(c, f"{where} cell", 500)) for c in row] for row in rows]
    return {"columns": columns, "rows": cells}


def check_image(value, where):
    from PIL import Image

    path = input_path(value, where)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_IMAGE_BYTES + 1)
    except FileNotFoundError as exc:
        raise BadInput(f"{where} not found: {value}") from exc
    except OSError as exc:
        raise BadInput(f"cannot read {where} {value}: {exc.strerror or exc}") from exc
    if len(data) > MAX_IMAGE_BYTES:
        raise BadInput(f"{where} {value} is larger than 10 MiB")
    try:
        with Image.open(path) as image:
            image.verify()
            kind, size = image.format, image.size
    except Exception as exc:  # Pillow raises many types for a file that is not an image
        raise BadInput(f"{where} {value} is not a PNG or JPEG image: {exc}") from exc
    if kind not in ("PNG", "JPEG"):
        raise BadInput(f"{where} {value} is {kind}; use PNG or JPEG")
    return {"path": path, "width": size[0], "height": size[1]}


def check_report(report):
    if not isinstance(report, dict):
        raise BadInput("the report spec must be an object with 'title' and 'sections'")
    unknown = sorted(set(report) - KNOWN_REPORT)
    if unknown:
        raise BadInput(f"unknown report keys {unknown}; known: {sorted(KNOWN_REPORT)}")
    title = text(report.get("title") or "", "title", 200).strip()
    if not title:
        raise BadInput("the report needs a 'title'")
    sections = report.get("sections")
    if not isinstance(sections, list) or not sections or len(sections) > MAX_SECTIONS:
        raise BadInput(f"'sections' must be a list of 1-{MAX_SECTIONS} objects")
    clean = []
    for number, section in enumerate(sections, start=1):
        where = f"section {number}"
        if not isinstance(section, dict):
            raise BadInput(f"{where} must be an object with a 'heading'")
        unknown = sorted(set(section) - KNOWN_SECTION)
        if unknown:
            raise BadInput(f"{where}: unknown keys {unknown}; known: {sorted(KNOWN_SECTION)}")
        heading = text(section.get("heading") or "", f"{where} heading", 200).strip()
        if not heading:
            raise BadInput(f"{where} needs a 'heading'")
        item = {"heading": heading}
        for key in ("paragraphs", "bullets"):
            values = section.get(key, [])
            if not isinstance(values, list):
                raise BadInput(f"{where} {key} must be a list of text")
            item[key] = [text(v, f"{where} {key}") for v in values]
        if section.get("table") is not None:
            item["table"] = check_table(section["table"], f"{where} table")
        if section.get("image") is not None:
            item["image"] = check_image(section["image"], f"{where} image")
            item["caption"] = text(section.get("caption") or "", f"{where} caption", 300)
        clean.append(item)
    meta = [text(report.get(k) or "", k, 200) for k in ("subtitle", "author", "date")]
    return {"title": title, "subtitle": meta[0], "byline": " · ".join(m for m in meta[1:] if m),
            "sections": clean}


def brand_style(path):
    style = dict(DEFAULT_STYLE)
    if not path:
        return style
    data = load_json(path, "brand file")
    colors, fonts = data.get("colors") or {}, data.get("fonts") or {}
    for key in ("primary", "text", "background"):
        if key in colors:
            if not isinstance(colors[key], str) or not HEX.match(colors[key]):
                raise BadInput(f"brand file {path}: colors.{key} must look like #1F3A5F")
            style[key] = colors[key]
    for key in ("heading", "body"):
        if isinstance(fonts.get(key), str) and fonts[key].strip():
            style[f"{key}_font"] = fonts[key].strip()[:60]
    return style


def write_docx(report, style, output):
    from docx import Document
    from docx.enum.table import WD_TABLE_ALIGNMENT
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn
    from docx.shared import Inches, Pt, RGBColor

    def rgb(value):
        return RGBColor.from_string(value[1:].upper())

    def font_of(target, name, colour=None, size=None, bold=None):
        target.font.name = name
        fonts = target.element.get_or_add_rPr().get_or_add_rFonts()
        for attribute in ("w:ascii", "w:hAnsi", "w:cs", "w:eastAsia"):  # theme fonts would override w:ascii
            fonts.set(qn(attribute), name)
        for attribute in ("w:asciiTheme", "w:hAnsiTheme", "w:cstheme", "w:eastAsiaTheme"):
            fonts.attrib.pop(qn(attribute), None)
        if colour:
            target.font.color.rgb = rgb(colour)
        if size:
            target.font.size = Pt(size)
        if bold is not None:
            target.font.bold = bold

    def shade(cell, colour):
        properties = cell._tc.get_or_add_tcPr()
        fill = OxmlElement("w:shd")
        fill.set(qn("w:val"), "clear")
        fill.set(qn("w:color"), "auto")
        fill.set(qn("w:fill"), colour[1:].upper())
        properties.append(fill)

    doc = Document()
    section = doc.sections[0]
    text_width = section.page_width - section.left_margin - section.right_margin
    # Every style text is set in names the brand font (or the neutral one), so nothing falls back to the theme's.
    for named in doc.styles:
        if named.type == 1 or named.type == 2:  # paragraph and character styles
            font_of(named, style["body_font"], style["text"] if named.name == "Normal" else None)
    font_of(doc.styles["Normal"], style["body_font"], style["text"], style["body_pt"])
    for name in ("Title", "Heading 1", "Heading 2"):
        font_of(doc.styles[name], style["heading_font"], style["primary"], bold=True)
    font_of(doc.styles["Subtitle"], style["body_font"], style["text"], size=14)
    font_of(doc.styles["Caption"], style["body_font"], style["text"], size=9, bold=False)
    doc.add_heading(report["title"], level=0)
    if report["subtitle"]:
        doc.add_paragraph(report["subtitle"], style="Subtitle")
    if report["byline"]:
        doc.add_paragraph(report["byline"])
    for section_spec in report["sections"]:
        doc.add_heading(section_spec["heading"], level=1)
        for paragraph in section_spec["paragraphs"]:
            doc.add_paragraph(paragraph)
        for bullet in section_spec["bullets"]:
            doc.add_paragraph(bullet, style="List Bullet")
        if "table" in section_spec:
            table = section_spec["table"]
            grid = doc.add_table(rows=1, cols=len(table["columns"]))
            grid.style = "Table Grid"
            grid.alignment = WD_TABLE_ALIGNMENT.LEFT
            for cell, name in zip(grid.rows[0].cells, table["columns"]):  # header: bold white on the primary colour
                cell.text = name
                shade(cell, style["primary"])
                run = cell.paragraphs[0].runs[0]
                run.font.bold, run.font.color.rgb = True, rgb(style["background"])
            for row in table["rows"]:
                for number, (cell, value) in enumerate(zip(grid.add_row().cells, row)):
                    cell.text = value
                    if number and _numeric(value):  # amounts line up on the right
                        cell.paragraphs[0].alignment = 2
            column = int(text_width / len(table["columns"]))
            for row in grid.rows:  # the columns share the text width: the table never runs off the page
                for cell in row.cells:
                    cell.width = column
        if "image" in section_spec:
            image = section_spec["image"]
            width = min(Inches(6), text_width)
            doc.add_picture(image["path"], width=width)
            if section_spec["caption"]:
                doc.add_paragraph(section_spec["caption"], style="Caption")
    doc.save(output)


def _numeric(value):
    return bool(re.fullmatch(r"[-+]?[\d,]+(\.\d+)?\s*%?", value.strip()))


def ttf_file(family, bold=False):
    """The TrueType file fontconfig has for ``family`` (reportlab embeds only TrueType outlines), or None."""
    import subprocess

    pattern = f"{family}:style={'Bold' if bold else 'Regular'}"
    try:
        found = subprocess.run(["fc-match", "-f", "%{family}|%{file}", pattern], capture_output=True, text=True,
                               timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    name, _, path = found.partition("|")
    return path if family.casefold() in name.casefold() and path.lower().endswith(".ttf") else None


def pdf_fonts(style):
    """Register the brand's fonts when the image has them as TrueType; else the built-in Helvetica."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    chosen = {}
    for role in ("heading_font", "body_font"):
        regular, bold = ttf_file(style[role]), ttf_file(style[role], bold=True)
        if regular and bold:
            name = style[role].replace(" ", "")
            pdfmetrics.registerFont(TTFont(name, regular))
            pdfmetrics.registerFont(TTFont(f"{name}-Bold", bold))
            chosen[role] = (name, f"{name}-Bold")
        else:
            chosen[role] = ("Helvetica", "Helvetica-Bold")
    return chosen


def write_pdf(report, style, output):
    from reportlab.lib import colors
    from reportlab.lib.enums import TA_LEFT
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.lib.units import cm
    from reportlab.platypus import Image, ListFlowable, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle
    from xml.sax.saxutils import escape

    fonts = pdf_fonts(style)
    sheet = getSampleStyleSheet()
    primary, ink = colors.HexColor(style["primary"]), colors.HexColor(style["text"])
    for name in ("Title", "Heading1"):
        sheet[name].textColor, sheet[name].fontName, sheet[name].alignment = primary, fonts["heading_font"][1], TA_LEFT
    for name in ("BodyText", "Italic"):
        sheet[name].textColor, sheet[name].fontName = ink, fonts["body_font"][0]
    document = SimpleDocTemplate(output, pagesize=A4, title=report["title"], leftMargin=2 * cm, rightMargin=2 * cm)
    story = [Paragraph(escape(report["title"]), sheet["Title"])]
    for line in (report["subtitle"], report["byline"]):
        if line:
            story.append(Paragraph(escape(line), sheet["Italic"]))
    for section in report["sections"]:
        story.append(Paragraph(escape(section["heading"]), sheet["Heading1"]))
        story += [Paragraph(escape(p), sheet["BodyText"]) for p in section["paragraphs"]]
        if section["bullets"]:
            items = [Paragraph(escape(b), sheet["BodyText"]) for b in section["bullets"]]
            story.append(ListFlowable(items, bulletType="bullet", start="\u2022", bulletFontName=fonts["body_font"][0]))
        if "table" in section:
            table = section["table"]
            columns = len(table["columns"])
            grid = Table([table["columns"], *table["rows"]], repeatRows=1, hAlign="LEFT",
                         colWidths=[document.width / columns] * columns)
            numeric = [(c, r) for r, row in enumerate(table["rows"], start=1) for c, v in enumerate(row)
                       if c and _numeric(v)]
            grid.setStyle(TableStyle([("BACKGROUND", (0, 0), (-1, 0), primary),
                                      ("TEXTCOLOR", (0, 0), (-1, 0), colors.white),
                                      ("FONTNAME", (0, 0), (-1, 0), fonts["body_font"][1]),
                                      ("FONTNAME", (0, 1), (-1, -1), fonts["body_font"][0]),
                                      ("TEXTCOLOR", (0, 1), (-1, -1), ink),
                                      ("GRID", (0, 0), (-1, -1), 0.5, colors.grey),
                                      *[("ALIGN", cell, cell, "RIGHT") for cell in numeric]]))
            story.append(grid)
        if "image" in section:
            image = section["image"]
            width = min(16 * cm, document.width)
            story.append(Image(image["path"], width=width, height=width * image["height"] / image["width"]))
            if section["caption"]:
                story.append(Paragraph(escape(section["caption"]), sheet["Italic"]))
        story.append(Spacer(1, 0.4 * cm))
    document.build(story)
    return {"heading": fonts["heading_font"][0], "body": fonts["body_font"][0]}


def main():
    try:
        args = read_args()
        spec = load_json(args["spec"], "spec") if "spec" in args else args["report"]
        output = output_path(args.get("output") or "build/report.docx")
        report = check_report(spec)
        style = brand_style(args.get("brand"))
    except BadInput as exc:
        fail(str(exc))
    used = (write_pdf if output.lower().endswith(".pdf") else write_docx)(report, style, output)
    print(json.dumps({
        "ok": True, "output": output, "format": output.rsplit(".", 1)[1].lower(), "title": report["title"],
        "headings": [s["heading"] for s in report["sections"]],
        "tables": sum("table" in s for s in report["sections"]),
        "images": sum("image" in s for s in report["sections"]),
        "fonts": used or {"heading": style["heading_font"], "body": style["body_font"]},
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
