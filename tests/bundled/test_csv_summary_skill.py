"""data/csv-summary: the summary's numbers equal what the csv and statistics modules compute, the chart is a real
PNG in the brand colour, and bad input is refused with a message that says what to change."""

from __future__ import annotations

import json
import random
import statistics

import pytest
from bundled_helpers import SCENARIOS, colour_share, csv_totals

SKILL = "data/csv-summary"
SCRIPT = "scripts/summarize.py"


def _generated_csv() -> tuple[str, list[dict[str, str]]]:
    """Deterministic awkward data: quoted commas, negatives, decimals, blanks and a text column."""
    rng = random.Random(12)
    rows = []
    for n in range(60):
        amount = "" if n % 13 == 0 else f"{rng.uniform(-50, 900):.2f}"
        rows.append({"team": rng.choice(["Ops, EU", "Sales", "R&D"]), "amount": amount, "qty": str(rng.randint(0, 9))})
    lines = ["team,amount,qty", *(f'"{r["team"]}",{r["amount"]},{r["qty"]}' for r in rows)]
    return "\n".join(lines) + "\n", rows


@pytest.fixture(scope="module")
def box(skill_sandbox, brand_json):
    text, _ = _generated_csv()
    return skill_sandbox(
        SKILL,
        {
            "sales.csv": (SCENARIOS / "data" / "sales.csv").read_text(),
            "generated.csv": text,
            "semi.csv": "city;visits\nOslo;3\nBergen;4\nOslo;5\n",
            "ragged.csv": "a,b\n1,2\n3\n",
            "brand.json": brand_json,
        },
    )


def test_column_statistics_and_group_totals_match_an_independent_computation(box, tmp_path):
    text, rows = _generated_csv()
    run = box.run(SCRIPT, {"csv": "/inputs/generated.csv", "group_by": "team", "value": "amount",
                           "output": "build/gen.json"})
    assert run.exit_code == 0 and run.out["ok"] is True, run
    saved = json.loads(box.file("build/gen.json", tmp_path / "gen.json").read_text())
    assert saved["rows"] == 60
    amounts = [float(r["amount"]) for r in rows if r["amount"]]
    amount = next(c for c in saved["columns"] if c["name"] == "amount")
    assert amount["type"] == "number" and amount["missing"] == 60 - len(amounts)
    assert amount["sum"] == pytest.approx(sum(amounts), abs=1e-6)
    assert amount["mean"] == pytest.approx(statistics.fmean(amounts), abs=1e-6)
    assert amount["median"] == pytest.approx(statistics.median(amounts), abs=1e-6)
    assert (amount["min"], amount["max"]) == (min(amounts), max(amounts))
    team = next(c for c in saved["columns"] if c["name"] == "team")
    assert team["type"] == "text" and team["distinct"] == 3
    expected = {}
    for r in rows:
        if r["amount"]:
            expected[r["team"]] = expected.get(r["team"], 0.0) + float(r["amount"])
    got = {g["key"]: g["sum"] for g in saved["totals"]["groups"]}
    assert got == pytest.approx(expected, abs=1e-6)
    assert [g["sum"] for g in saved["totals"]["groups"]] == sorted(got.values(), reverse=True)


def test_the_scenario_data_totals_and_a_brand_coloured_chart(box, tmp_path):
    run = box.run(SCRIPT, {"csv": "/inputs/sales.csv", "group_by": "region", "value": "revenue",
                           "chart": "build/chart.png", "brand": "/inputs/brand.json"})
    assert run.exit_code == 0, run
    expected = csv_totals(SCENARIOS / "data" / "sales.csv", "region", "revenue")
    assert {g["key"]: g["sum"] for g in run.out["totals"]["groups"]} == pytest.approx(expected)
    png = box.file("build/chart.png", tmp_path / "chart.png")
    from PIL import Image

    with Image.open(png) as image:
        assert image.format == "PNG" and image.size == (960, 540)
    assert colour_share(png, "#1F3A5F") > 0.05  # the bars are in the brand's primary colour


def test_the_delimiter_is_detected(box):
    run = box.run(SCRIPT, {"csv": "/inputs/semi.csv", "group_by": "city", "value": "visits", "output": "build/s.json"})
    assert run.out["delimiter"] == ";"
    assert {g["key"]: g["sum"] for g in run.out["totals"]["groups"]} == {"Oslo": 8, "Bergen": 4}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "'csv' is required"),
        ({"csv": "/inputs/sales.csv", "group_by": "country", "value": "revenue"}, "'country' is not in the CSV"),
        ({"csv": "/inputs/sales.csv", "group_by": "region", "value": "product"}, "must hold numbers"),
        ({"csv": "/inputs/sales.csv", "chart": "build/c.png"}, "a chart needs 'group_by' and 'value'"),
        ({"csv": "/inputs/ragged.csv"}, "data row 3 has 1 cells"),
        ({"csv": "/inputs/nope.csv"}, "CSV file not found"),
        ({"csv": "/etc/passwd"}, "absolute paths must be under /inputs/"),
        ({"csv": "/inputs/../etc/passwd"}, "must not contain '..'"),
        ({"csv": "/inputs/sales.csv", "output": "/tmp/x.json"}, "must be a path under build/"),
        ({"csv": "/inputs/sales.csv", "colour": "red"}, "unknown args ['colour']"),
    ],
)
def test_bad_input_is_refused_with_what_to_change(box, args, message):
    run = box.run(SCRIPT, args)
    assert run.exit_code == 2 and run.out["ok"] is False
    assert message in run.out["error"]
