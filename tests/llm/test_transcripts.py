"""Transcripts of what a small real model does (``transcripts/``), replayed through ``run`` on the bundled skills:
goals end ``done`` where the work is possible and ``unmet`` within their budgets where it is not, with the blame on
the model's calls, never on the skill. The goal needs no script, so no sandbox container starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TRANSCRIPTS = Path(__file__).parent / "transcripts"


def run(transcript: str, tmp_path: Path, *extra: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    trace = tmp_path / "trace.jsonl"
    env = {**os.environ, "ORCH_CACHE_DIR": str(tmp_path / "cache"), "ORCH_SCRIPTED_TRACE": str(trace)}
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "--skills", str(REPO / "skills"), "--out", str(tmp_path / "out"),
         "--model", f"scripted:{TRANSCRIPTS / transcript}", "--json", *extra],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )
    assert proc.stdout, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert proc.returncode == (0 if result["status"] == "done" else 1)
    requests = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
    assert not [r["_trace"]["problems"] for r in requests if r["_trace"]["problems"]], "the transcript mismatched"
    return result, requests


def _brand(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "out" / "brand.json").read_text())


def _errors(result: dict[str, Any]) -> list[str]:
    return [r["error"] for s in result["skills"] for r in s["evidence_summary"] if r.get("error")]


def test_calls_written_as_text_are_run_and_an_unreadable_one_is_fixed_by_the_model(tmp_path: Path) -> None:
    result, requests = run("text-calls.yaml", tmp_path)
    assert result["status"] == "done", result["unmet"]
    assert _brand(tmp_path)["fonts"]["heading"] == "Montserrat"
    assert [r["tool"] for r in result["skills"][0]["evidence_summary"] if r["kind"] == "tool"] == [
        "read_ref", "read_ref", "write_artifact", "validate", "finish"
    ]
    assert "could not be read" in _errors(result)[0]
    act = [r for r in requests if r["_trace"]["purpose"] == "act"]
    assert all(r["max_tokens"] > 0 for r in requests)
    # what the model wrote goes back as a tool call with its result, so the server's template shows it properly
    assert any(m.get("tool_calls") for m in act[-1]["messages"] if m["role"] == "assistant")


def test_an_invented_path_is_the_models_mistake_and_the_goal_still_ends_done(tmp_path: Path) -> None:
    result, _ = run("invented-path.yaml", tmp_path)
    assert result["status"] == "done" and result["unmet"] == []
    [error] = _errors(result)
    assert "brand-guidelines/brand-guidelines.md" in error and "no such file in the skill" in error
    assert "brand.schema.json" in error


def test_cut_replies_are_asked_again_and_the_goal_ends_done(tmp_path: Path) -> None:
    result, requests = run("cut-replies.yaml", tmp_path)
    assert result["status"] == "done", result["unmet"]
    assert result["plan_calls"] == 2
    assert [r["_trace"]["purpose"] for r in requests][:2] == ["plan", "plan"]
    assert "cut off at 4096 tokens inside a call of write_artifact" in _errors(result)[0]


@pytest.mark.parametrize("transcript", ["repeats.yaml", "never-finishes.yaml"])
def test_a_model_that_gets_nowhere_ends_unmet_within_budgets_blaming_the_model(tmp_path: Path, transcript: str):
    result, requests = run(transcript, tmp_path)
    assert result["status"] == "unmet"
    assert result["skills"] and {s["exit_reason"] for s in result["skills"]} == {"stalled"}
    assert not (tmp_path / "out" / "brand.json").exists()
    blamed = result["unmet"][0]
    assert blamed["what"] == "skill brand-guidelines"
    assert ("same failing call" if transcript == "repeats.yaml" else "without a new or changed artifact") in (
        blamed["why"]
    )
    assert not any("missing from the skill" in u["why"] for u in result["unmet"])
    assert len(requests) <= 40 and result["metrics"]["tool_calls"] <= 24 * 4


RECORDING = Path(__file__).parent / "recordings" / "brand-json-qwen"


def test_a_recorded_real_session_replays_to_done_and_its_identical_second_run_sends_nothing(tmp_path: Path) -> None:
    """Our own session with a 1.5B model on llama.cpp (``recordings/brand-json-qwen``): it wrote every call as
    text (a fenced block, then bare objects, with build/ in the path and ``"rules": null``), and it worked."""
    env = {**os.environ, "ORCH_CACHE_DIR": str(tmp_path / "cache")}
    results = []
    for n in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "orchestrator", "run", "Give me our brand rules as a machine-readable brand.json",
             "--skills", str(REPO / "skills"), "--out", str(tmp_path / f"out{n}"), "--model", f"scripted:{RECORDING}",
             "--json"],
            capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
        )
        results.append(json.loads(proc.stdout))
    first, second = results
    assert first["status"] == "done", first["unmet"]
    tools = [r["tool"] for r in first["skills"][0]["evidence_summary"] if r["kind"] == "tool"]
    assert tools == ["write_artifact", "validate", "finish"]
    assert first["metrics"]["cached_tokens"] > 0  # the server's own prompt cache, as it reported it
    assert second["status"] == "done"
    assert second["metrics"]["tokens_in"] + second["metrics"]["tokens_out"] == 0
    assert second["metrics"]["response_cache_hits"] == 4  # the plan and three Act turns
