"""document-skills/report: the same outline gives a .docx that opens in python-docx (headings, a table built from a
csv-summary summary.json, the chart embedded, brand colours) and a one-page PDF; bad outlines are refused."""

from __future__ import annotations

import json

import pytest
from docx import Document

SKILL = "document-skills/report"
BUILD = "scripts/build_report.py"
INSPECT = "scripts/inspect_report.py"

SUMMARY = {
    "rows": 4,
    "totals": {"by": "region", "value": "revenue", "groups": [
        {"key": "North", "count": 2, "sum": 300.5, "mean": 150.25},
        {"key": "South", "count": 2, "sum": 120, "mean": 60},
    ]},
}
REPORT = {
    "title": "Q3 sales review",
    "subtitle": "Regional results",
    "author": "Data team",
    "date": "21 Nov 2026",
    "sections": [
        {"heading": "Summary", "paragraphs": ["Revenue reached 420.5 EUR."],
         "bullets": ["North leads", "South trails"]},
        {"heading": "By region", "table": {"summary": "/inputs/summary.json"}, "image": "/inputs/chart.png",
         "caption": "Figure 1. Revenue by region"},
        {"heading": "Costs", "table": {"columns": ["Item", "EUR"], "rows": [["Rent", 1200], ["Travel", 450.5]]}},
        {"heading": "Next steps", "bullets": ["Review pricing by 15 Dec"]},
    ],
}


def _png() -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 32), "#1F3A5F").save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def box(skill_sandbox, brand_json):
    return skill_sandbox(SKILL, {"summary.json": json.dumps(SUMMARY), "chart.png": _png(), "brand.json": brand_json,
                                 "fake.png": "not an image", "report.json": json.dumps(REPORT)})


def test_a_docx_report_opens_with_its_headings_summary_table_chart_and_brand(box, tmp_path):
    run = box.run(BUILD, {"spec": "/inputs/report.json", "output": "build/report.docx", "brand": "/inputs/brand.json"})
    assert run.exit_code == 0 and run.out["ok"] is True, run
    assert run.out["headings"] == ["Summary", "By region", "Costs", "Next steps"]
    doc = Document(str(box.file("build/report.docx", tmp_path / "report.docx")))
    headings = [p.text for p in doc.paragraphs if p.style.name == "Heading 1"]
    assert headings == ["Summary", "By region", "Costs", "Next steps"]
    assert [p.text for p in doc.paragraphs if p.style.name == "Title"] == ["Q3 sales review"]
    assert [p.text for p in doc.paragraphs if p.style.name == "List Bullet"] == [
        "North leads", "South trails", "Review pricing by 15 Dec"]
    region, costs = doc.tables
    assert [c.text for c in region.rows[0].cells] == ["region", "rows", "total revenue", "mean revenue"]
    assert [[c.text for c in row.cells] for row in region.rows[1:]] == [
        ["North", "2", "300.50", "150.25"], ["South", "2", "120", "60"]]
    assert [[c.text for c in row.cells] for row in costs.rows] == [["Item", "EUR"], ["Rent", "1,200"],
                                                                 ["Travel", "450.50"]]
    assert len(doc.inline_shapes) == 1
    assert str(doc.styles["Heading 1"].font.color.rgb) == "1F3A5F"
    assert doc.styles["Normal"].font.name == "Source Sans 3"


def test_the_same_outline_gives_a_one_page_pdf(box, tmp_path):
    run = box.run(BUILD, {"spec": "/inputs/report.json", "output": "build/report.pdf", "brand": "/inputs/brand.json"})
    assert run.exit_code == 0 and run.out["format"] == "pdf", run
    data = box.file("build/report.pdf", tmp_path / "report.pdf").read_bytes()
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    described = box.run(INSPECT, {"path": "build/report.pdf"})
    assert described.out["pages"] == 1 and described.out["title"] == "Q3 sales review"
    for text in ("Q3 sales review", "Summary", "By region", "North", "300.50"):
        assert text in described.out["preview"]


def test_inspect_describes_a_docx(box):
    box.run(BUILD, {"report": REPORT, "output": "build/again.docx"})
    described = box.run(INSPECT, {"path": "build/again.docx"})
    assert described.out["ok"] is True and described.out["title"] == "Q3 sales review"
    assert (described.out["tables"], described.out["images"]) == (2, 1)


@pytest.mark.parametrize(
    ("report", "message"),
    [
        ({"sections": [{"heading": "A"}]}, "the report needs a 'title'"),
        ({"title": "T", "sections": [{"paragraphs": ["x"]}]}, "section 1 needs a 'heading'"),
        ({"title": "T", "sections": [{"heading": "A", "image": "/inputs/fake.png"}]}, "is not a PNG or JPEG image"),
        ({"title": "T", "sections": [{"heading": "A", "image": "/etc/hostname"}]}, "must be under /inputs/"),
        ({"title": "T", "sections": [{"heading": "A", "table": {"columns": ["a", "b"], "rows": [[1]]}}]},
         "every row must be a list of 2 cells"),
        ({"title": "T", "sections": [{"heading": "A", "table": {"summary": "/inputs/report.json"}}]}, "no 'totals'"),
        ({"title": "T", "sections": [{"heading": "A", "video": "x"}]}, "unknown keys ['video']"),
    ],
)
def test_bad_outlines_are_refused_naming_the_section_and_field(box, report, message):
    run = box.run(BUILD, {"report": report, "output": "build/bad.docx"})
    assert run.exit_code == 2 and run.out["ok"] is False
    assert message in run.out["error"]
