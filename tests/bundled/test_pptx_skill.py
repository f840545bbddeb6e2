"""document-skills/pptx: an outline becomes a deck that opens in python-pptx with one slide per entry, the brand's
colours and fonts, pictures placed beside the bullets; unusable outlines are refused naming the slide."""

from __future__ import annotations

import io
import json

import pytest
from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE
from pptx.util import Inches

from orchestrator.validate.rules import ExpectedOutputs
from orchestrator.validate.validator import validate_outputs

SKILL = "document-skills/pptx"
BUILD = "scripts/build_deck.py"
INSPECT = "scripts/inspect_deck.py"

OUTLINE = {
    "title": "Q3 results",
    "subtitle": "Board review, 21 Nov 2026",
    "slides": [
        {"title": "Q3 results", "bullets": ["21 Nov 2026"]},
        {"title": "Revenue up 12 %", "bullets": ["4.2 M EUR", "Subscriptions 61 %"], "image": "/inputs/chart.png"},
        {"title": "Next steps", "bullets": ["Launch EU pricing by 15 Dec (Sales)"]},
    ],
}


def _png(size: tuple[int, int] = (960, 540)) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, "#F28C28").save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def box(skill_sandbox, brand_json):
    bad = {"slides": [{"title": "ok"}, {"bullets": ["no title"]}]}
    return skill_sandbox(SKILL, {"outline.json": json.dumps(OUTLINE), "brand.json": brand_json, "chart.png": _png(),
                                 "bad.json": json.dumps(bad), "fake.png": "text", "notjson.json": "{",
                                 "navy.json": json.dumps({"colors": {"primary": "navy"}})})


def test_an_outline_becomes_a_branded_deck_with_the_chart_beside_the_bullets(box, tmp_path):
    args = {"outline": "/inputs/outline.json", "output": "build/deck.pptx", "brand": "/inputs/brand.json"}
    run = box.run(BUILD, args)
    assert run.exit_code == 0 and run.out["ok"] is True, run
    assert (run.out["slides"], run.out["images"]) == (3, 1)
    deck = Presentation(str(box.file("build/deck.pptx", tmp_path / "deck.pptx")))
    assert (deck.slide_width, deck.slide_height) == (12191695, 6858000)  # 16:9, as the layout rules say
    assert [s.shapes.title.text for s in deck.slides] == ["Q3 results", "Revenue up 12 %", "Next steps"]
    first, chart_slide, last = deck.slides
    # the title slide says "21 Nov 2026" once: the bullet repeats part of the subtitle, so it is dropped
    assert [p.text for p in first.placeholders[1].text_frame.paragraphs] == ["Board review, 21 Nov 2026"]
    assert str(first.background.fill.fore_color.rgb) == "1F3A5F"
    title_run = chart_slide.shapes.title.text_frame.paragraphs[0].runs[0]
    assert str(title_run.font.color.rgb) == "1F3A5F" and title_run.font.name == "Lato" and title_run.font.bold
    body_run = last.placeholders[1].text_frame.paragraphs[0].runs[0]
    assert body_run.font.name == "Source Sans 3" and str(body_run.font.color.rgb) == "1A1A1A"
    for slide in deck.slides:  # every slide's title and body span the slide's safe area, not a 4:3 left part
        title = slide.shapes.title
        assert title.left <= Inches(1) and title.left + title.width >= deck.slide_width - Inches(1)
    [picture] = [s for s in chart_slide.shapes if s.shape_type == MSO_SHAPE_TYPE.PICTURE]
    body = chart_slide.placeholders[1]
    assert picture.left >= body.left + body.width  # beside the bullets, not over them
    assert picture.left + picture.width <= deck.slide_width and picture.top + picture.height <= deck.slide_height
    assert abs(picture.width / picture.height - 960 / 540) < 0.01
    accents = [s for s in chart_slide.shapes if s.name == "Accent bar"]
    assert len(accents) == 1 and str(accents[0].fill.fore_color.rgb) == "F28C28"
    assert accents[0].text_frame.text == ""  # never text on the accent colour


