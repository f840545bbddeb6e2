"""``supervisor.response`` (``run --response``): SUMMARY answers with a short account of what was made, SCORED with
a score from 0 to 1 and a reason for each evaluation point of the plan — the same goal, compared end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TRANSCRIPT = Path(__file__).parent / "transcripts" / "text-calls.yaml"


def run(tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    tmp_path.mkdir()
    env = {**os.environ, "ORCH_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "orchestrator", "run", "--skills", str(REPO / "skills"), "--out",
               str(tmp_path / "out"), "--model", f"scripted:{TRANSCRIPT}", "--no-memo", *flags]
    human = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    as_json = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    return human, json.loads(as_json.stdout)


def test_summary_and_scored_answer_the_same_goal_differently(tmp_path: Path) -> None:
    summary_out, summary = run(tmp_path / "summary")
    scored_out, scored = run(tmp_path / "scored", "--response", "SCORED")
    assert summary["status"] == scored["status"] == "done"

    assert summary["response"] == "SUMMARY"
    assert summary["answer"].startswith("Made brand.json (")
    assert "brand.json written and valid" in summary["answer"]  # the model's own account when it finished
    assert summary["scores"] == [] and summary["score"] is None
    assert "answer: Made brand.json" in summary_out.stdout

    assert scored["response"] == "SCORED" and scored["answer"] is None
    assert scored["scores"] == [
        {"point": "brand.json follows the schema", "score": 1.0, "reason": "it validated"},
        {"point": "every brand colour is in brand.json", "score": 0.8,
         "reason": "the preview shows four of the five colours"},
    ]
    assert scored["score"] == 0.9
    assert "score: 0.90" in scored_out.stdout and "0.80  every brand colour is in brand.json" in scored_out.stdout
    # SCORED asks the reviewer once more; SUMMARY costs nothing extra
    assert scored["metrics"]["model_calls"] == summary["metrics"]["model_calls"] + 1
    assert scored["metrics"]["tokens_in"] > summary["metrics"]["tokens_in"]


def test_an_unknown_response_strategy_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "--skills", str(REPO / "skills"), "--out", str(tmp_path / "o"),
         "--model", f"scripted:{TRANSCRIPT}", "--response", "RANKED", "--json"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "ORCH_CACHE_DIR": str(tmp_path / "c")},
    )
    assert proc.returncode == 2
    assert "supervisor.response" in json.loads(proc.stdout)["message"]


@pytest.mark.parametrize("strategy", ["SUMMARY", "SCORED"])
def test_a_goal_that_gets_nowhere_still_answers(tmp_path: Path, strategy: str) -> None:
    env = {**os.environ, "ORCH_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "--skills", str(REPO / "skills"), "--out", str(tmp_path / "o"),
         "--model", f"scripted:{Path(__file__).parent / 'transcripts' / 'repeats.yaml'}", "--response", strategy,
         "--json"],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )
    result = json.loads(proc.stdout)
    assert result["status"] == "unmet"
    if strategy == "SUMMARY":
        assert result["answer"].startswith("Not finished (unmet).")
        assert "same failing call" in result["answer"]
    else:
        assert result["scores"] == [] and any("SCORED" in n for n in result["notes"])
