"""End to end, every shipped scenario: `python -m orchestrator run --model scripted:SCENARIO --json` ends `done`
with files that open and hold the right content, no script source reaches the model, and running the same goal
again costs fewer tokens and no more tool calls."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from bundled_helpers import REPO, SCENARIOS, SKILLS, colour_share, csv_totals, evaluate

from orchestrator.validate.rules import ExpectedOutputs
from orchestrator.validate.validator import validate_outputs

SALES = SCENARIOS / "data" / "sales.csv"
PRIMARY = "#1F3A5F"


def run_goal(scenario: Path, out: Path, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "--skills", "skills", "--out", str(out),
         "--model", f"scripted:{scenario}", "--json"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout)


def script_lines(min_chars: int = 20) -> set[str]:
    """Lines of the bundled scripts long enough to be their own."""
    lines: set[str] = set()
    for script in SKILLS.rglob("*.py"):
        lines |= {line.strip() for line in script.read_text().splitlines() if len(line.strip()) >= min_chars}
    return lines


def strings(value: Any) -> str:
    """Every string inside a request body, unescaped, one per line (JSON text inside a string included)."""
    if isinstance(value, dict):
        return "\n".join(strings(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(strings(v) for v in value)
    if isinstance(value, str):
        try:
            inner = json.loads(value)
        except ValueError:
            return value
        return value + "\n" + strings(inner) if isinstance(inner, (dict, list)) else value
    return ""


# --- what each scenario must have produced ---------------------------------------------------------------------


def check_brand(out: Path) -> None:
    brand = json.loads((out / "brand.json").read_text())
    jsonschema.validate(brand, json.loads((SKILLS / "brand-guidelines" / "brand.schema.json").read_text()))
    assert brand["colors"]["primary"] == PRIMARY


def check_brand_deck(out: Path) -> None:
    from pptx import Presentation

    check_brand(out)
    deck = Presentation(str(out / "deck.pptx"))
    titles = [slide.shapes.title.text for slide in deck.slides]
    assert len(titles) == 5 and titles[0] == "Q3 results" and titles[-1] == "Next steps for Q4"


def check_csv_summary(out: Path) -> None:
    from PIL import Image

    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] == 12
    got = {g["key"]: g["sum"] for g in summary["totals"]["groups"]}
    assert got == pytest.approx(csv_totals(SALES, "region", "revenue"))
    with Image.open(out / "chart.png") as image:
        assert image.format == "PNG" and image.size == (960, 540)


def check_budget_workbook(out: Path) -> None:
    from openpyxl import load_workbook

    sheet = load_workbook(out / "budget.xlsx")["Budget"]
    assert [c.value for c in sheet[1]] == ["Item", "Oct", "Nov", "Dec", "Total"]
    assert sheet["E2"].value == "=SUM(B2:D2)" and sheet["E7"].value == "=SUM(E2:E6)"
    data = [[sheet.cell(row=r, column=c).value for c in (2, 3, 4)] for r in range(2, 7)]
    assert evaluate(sheet, sheet["E7"].value) == pytest.approx(sum(map(sum, data)))
    for column, month in zip("BCD", zip(*data, strict=True), strict=True):
        assert evaluate(sheet, sheet[f"{column}7"].value) == pytest.approx(sum(month))


def check_meeting_notes(out: Path) -> None:
    notes = (out / "meeting-notes.md").read_text()
    assert notes.startswith("# Website relaunch weekly")
    for heading in ("## Summary", "## Decisions", "## Action items", "## Open questions"):
        assert heading in notes
    actions = json.loads((out / "actions.json").read_text())["actions"]
    assert [a["owner"] for a in actions] == ["Ken Ito", "Tom Berg", "Priya Nair"]
    assert all(f"| {a['owner']} | {a['task']} | {a['due']} |" in notes for a in actions)


def check_status_report(out: Path) -> None:
    data = (out / "status-report.pdf").read_bytes()
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    assert b"/Count 1 " in data and b"/Title (Website relaunch: status at 21 Nov 2026)" in data
    assert b"LiberationSans" in data  # a TrueType face of the image, embedded (not a base-14 name)


def check_sales_report_chain(out: Path) -> None:
    from docx import Document
    from openpyxl import load_workbook

    check_brand(out)
    check_csv_summary(out)
    assert colour_share(out / "chart.png", PRIMARY) > 0.05  # csv-summary used the brand from step 1
    sheet = load_workbook(out / "sales.xlsx")["Sales"]
    assert sheet["A1"].fill.fgColor.rgb.endswith(PRIMARY[1:])  # xlsx used it too
    assert sheet["E14"].value == "=SUM(E2:E13)" and sheet["F2"].value == "=IF(D2=0,0,ROUND(E2/D2,2))"
    assert evaluate(sheet, sheet["E14"].value) == pytest.approx(sum(csv_totals(SALES, "region", "revenue").values()))
    doc = Document(str(out / "sales-report.docx"))
    summary = json.loads((out / "summary.json").read_text())
    [table] = doc.tables  # built from summary.json by the report skill, not retyped
    assert [row.cells[0].text for row in table.rows[1:]] == [g["key"] for g in summary["totals"]["groups"]]
    assert table.rows[1].cells[2].text == "35,700.50"
    assert len(doc.inline_shapes) == 1
    assert str(doc.styles["Heading 1"].font.color.rgb) == PRIMARY[1:]


def check_sales_deck_chain(out: Path) -> None:
    from pptx import Presentation
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    check_brand(out)
    check_csv_summary(out)
    assert colour_share(out / "chart.png", PRIMARY) > 0.05
    deck = Presentation(str(out / "sales-deck.pptx"))
    assert len(deck.slides) == 4
    pictures = [sum(s.shape_type == MSO_SHAPE_TYPE.PICTURE for s in slide.shapes) for slide in deck.slides]
    assert pictures == [0, 1, 0, 0]
    title = deck.slides[1].shapes.title.text_frame.paragraphs[0].runs[0]
    assert str(title.font.color.rgb) == PRIMARY[1:]


# --- every Office output, rendered in the sandbox and held to the layout rules -----------------------------------

OFFICE = (".pptx", ".docx", ".xlsx")
SYMBOL_FONTS = {"OpenSymbol"}  # LibreOffice's bullet glyphs


def pdf_fonts(pdf: bytes) -> set[str]:
    return {m.decode() for m in re.findall(rb"/BaseFont\s*/(?:[A-Z]{6}\+)?([^\s/\]>]+)", pdf)}


def check_renders(out: Path, result: dict[str, Any]) -> None:
    """Each Office output has a contact sheet of all its pages in the catalog, renders in the brand's own fonts
    (nothing substituted), and passes the layout check with the goal's brand and no finding but a note that a
    font renders with its metric-compatible twin."""
    from PIL import Image
    from pptx import Presentation

    brand = out / "brand.json"
    catalog = {a["path"]: a for a in result["artifacts"]}
    for path in [p for p in catalog if p.endswith(OFFICE) and not p.startswith(".thumbnails/")]:
        sheet, stem = f".thumbnails/{path}/contact.png", path.rsplit(".", 1)[0]
        assert catalog[sheet]["type"] == "thumbnail" and catalog[sheet]["metadata"]["thumbnail_of"] == path
        pdf = (out / ".thumbnails" / path / f"{stem}.pdf").read_bytes()
        pages = len(re.findall(rb"/Type\s*/Page\b", pdf))
        with Image.open(out / sheet) as image:
            assert image.format == "PNG" and max(image.size) <= 4096
            if brand.exists():  # the brand's primary colour is on the page: a title, a header row, a background
                assert colour_share(out / sheet, PRIMARY) > 0.002, path
        if path.endswith(".pptx"):
            deck = Presentation(str(out / path))
            assert pages == len(deck.slides)
            width, height = map(float, re.search(rb"/MediaBox\s*\[\s*0 0 ([\d.]+) ([\d.]+)", pdf).groups())
            assert abs(width / height - 16 / 9) < 0.01
        if brand.exists():
            names = json.loads(brand.read_text())["fonts"].values()
            allowed = {name.replace(" ", "") for name in names}
            assert {f for f in pdf_fonts(pdf) - SYMBOL_FONTS if not f.startswith(tuple(allowed))} == set(), path
    report = validate_outputs(out, ExpectedOutputs(), qa_mode="off", brand=brand if brand.exists() else None)
    assert report.pass_, report.violations
    assert all("metric-compatible" in w for w in report.warnings), report.warnings


CHECKS: dict[str, Callable[[Path], None]] = {
    "brand-deck": check_brand_deck,
    "brand-json": check_brand,
    "csv-summary": check_csv_summary,
    "budget-workbook": check_budget_workbook,
    "meeting-notes": check_meeting_notes,
    "status-report": check_status_report,
    "sales-report-chain": check_sales_report_chain,
    "sales-deck-chain": check_sales_deck_chain,
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_each_scenario_ends_done_with_real_files_and_runs_cheaper_the_second_time(scenario, cli_env, tmp_path):
    from orchestrator.llm.scenario import load_scenario

    first = run_goal(scenario, tmp_path / "out1", cli_env)
    assert first["status"] == "done" and first["goal"] == load_scenario(scenario).goal
    assert first["validation"]["pass"] is True
    assert first["validation_stats"]["runs"] >= 2 and first["validation_stats"]["pass_rate"] > 0
    assert all(len(a["sha256"]) == 64 and a["size"] > 0 for a in first["artifacts"])
    CHECKS.get(scenario.stem, lambda out: None)(tmp_path / "out1")
    check_renders(tmp_path / "out1", first)

    requests = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    if any(a["path"].endswith(OFFICE) for a in first["artifacts"]):  # the semantic check saw the contact sheets
        semantic = next(r for r in requests if r["_trace"].get("purpose") == "semantic")
        parts = [p["type"] for m in semantic["messages"] if isinstance(m["content"], list) for p in m["content"]]
        assert "image_url" in parts
    sent = [strings(request) for request in requests]
    leaked = sorted({line for line in script_lines() for text in sent if line in text})
    assert leaked == []

    second = run_goal(scenario, tmp_path / "out2", cli_env)
    assert second["status"] == "done"
    tokens = [r["metrics"]["tokens_in"] + r["metrics"]["tokens_out"] for r in (first, second)]
    assert tokens[1] < tokens[0]
    assert second["metrics"]["tool_calls"] <= first["metrics"]["tool_calls"]
    CHECKS.get(scenario.stem, lambda out: None)(tmp_path / "out2")
