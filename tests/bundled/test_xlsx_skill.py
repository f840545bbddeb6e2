"""document-skills/xlsx: workbooks open in openpyxl, computed cells are formulas whose values (evaluated here, as a
spreadsheet app would on open) equal the sums of the data, CSV cells never become formulas, and unsafe or wrong
formulas are refused."""

from __future__ import annotations

import csv
import io
import zipfile

import pytest
from bundled_helpers import SCENARIOS, csv_totals, evaluate
from openpyxl import load_workbook

SKILL = "document-skills/xlsx"
BUILD = "scripts/build_workbook.py"
INSPECT = "scripts/inspect_workbook.py"

BUDGET = {
    "sheets": [
        {
            "name": "Budget",
            "columns": ["Item", "Q1", "Q2"],
            "rows": [["Rent", 1200, 1200], ["Travel", 300.5, 450], ["Tools", 99.5, "=B4*2"]],
            "formulas": {"Total": "=[Q1]{row}+[Q2]{row}", "Share": "=[Total]{row}/SUM([Total]{first}:[Total]{last})"},
            "totals": {"label": "Sum", "columns": ["Q1", "Q2", "Total"]},
            "number_formats": {"Share": "0.0%"},
            "chart": {"title": "Spend", "categories": "Item", "values": ["Q1", "Q2"]},
        },
        {"name": "Mean", "columns": ["What", "Value"], "rows": [["Mean Q1", "=AVERAGE(Budget!B2:B4)"]]},
    ]
}


@pytest.fixture(scope="module")
def box(skill_sandbox, brand_json):
    return skill_sandbox(
        SKILL,
        {
            "sales.csv": (SCENARIOS / "data" / "sales.csv").read_text(),
            "evil.csv": 'name,amount\n"=HYPERLINK(""http://x.invalid"",""click"")",1\n=1+1,2\n',
            "brand.json": brand_json,
        },
    )


@pytest.fixture(scope="module")
def budget(box, tmp_path_factory):
    run = box.run(BUILD, {"workbook": BUDGET, "output": "build/budget.xlsx", "brand": "/inputs/brand.json"})
    assert run.exit_code == 0 and run.out["ok"] is True, run
    path = box.file("build/budget.xlsx", tmp_path_factory.mktemp("xlsx") / "budget.xlsx")
    return run, path


def test_computed_cells_are_formulas_that_recalculate_to_the_right_values(budget):
    run, path = budget
    sheet = load_workbook(path)["Budget"]
    assert [c.value for c in sheet[1]] == ["Item", "Q1", "Q2", "Total", "Share"]
    assert sheet["D2"].value == "=B2+C2" and sheet["C4"].value == "=B4*2"
    assert sheet["E3"].value == "=D3/SUM(D2:D4)"
    assert [sheet[f"{c}5"].value for c in "ABCD"] == ["Sum", "=SUM(B2:B4)", "=SUM(C2:C4)", "=SUM(D2:D4)"]
    q1, q2 = [1200, 300.5, 99.5], [1200, 450, 199]
    assert evaluate(sheet, sheet["B5"].value) == pytest.approx(sum(q1))
    assert evaluate(sheet, sheet["C5"].value) == pytest.approx(sum(q2))
    assert evaluate(sheet, sheet["D5"].value) == pytest.approx(sum(q1) + sum(q2))
    assert sum(evaluate(sheet, sheet[f"E{r}"].value) for r in (2, 3, 4)) == pytest.approx(1.0)
    assert run.out["sheets"][0]["totals"]["Total"] == {"cell": "D5", "formula": "=SUM(D2:D4)"}


def test_libreoffice_recalculates_the_formulas_to_the_values_computed_here(box, budget):
    """A real spreadsheet engine in the sandbox computes the formulas (they carry no cached values)."""
    convert = ["soffice", "--headless", "--norestore", "--convert-to", "csv", "--outdir", "build/recalc"]
    result = box.job.run_command([*convert, "build/budget.xlsx"], timeout_s=110)
    assert result.ok, (result.reason, result.stderr_summary)
    rows = list(csv.reader(io.StringIO(box.job.read_file("recalc/budget.csv").decode("utf-8"))))
    assert rows[0] == ["Item", "Q1", "Q2", "Total", "Share"]
    computed = {row[0]: [float(x) for x in row[1:4]] for row in rows[1:]}
    assert computed["Tools"] == pytest.approx([99.5, 199, 298.5])
    assert computed["Sum"] == pytest.approx([1600, 1849, 3449])
    shares = [float(row[4].rstrip("%")) / (100 if row[4].endswith("%") else 1) for row in rows[1:4]]
    assert sum(shares) == pytest.approx(1.0, abs=0.01)


