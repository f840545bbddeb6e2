#!/usr/bin/env python3
"""Builds a .pptx deck from an outline JSON. Args: a JSON object on stdin (or as the only command-line argument).

Result: JSON on stdout. Bad input exits 2 with {"ok": false, "error": ...} on stdout and the reason on stderr.
"""
import json
import re
import sys
from pathlib import PurePosixPath

from lxml import etree
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.enum.shapes import MSO_SHAPE
from pptx.enum.text import MSO_ANCHOR, PP_ALIGN
from pptx.opc.constants import RELATIONSHIP_TYPE as RT
from pptx.oxml.ns import qn
from pptx.util import Inches, Pt

# Fonts the sandbox image has (python -m orchestrator sandbox fonts): what the deck names is what renders.
DEFAULT_BRAND = {
    "colors": {"primary": "#1F2A44", "accent": "#E07B24", "text": "#222222", "background": "#FFFFFF"},
    "fonts": {"heading": "Liberation Sans", "body": "Liberation Sans"},
    "sizes_pt": {"title": 36, "body": 20},
}
# 16:9 in inches; content sits in a safe area with half-inch margins and the bottom half inch left free.
SLIDE_W, SLIDE_H = 13.333, 7.5
MARGIN = 0.5
CONTENT_W = SLIDE_W - 2 * MARGIN
BODY_TOP, BODY_H = 1.85, 4.9
SHORT_LIST = 4
HEX = re.compile(r"^#[0-9A-Fa-f]{6}$")
MAX_SLIDES = 100
MAX_BULLETS = 12
MAX_IMAGE_BYTES = 10 * 1024 * 1024
KNOWN_ARGS = {"outline", "output", "brand"}


class BadInput(Exception):
    pass


def fail(message):
    sys.stderr.write(f"build_deck: {message}\n")
    print(json.dumps({"ok": False, "error": message}))
    sys.exit(2)


def read_args():
    text = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    try:
        args = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise BadInput(f"args are not valid JSON: {exc}") from exc
    if not isinstance(args, dict) or "outline" not in args or "output" not in args:
        raise BadInput('expected args {"outline": PATH, "output": PATH, "brand": PATH?}')
    unknown = sorted(set(args) - KNOWN_ARGS)
    if unknown:
        raise BadInput(f"unknown args {unknown}; known: {sorted(KNOWN_ARGS)}")
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
        raise BadInput(f"output {value!r} must be a path under build/, e.g. build/deck.pptx")
    if path.suffix.lower() != ".pptx":
        raise BadInput(f"output {value!r} must end with .pptx")
    return str(path)


