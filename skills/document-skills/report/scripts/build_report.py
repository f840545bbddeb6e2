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
DEFAULT_STYLE = {"primary": "#1F2A44", "text": "#222222", "heading_font": "Arial", "body_font": "Arial",
                 "body_pt": 11}


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
    for key in ("primary", "text"):
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
    from docx.shared import Inches, Pt, RGBColor

    def rgb(value):
        return RGBColor.from_string(value[1:].upper())

    doc = Document()
    body = doc.styles["Normal"]
    body.font.name, body.font.size, body.font.color.rgb = style["body_font"], Pt(style["body_pt"]), rgb(style["text"])
    for name in ("Title", "Heading 1"):
        doc.styles[name].font.name = style["heading_font"]
        doc.styles[name].font.color.rgb = rgb(style["primary"])
    doc.add_heading(report["title"], level=0)
    if report["subtitle"]:
        doc.add_paragraph(report["subtitle"], style="Subtitle")
    if report["byline"]:
        doc.add_paragraph(report["byline"])
    for section in report["sections"]:
        doc.add_heading(section["heading"], level=1)
        for paragraph in section["paragraphs"]:
            doc.add_paragraph(paragraph)
        for bullet in section["bullets"]:
            doc.add_paragraph(bullet, style="List Bullet")
        if "table" in section:
            table = section["table"]
            grid = doc.add_table(rows=1, cols=len(table["columns"]))
            grid.style = "Light Grid Accent 1"
            for cell, name in zip(grid.rows[0].cells, table["columns"]):
                cell.text = name
            for row in table["rows"]:
                for cell, value in zip(grid.add_row().cells, row):
                    cell.text = value
        if "image" in section:
            doc.add_picture(section["image"]["path"], width=Inches(6))
            if section["caption"]:
                doc.add_paragraph(section["caption"], style="Caption")
    doc.save(output)


def write_pdf(report, style, output):
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.lib.units import cm
    from reportlab.platypus import Image, ListFlowable, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle
    from xml.sax.saxutils import escape

    sheet = getSampleStyleSheet()
    primary, ink = colors.HexColor(style["primary"]), colors.HexColor(style["text"])
    for name in ("Title", "Heading1"):
        sheet[name].textColor = primary
    sheet["BodyText"].textColor = ink
    # Built-in PDF fonts only: brand fonts are not embedded, so their names are kept in the result, not used.
    story = [Paragraph(escape(report["title"]), sheet["Title"])]
    for line in (report["subtitle"], report["byline"]):
        if line:
            story.append(Paragraph(escape(line), sheet["Italic"]))
    for section in report["sections"]:
        story.append(Paragraph(escape(section["heading"]), sheet["Heading1"]))
        story += [Paragraph(escape(p), sheet["BodyText"]) for p in section["paragraphs"]]
        if section["bullets"]:
            items = [Paragraph(escape(b), sheet["BodyText"]) for b in section["bullets"]]
            story.append(ListFlowable(items, bulletType="bullet", start="\u2022", bulletFontName="Helvetica"))
        if "table" in section:
            table = section["table"]
            grid = Table([table["columns"], *table["rows"]], repeatRows=1)
            grid.setStyle(TableStyle([("BACKGROUND", (0, 0), (-1, 0), primary),
                                      ("TEXTCOLOR", (0, 0), (-1, 0), colors.white),
                                      ("GRID", (0, 0), (-1, -1), 0.5, colors.grey)]))
            story.append(grid)
        if "image" in section:
            image = section["image"]
            width = 16 * cm
            story.append(Image(image["path"], width=width, height=width * image["height"] / image["width"]))
            if section["caption"]:
                story.append(Paragraph(escape(section["caption"]), sheet["Italic"]))
        story.append(Spacer(1, 0.4 * cm))
    SimpleDocTemplate(output, pagesize=A4, title=report["title"]).build(story)


def main():
    try:
        args = read_args()
        spec = load_json(args["spec"], "spec") if "spec" in args else args["report"]
        output = output_path(args.get("output") or "build/report.docx")
        report = check_report(spec)
        style = brand_style(args.get("brand"))
    except BadInput as exc:
        fail(str(exc))
    (write_pdf if output.lower().endswith(".pdf") else write_docx)(report, style, output)
    print(json.dumps({
        "ok": True, "output": output, "format": output.rsplit(".", 1)[1].lower(), "title": report["title"],
        "headings": [s["heading"] for s in report["sections"]],
        "tables": sum("table" in s for s in report["sections"]),
        "images": sum("image" in s for s in report["sections"]),
        "fonts": {"heading": style["heading_font"], "body": style["body_font"]},
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
