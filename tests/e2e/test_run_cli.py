"""End to end: `python -m orchestrator run` with the scripted OpenAI-compatible server, the real `openai` client,
the real sandbox and the bundled skills."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "ops" / "scenarios" / "brand-deck.yaml"


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )


@pytest.fixture
def cli_env(tmp_path: Path, sandbox_image: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        ORCH_CACHE_DIR=str(tmp_path / "cache"),
        ORCH_SCRIPTED_TRACE=str(tmp_path / "trace.jsonl"),
        ORCH_SANDBOX__LABEL_PREFIX="orchtest",
    )
    return env


def _script_lines() -> set[str]:
    lines = set()
    for script in (REPO / "skills").rglob("*"):
        if script.suffix in (".py", ".sh", ".js") and script.is_file():
            lines |= {line.strip() for line in script.read_text().splitlines() if line.strip()}
    return lines


def test_the_demo_goal_produces_a_validated_five_slide_deck_and_a_clean_trace(cli_env, tmp_path):
    out = tmp_path / "out"
    proc = run_cli(
        "run",
        "--skills",
        "skills",
        "--out",
        str(out),
        "--model",
        f"scripted:{SCENARIO}",
        "--json",
        env=cli_env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "done"
    assert {a["path"] for a in result["artifacts"]} >= {"deck.pptx", "brand.json", "outline.json"}
    assert all(len(a["sha256"]) == 64 and a["size"] > 0 for a in result["artifacts"])
    assert result["validation"]["pass"] is True and result["validation"]["stage"] == "semantic"
    assert set(result["metrics"]) >= {"tokens_in", "tokens_out", "tool_calls", "duration_ms"}

    from pptx import Presentation

    assert len(Presentation(str(out / "deck.pptx")).slides) == 5

    requests = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    texts = [json.dumps(r, ensure_ascii=False) for r in requests]
    leaked = [line for line in _script_lines() for text in texts if line in text]
    assert leaked == []
    plan_text = texts[0]
    assert "Acme brand guidelines" not in plan_text and "# Slide decks (.pptx)" not in plan_text
    assert "brand-guidelines" in plan_text


def test_a_second_identical_run_costs_fewer_tokens_and_no_more_tool_calls(cli_env, tmp_path):
    metrics = []
    for n in range(2):
        proc = run_cli(
            "run",
            "--skills",
            "skills",
            "--out",
            str(tmp_path / f"out{n}"),
            "--model",
            f"scripted:{SCENARIO}",
            "--json",
            env=cli_env,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        metrics.append(json.loads(proc.stdout)["metrics"])
    first, second = metrics
    assert second["tokens_in"] + second["tokens_out"] < first["tokens_in"] + first["tokens_out"]
    assert second["tool_calls"] <= first["tool_calls"]
    assert second["memo_hits"] >= 1


def test_a_goal_with_a_bad_skills_folder_fails_with_an_actionable_error(cli_env, tmp_path):
    proc = run_cli(
        "run",
        "x",
        "--skills",
        str(tmp_path / "nope"),
        "--out",
        str(tmp_path / "o"),
        "--model",
        f"scripted:{SCENARIO}",
        "--json",
        env=cli_env,
    )
    assert proc.returncode == 2
    error = json.loads(proc.stdout)
    assert error["ok"] is False and "skills folder not found" in error["message"] and error["next_step"]


@pytest.mark.parametrize("scenario", sorted((REPO / "ops" / "scenarios").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_bundled_scenario_runs_its_own_goal_to_done(scenario: Path, cli_env, tmp_path):
    from orchestrator.llm.scenario import load_scenario

    assert load_scenario(scenario).goal
    proc = run_cli("run", "--skills", "skills", "--out", str(tmp_path / "out"), "--model", f"scripted:{scenario}",
                   "--json", env=cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "done" and result["goal"] == load_scenario(scenario).goal
    assert result["validation_stats"]["runs"] >= 2 and result["validation_stats"]["pass_rate"] > 0