def test_the_deck_passes_the_layout_check_with_its_brand(box, tmp_path, brand_json):
    box.run(BUILD, {"outline": "/inputs/outline.json", "output": "build/checked.pptx", "brand": "/inputs/brand.json"})
    out = tmp_path / "out"
    out.mkdir()
    box.file("build/checked.pptx", out / "checked.pptx")
    (tmp_path / "brand.json").write_text(brand_json)
    report = validate_outputs(out, ExpectedOutputs(), qa_mode="off", brand=tmp_path / "brand.json")
    assert report.pass_ and report.warnings == [], (report.violations, report.warnings)


def test_inspect_reports_titles_and_pictures(box):
    box.run(BUILD, {"outline": "/inputs/outline.json", "output": "build/plain.pptx"})
    described = box.run(INSPECT, {"path": "build/plain.pptx"})
    assert described.out["slides"] == 3 and described.out["pictures"] == [0, 1, 0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"outline": "/inputs/bad.json", "output": "build/d.pptx"}, "slide 2 has no title"),
        ({"outline": "/inputs/notjson.json", "output": "build/d.pptx"}, "outline is not valid JSON"),
        ({"outline": "/inputs/outline.json", "output": "/tmp/d.pptx"}, "must be a path under build/"),
        ({"outline": "/inputs/outline.json", "output": "build/d.pptx", "brand": "/inputs/navy.json"},
         "brand colors.primary must be a colour like #1F3A5F"),
        ({"outline": "/inputs/missing.json", "output": "build/d.pptx"}, "outline not found"),
        ({"outline": "/inputs/outline.json"}, "expected args"),
    ],
)
def test_unusable_outlines_are_refused_with_what_to_change(box, args, message):
    run = box.run(BUILD, args)
    assert run.exit_code == 2 and run.out["ok"] is False
    assert message in run.out["error"]


def test_a_picture_that_is_not_an_image_is_refused(box, tmp_path):
    outline = {"slides": [{"title": "A", "image": "/inputs/fake.png"}]}
    path = box.inputs / "fake-outline.json"
    path.write_text(json.dumps(outline))
    path.chmod(0o644)
    run = box.run(BUILD, {"outline": "/inputs/fake-outline.json", "output": "build/d.pptx"})
    assert run.exit_code == 2 and "slide 1 image /inputs/fake.png is not a PNG or JPEG image" in run.out["error"]


def test_the_deck_is_16_9_in_every_part_slide_size_type_master_and_layouts(box, tmp_path):
    args = {"outline": "/inputs/outline.json", "output": "build/wide.pptx", "brand": "/inputs/brand.json"}
    assert box.run(BUILD, args).exit_code == 0
    deck = Presentation(str(box.file("build/wide.pptx", tmp_path / "wide.pptx")))
    width, height = deck.slide_width, deck.slide_height
    assert abs(width / height - 16 / 9) < 0.001
    size = deck.part._element.find("{http://schemas.openxmlformats.org/presentationml/2006/main}sldSz")
    assert size.get("type") in (None, "custom"), size.attrib  # never screen4x3 on a 16:9 slide
    owners = [deck.slide_master, *deck.slide_layouts, *deck.slides]
    boxes = [(owner, shape) for owner in owners for shape in owner.shapes if shape.width]
    assert len(boxes) > 40
    outside = [
        (getattr(owner, "name", "slide"), shape.name, shape.left, shape.top, shape.width, shape.height)
        for owner, shape in boxes
        if shape.left < 0 or shape.top < 0 or shape.left + shape.width > width or shape.top + shape.height > height
    ]
    assert outside == []
    # the master's title spans the wide slide, not the 10 in of the 4:3 template
    assert deck.slide_master.placeholders[0].width > 0.8 * width
