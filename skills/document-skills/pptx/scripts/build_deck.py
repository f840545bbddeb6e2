#!/usr/bin/env python3
"""Builds a .pptx deck from an outline JSON; args on stdin, result JSON on stdout."""
import json
import sys
from pathlib import Path

from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.util import Inches, Pt

DEFAULT_BRAND = dict(
    colors={"primary": "#1F2A44", "text": "#222222", "background": "#FFFFFF"},
    fonts={"heading": "Arial", "body": "Arial"},
    sizes_pt={"title": 36, "body": 20})


def die(message):
    sys.stderr.write(f"build_deck: {message}\n")
    sys.exit(1)


def rgb(value):
    value = value.lstrip("#")
    return RGBColor(int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16))


def style(paragraph, font, size, colour):
    for run in paragraph.runs:
        run.font.name = font
        run.font.size = Pt(size)
        run.font.color.rgb = colour


def load_json(path, what):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        die(f"{what} not found: {path}")
    except json.JSONDecodeError as exc:
        die(f"{what} is not valid JSON ({path}): {exc}")


def main():
    args = json.load(sys.stdin)
    if not isinstance(args, dict) or "outline" not in args or "output" not in args:
        die("expected args {\"outline\": PATH, \"output\": PATH, \"brand\": PATH?}")
    outline = load_json(args["outline"], "outline")
    slides = outline.get("slides") if isinstance(outline, dict) else None
    if not isinstance(slides, list) or not slides:
        die("the outline needs a non-empty 'slides' list")
    brand = dict(DEFAULT_BRAND)
    if args.get("brand"):
        brand.update(load_json(args["brand"], "brand file"))
    colours, fonts, sizes = brand["colors"], brand["fonts"], brand.get("sizes_pt", DEFAULT_BRAND["sizes_pt"])

    deck = Presentation()
    deck.slide_width, deck.slide_height = Inches(13.333), Inches(7.5)
    for index, entry in enumerate(slides):
        if not isinstance(entry, dict) or not str(entry.get("title", "")).strip():
            die(f"slide {index + 1} has no title")
        layout = deck.slide_layouts[0 if index == 0 else 1]
        slide = deck.slides.add_slide(layout)
        slide.shapes.title.text = str(entry["title"])
        style(slide.shapes.title.text_frame.paragraphs[0], fonts["heading"], sizes["title"], rgb(colours["primary"]))
        lines = [str(b) for b in entry.get("bullets", [])]
        if index == 0 and outline.get("subtitle"):
            lines = [str(outline["subtitle"]), *lines]
        body = slide.placeholders[1].text_frame
        for number, line in enumerate(lines):
            paragraph = body.paragraphs[0] if number == 0 else body.add_paragraph()
            paragraph.text = line
            style(paragraph, fonts["body"], sizes["body"], rgb(colours["text"]))

    output = Path(args["output"])
    output.parent.mkdir(parents=True, exist_ok=True)
    deck.save(output)
    titles = [str(s["title"]) for s in slides]
    print(json.dumps({"path": str(output), "slides": len(slides), "titles": titles}))


if __name__ == "__main__":
    main()
