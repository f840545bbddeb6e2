#!/usr/bin/env python3
"""Builds a .pptx deck from an outline JSON. Args: a JSON object on stdin (or as the only command-line argument).

Result: JSON on stdout. Bad input exits 2 with {"ok": false, "error": ...} on stdout and the reason on stderr.
"""
import json
import re
import sys
from pathlib import PurePosixPath

from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.util import Inches, Pt

DEFAULT_BRAND = {
    "colors": {"primary": "#1F2A44", "text": "#222222", "background": "#FFFFFF"},
    "fonts": {"heading": "Arial", "body": "Arial"},
    "sizes_pt": {"title": 36, "body": 20},
}
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


def add_slide(deck, index, entry, subtitle, brand):
    slide = deck.slides.add_slide(deck.slide_layouts[0 if index == 0 else 1])
    slide.shapes.title.text = entry["title"]
    style(slide.shapes.title.text_frame.paragraphs[0], brand["heading"], brand["title_pt"], brand["primary"])
    lines = [subtitle, *entry["bullets"]] if index == 0 and subtitle else entry["bullets"]
    body_shape = slide.placeholders[1]
    if entry["image"]:
        # Bullets on the left half, the picture on the right half, scaled to fit.
        body_shape.left, body_shape.top, body_shape.width = Inches(0.5), Inches(1.5), Inches(6.0)
        path, (width, height) = entry["image"]
        box_w, box_h = 6.3, 5.2
        scale = min(box_w / width, box_h / height)
        slide.shapes.add_picture(path, Inches(6.6), Inches(1.5), Inches(width * scale), Inches(height * scale))
    body = body_shape.text_frame
    for number, line in enumerate(lines):
        paragraph = body.paragraphs[0] if number == 0 else body.add_paragraph()
        paragraph.text = line
        style(paragraph, brand["body"], brand["body_pt"], brand["text"])


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
    deck.slide_width, deck.slide_height = Inches(13.333), Inches(7.5)
    subtitle = str(outline.get("subtitle") or "")
    for index, entry in enumerate(slides):
        add_slide(deck, index, entry, subtitle, brand)
    deck.save(output)
    print(json.dumps({"ok": True, "path": output, "slides": len(slides), "titles": [s["title"] for s in slides],
                      "images": sum(1 for s in slides if s["image"])}))


if __name__ == "__main__":
    main()