def test_the_workbook_asks_spreadsheet_apps_to_recalculate_on_open_and_carries_style_and_chart(budget):
    _, path = budget
    with zipfile.ZipFile(path) as package:
        assert 'fullCalcOnLoad="1"' in package.read("xl/workbook.xml").decode()
        assert any(name.startswith("xl/charts/chart") for name in package.namelist())
    book = load_workbook(path)
    header = book["Budget"]["A1"]
    assert header.font.b and header.fill.fgColor.rgb.endswith("1F3A5F")
    assert book["Mean"]["B2"].value == "=AVERAGE(Budget!B2:B4)"


def test_inspect_lists_formulas_and_flags_references_outside_the_data(box, budget):
    report = box.run(INSPECT, {"path": "build/budget.xlsx"})
    assert report.exit_code == 0 and report.out["ok"] is True and report.out["problems"] == []
    assert report.out["sheets"][0]["charts"] == 1 and report.out["sheets"][0]["formulas"] == 3 + 3 + 1 + 3
    broken = {"sheets": [{"name": "S", "columns": ["a", "b"], "rows": [[1, "=A99"], [2, "=Other!A1"]]}]}
    assert box.run(BUILD, {"workbook": broken, "output": "build/broken.xlsx"}).exit_code == 0
    report = box.run(INSPECT, {"path": "build/broken.xlsx"})
    assert report.out["ok"] is False
    assert any("A99 is outside the used range" in p for p in report.out["problems"])
    assert any("missing sheet 'Other'" in p for p in report.out["problems"])


def test_a_sheet_loaded_from_csv_keeps_numbers_as_numbers_and_formula_text_inert(box, tmp_path):
    spec = {"sheets": [{"name": "Sales", "csv": "/inputs/sales.csv", "totals": {"columns": ["units", "revenue"]}},
                       {"name": "Evil", "csv": "/inputs/evil.csv"}]}
    run = box.run(BUILD, {"workbook": spec, "output": "build/sales.xlsx"})
    assert run.exit_code == 0, run
    book = load_workbook(box.file("build/sales.xlsx", tmp_path / "sales.xlsx"))
    sales = book["Sales"]
    assert sales["E2"].value == 14400.5 and sales["D2"].value == 120 and sales["A2"].value == "North"
    assert sales["E14"].value == "=SUM(E2:E13)"
    expected = sum(csv_totals(SCENARIOS / "data" / "sales.csv", "region", "revenue").values())
    assert evaluate(sales, sales["E14"].value) == pytest.approx(expected)
    evil = book["Evil"]
    assert evil["A2"].data_type == "s" and evil["A2"].value.startswith("=HYPERLINK")
    assert evil["A3"].data_type == "s"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"sheets": [{"columns": ["a"], "rows": [['=HYPERLINK("x.invalid")']]}]}, "unknown function HYPERLINK"),
        ({"sheets": [{"columns": ["a"], "rows": [['=WEBSERVICE("http://x.invalid")']]}]}, "may not link to other"),
        ({"sheets": [{"columns": ["a"], "rows": [["=cmd|' /C calc'!A0"]]}]}, "may not link to other programs"),
        ({"sheets": [{"columns": ["a"], "rows": [["=SUM(A1:A2"]]}]}, "unbalanced parentheses"),
        ({"sheets": [{"columns": ["a"], "formulas": {"b": "=[c]{row}"}}]}, "[c] is not a column"),
        ({"sheets": [{"columns": ["a"], "totals": {"columns": ["a"], "function": "EXEC"}}]}, "not one of"),
        ({"sheets": [{"name": "x", "columns": ["a"]}, {"name": "X", "columns": ["a"]}]}, "is used twice"),
        ({"sheets": [{"name": "a/b", "columns": ["a"]}]}, "must be 1-31 characters"),
        ({"sheets": []}, 'the spec needs "sheets"'),
    ],
)
def test_unsafe_or_wrong_specs_are_refused(box, spec, message):
    run = box.run(BUILD, {"workbook": spec, "output": "build/x.xlsx"})
    assert run.exit_code == 2 and run.out["ok"] is False
    assert message in run.out["error"]


def test_the_output_must_be_an_xlsx_under_build(box):
    for output in ("/tmp/x.xlsx", "build/../x.xlsx", "build/x.xls"):
        run = box.run(BUILD, {"workbook": BUDGET, "output": output})
        assert run.exit_code == 2 and "output" in run.out["error"]
