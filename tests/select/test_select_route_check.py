"""`skills route-check`: skills whose descriptions a router would confuse, and skills no goal reaches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from select_corpus import write_skill


def _library(root: Path) -> Path:
    write_skill(root, "xlsx-to-csv", name="xlsx-to-csv",
                description="Convert Excel spreadsheets into CSV files, one file per sheet.", body="Steps.")
    write_skill(root, "sheet-export", name="sheet-export",
                description="Convert Excel spreadsheet files into CSV, one CSV file for each sheet.", body="Steps.")
    write_skill(root, "weather-report", name="weather-report",
                description="Forecast tomorrow's weather for a city: rain, wind and temperature.", body="Steps.")
    write_skill(root, "pet-portrait", name="pet-portrait",
                description="Draw a watercolour portrait of a pet from a photo.", body="Steps.")
    return root


def _run(*args: str, semantic: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ORCH_SELECTION__SEMANTIC": "true" if semantic else "false"}
    return subprocess.run([sys.executable, "-m", "orchestrator", "skills", "route-check", *args],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize(("semantic", "measure"), [(True, "embedding-cosine"), (False, "word-jaccard")])
def test_two_skills_that_say_the_same_overlap_and_different_ones_do_not(tmp_path, semantic, measure):
    root = _library(tmp_path / "skills")
    proc = _run("--root", str(root), "--json", semantic=semantic)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["skills"] == 4 and report["measure"] == measure
    assert [{o["a"], o["b"]} for o in report["overlaps"]] == [{"xlsx-to-csv", "sheet-export"}]
    assert report["overlaps"][0]["similarity"] >= report["threshold"]
    assert report["goals"] == 0 and report["unreached"] == []


def test_skills_no_goal_reaches_are_named_and_the_text_report_says_what_to_do(tmp_path):
    root = _library(tmp_path / "skills")
    goals = tmp_path / "goals.txt"
    goals.write_text(
        "# goals people asked last month\n"
        "Will it rain in Lisbon tomorrow?\n"
        '{"goal": "My spreadsheet needs to become CSV for the import", "expect": ["xlsx-to-csv"]}\n'
    )
    proc = _run("--root", str(root), "--goals", str(goals), "--k", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["goals"] == 2 and report["k"] == 1
    assert "pet-portrait" in [u["id"] for u in report["unreached"]]
    assert report["reached"]["weather-report"] == 1 and len(report["reached"]) == 2
    text = _run("--root", str(root), "--goals", str(goals), "--k", "1")
    assert text.returncode == 0, text.stderr
    assert "sheet-export  <->  xlsx-to-csv" in text.stdout
    assert "make their descriptions say how they differ" in text.stdout
    assert "skill(s) no goal reaches" in text.stdout and "pet-portrait" in text.stdout


def test_a_bad_goal_line_is_named_by_its_line_number(tmp_path):
    root = _library(tmp_path / "skills")
    goals = tmp_path / "goals.jsonl"
    goals.write_text('{"goal": "ok"}\n{"goal": ""}\n')
    proc = _run("--root", str(root), "--goals", str(goals), "--json")
    assert proc.returncode == 1 and "goals.jsonl:2" in proc.stdout
