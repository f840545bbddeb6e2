"""Goal lines are checked and completed at the producer: a scenario's inputs honoured, read here as blobs."""

from __future__ import annotations

import json
from pathlib import Path

from worker_helpers import REPO

from orchestrator.config import load_settings
from orchestrator.worker.submit import parse_lines

CSV_SCENARIO = REPO / "ops/scenarios/csv-summary.yaml"
SALES = REPO / "ops/scenarios/data/sales.csv"


def _parse(tmp_path: Path, *lines: dict[str, object]) -> tuple[list, list]:
    settings = load_settings(skills_dir=REPO / "skills", output_root=tmp_path / "out", scenario_dirs=[REPO, tmp_path])
    return parse_lines([json.dumps(line) for line in lines], settings)


def test_a_scripted_scenarios_inputs_are_the_goals_inputs_when_the_line_names_none(tmp_path: Path) -> None:
    good, bad = _parse(tmp_path, {"goal": "Summarise sales.csv", "model": f"scripted:{CSV_SCENARIO}"})
    assert bad == []
    [ref] = good[0].request.inputs
    assert (ref.name, ref.size) == ("sales.csv", SALES.stat().st_size) and good[0].blobs == [SALES.read_bytes()]


def test_the_lines_own_inputs_win_over_the_scenarios(tmp_path: Path) -> None:
    mine = tmp_path / "mine.csv"
    mine.write_text("region,revenue\nNorth,1\n")
    good, _ = _parse(tmp_path, {"goal": "g", "model": f"scripted:{CSV_SCENARIO}", "inputs": [str(mine)]})
    assert [ref.name for ref in good[0].request.inputs] == ["mine.csv"] and good[0].blobs == [mine.read_bytes()]


def test_a_scenario_naming_a_missing_input_or_broken_yaml_rejects_its_line_only(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    missing.write_text(CSV_SCENARIO.read_text().replace("inputs: [data/sales.csv]", "inputs: [nowhere.csv]"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("steps: [\n")
    good, bad = _parse(
        tmp_path,
        {"goal": "a", "model": f"scripted:{missing}"},
        {"goal": "b", "model": f"scripted:{broken}"},
        {"goal": "c", "model": f"scripted:{CSV_SCENARIO}"},
    )
    assert [g.line for g in good] == [3]
    assert [r.line for r in bad] == [1, 2]
    assert "nowhere.csv" in bad[0].reason and "broken.yaml" in bad[1].reason