def load_json(path, what):
    try:
        with open(input_path(path, what), encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError as exc:
        raise BadInput(f"{what} not found: {path}") from exc
    except (OSError, ValueError) as exc:
        raise BadInput(f"{what} is not valid JSON ({path}): {exc}") from exc


def rgb(value, where):
    if not isinstance(value, str) or not HEX.match(value):
        raise BadInput(f"{where} must be a colour like #1F3A5F, got {value!r}")
    return RGBColor.from_string(value[1:].upper())


def style(paragraph, font, size, colour):
    for run in paragraph.runs:
        run.font.name = font
        run.font.size = Pt(size)
        run.font.color.rgb = colour


def load_brand(path):
    brand = {key: dict(value) for key, value in DEFAULT_BRAND.items()}
    if path:
        given = load_json(path, "brand file")
        if not isinstance(given, dict):
            raise BadInput(f"brand file {path} must be a JSON object")
        for key in ("colors", "fonts", "sizes_pt"):
            if isinstance(given.get(key), dict):
                brand[key].update(given[key])
    colours, fonts, sizes = brand["colors"], brand["fonts"], brand["sizes_pt"]
    for key in ("title", "body"):
        if not isinstance(sizes.get(key), (int, float)) or not 8 <= sizes[key] <= 96:
            raise BadInput(f"brand sizes_pt.{key} must be a number from 8 to 96")
    return {"primary": rgb(colours.get("primary"), "brand colors.primary"),
            "text": rgb(colours.get("text"), "brand colors.text"),
            "accent": rgb(colours.get("accent"), "brand colors.accent"),
            "background": rgb(colours.get("background"), "brand colors.background"),
            "heading": str(fonts.get("heading"))[:60], "body": str(fonts.get("body"))[:60],
            "title_pt": sizes["title"], "body_pt": sizes["body"]}


def check_image(value, where):
    from PIL import Image

    path = input_path(value, where)
    try:
        with open(path, "rb") as handle:
            size = len(handle.read(MAX_IMAGE_BYTES + 1))
        with Image.open(path) as image:
            image.verify()
            kind, pixels = image.format, image.size
    except FileNotFoundError as exc:
        raise BadInput(f"{where} not found: {value}") from exc
    except Exception as exc:  # Pillow raises many types for a file that is not an image
        raise BadInput(f"{where} {value} is not a PNG or JPEG image: {exc}") from exc
    if size > MAX_IMAGE_BYTES or kind not in ("PNG", "JPEG"):
        raise BadInput(f"{where} {value} must be a PNG or JPEG of at most 10 MiB")
    return path, pixels


def check_outline(outline):
    slides = outline.get("slides") if isinstance(outline, dict) else None
    if not isinstance(slides, list) or not slides:
        raise BadInput("the outline needs a non-empty 'slides' list")
    if len(slides) > MAX_SLIDES:
        raise BadInput(f"the outline has {len(slides)} slides, more than {MAX_SLIDES}")
    checked = []
    for number, entry in enumerate(slides, start=1):
        if not isinstance(entry, dict) or not str(entry.get("title", "")).strip():
            raise BadInput(f"slide {number} has no title")
        bullets = entry.get("bullets", [])
        if not isinstance(bullets, list) or len(bullets) > MAX_BULLETS:
            raise BadInput(f"slide {number}: 'bullets' must be a list of at most {MAX_BULLETS} lines")
        image = check_image(entry["image"], f"slide {number} image") if entry.get("image") else None
        checked.append({"title": str(entry["title"]), "bullets": [str(b) for b in bullets], "image": image})
    return checked


def subtitle_lines(subtitle, bullets):
    """The title slide's lines: the outline's subtitle and the first entry's bullets, each said once."""
    lines, seen = [], []
    candidates = [line.strip() for line in [subtitle, *bullets] if line and line.strip()]
    for line in candidates:
        key = " ".join(line.casefold().split())
        inside_other = any(key != other and re.search(rf"(?<!\w){re.escape(key)}(?!\w)", other)
                           for other in (" ".join(c.casefold().split()) for c in candidates))
        if key not in seen and not inside_other:
            seen.append(key)
            lines.append(line)
    return lines


def write_lines(frame, lines, font, size, colour, bold=False, space_pt=0):
    frame.word_wrap = True
    for number, line in enumerate(lines):
        paragraph = frame.paragraphs[0] if number == 0 else frame.add_paragraph()
        paragraph.text = line
        if number and space_pt:
            paragraph.space_before = Pt(space_pt)
        style(paragraph, font, size, colour)
        for run in paragraph.runs:
            run.font.bold = bold
        # Bullets in the body font too (the template's are Arial, which the brand does not name).
        etree.SubElement(paragraph._p.get_or_add_pPr(), qn("a:buFont"), typeface=font)


def place(shape, left, top, width, height):
    shape.left, shape.top, shape.width, shape.height = Inches(left), Inches(top), Inches(width), Inches(height)


def accent_bar(slide, left, top, width, brand):
    """The slide's one accent element: a thin bar in the accent colour (no text is ever set on it)."""
    bar = slide.shapes.add_shape(MSO_SHAPE.RECTANGLE, Inches(left), Inches(top), Inches(width), Inches(0.08))
    bar.fill.solid()
    bar.fill.fore_color.rgb = brand["accent"]
    bar.line.fill.background()
    bar.name = "Accent bar"


def remove(shape):
    shape.element.getparent().remove(shape.element)


def title_slide(deck, entry, subtitle, brand):
    slide = deck.slides.add_slide(deck.slide_layouts[0])
    fill = slide.background.fill
    fill.solid()
    fill.fore_color.rgb = brand["primary"]
    title = slide.shapes.title
    place(title, MARGIN + 0.4, 1.9, CONTENT_W - 0.8, 2.0)
    title.text_frame.vertical_anchor = MSO_ANCHOR.BOTTOM
    write_lines(title.text_frame, [entry["title"]], brand["heading"], round(brand["title_pt"] * 1.25),
                brand["background"], bold=True)
    title.text_frame.paragraphs[0].alignment = PP_ALIGN.LEFT
    accent_bar(slide, MARGIN + 0.5, 4.1, 1.6, brand)  # under the title text (its box has a 0.1 in inset)
    lines = subtitle_lines(subtitle, entry["bullets"])
    body = slide.placeholders[1]
    if lines:
        place(body, MARGIN + 0.4, 4.4, CONTENT_W - 0.8, 1.6)
        body.text_frame.vertical_anchor = MSO_ANCHOR.TOP
        write_lines(body.text_frame, lines, brand["body"], round(brand["body_pt"] * 1.2), brand["background"],
                    space_pt=4)
        for paragraph in body.text_frame.paragraphs:
            paragraph.alignment = PP_ALIGN.LEFT
    else:
        remove(body)


def content_slide(deck, entry, brand):
    layout = deck.slide_layouts[1 if entry["bullets"] else 5]
    slide = deck.slides.add_slide(layout)
    fill = slide.background.fill
    fill.solid()
    fill.fore_color.rgb = brand["background"]
    title = slide.shapes.title
    place(title, MARGIN, 0.4, CONTENT_W, 1.0)
    title.text_frame.vertical_anchor = MSO_ANCHOR.BOTTOM
    write_lines(title.text_frame, [entry["title"]], brand["heading"], brand["title_pt"], brand["primary"], bold=True)
    title.text_frame.paragraphs[0].alignment = PP_ALIGN.LEFT
    accent_bar(slide, MARGIN + 0.1, 1.5, 1.2, brand)
    body_w = CONTENT_W if not entry["image"] else CONTENT_W / 2 - 0.2
    if entry["bullets"]:
        body = slide.placeholders[1]
        place(body, MARGIN, BODY_TOP, body_w, BODY_H)
        body.text_frame.vertical_anchor = MSO_ANCHOR.TOP
        size = brand["body_pt"]
        if len(entry["bullets"]) <= SHORT_LIST and max(map(len, entry["bullets"])) <= 80:
            size = round(size * 1.3)  # a few short bullets are set larger rather than lost in a wide slide
        write_lines(body.text_frame, entry["bullets"], brand["body"], size, brand["text"], space_pt=round(size * 0.7))
    if entry["image"]:
        # The picture fills the right half of the content area, scaled to fit and centred in it.
        path, (width, height) = entry["image"]
        box_left = MARGIN + (CONTENT_W / 2 + 0.2 if entry["bullets"] else 0)
        box_w = CONTENT_W / 2 - 0.2 if entry["bullets"] else CONTENT_W
        scale = min(box_w / width, BODY_H / height)
        pic_w, pic_h = width * scale, height * scale
        slide.shapes.add_picture(path, Inches(box_left + (box_w - pic_w) / 2), Inches(BODY_TOP + (BODY_H - pic_h) / 2),
                                 Inches(pic_w), Inches(pic_h))


def widen_template(deck):
    """Make the default template (4:3, 10 x 7.5 in, type screen4x3) 16:9 in every part: the slide size and its type
    (13.333 x 7.5 in is PowerPoint's Widescreen, a custom size: no type), and the boxes the master and each layout
    set themselves, scaled to the new size. Layout placeholders that inherit their box from the master follow it."""
    across = Inches(SLIDE_W) / deck.slide_width
    down = Inches(SLIDE_H) / deck.slide_height
    deck.slide_width, deck.slide_height = Inches(SLIDE_W), Inches(SLIDE_H)
    deck.part._element.find(qn("p:sldSz")).attrib.pop("type", None)
    for owner in [deck.slide_master, *deck.slide_layouts]:
        for shape in owner.shapes:
            if shape._element.find(f"{qn('p:spPr')}/{qn('a:xfrm')}") is None:
                continue  # inherits its box: setting one here would copy the master's and scale it twice
            shape.left, shape.width = int(shape.left * across), int(shape.width * across)
            shape.top, shape.height = int(shape.top * down), int(shape.height * down)


def brand_theme(deck, brand):
    """Theme fonts and colours follow the brand, so text added later in PowerPoint is on-brand too."""
    theme = deck.slide_master.part.part_related_by(RT.THEME)
    root = etree.fromstring(theme.blob)
    ns = {"a": "http://schemas.openxmlformats.org/drawingml/2006/main"}
    for kind, font in (("majorFont", brand["heading"]), ("minorFont", brand["body"])):
        for latin in root.iterfind(f".//a:{kind}/a:latin", ns):
            latin.set("typeface", font)
    roles = {"dk1": "text", "lt1": "background", "dk2": "primary", "lt2": "background", "accent1": "primary",
             "accent2": "accent"}
    for name, role in roles.items():
        slot = root.find(f".//a:clrScheme/a:{name}", ns)
        if slot is not None:
            for child in list(slot):
                slot.remove(child)
            etree.SubElement(slot, f"{{{ns['a']}}}srgbClr", val=str(brand[role]))
    theme._blob = etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True)  # a plain part


def main():
    try:
        args = read_args()
        output = output_path(args["output"])
        outline = load_json(args["outline"], "outline")
        slides = check_outline(outline)
        brand = load_brand(args.get("brand"))
    except BadInput as exc:
        fail(str(exc))
    deck = Presentation()
    widen_template(deck)
    brand_theme(deck, brand)
    subtitle = str(outline.get("subtitle") or "")
    for index, entry in enumerate(slides):
        if index == 0:
            title_slide(deck, entry, subtitle, brand)
        else:
            content_slide(deck, entry, brand)
    deck.save(output)
    print(json.dumps({"ok": True, "path": output, "slides": len(slides), "titles": [s["title"] for s in slides],
                      "images": sum(1 for s in slides if s["image"]),
                      "size": f"{SLIDE_W:g} x {SLIDE_H:g} in (16:9)",
                      "fonts": {"heading": brand["heading"], "body": brand["body"]}}))


if __name__ == "__main__":
    main()
