"""One goal request for `run` and `submit`: the same goal limit, job-id rule, budgets and ceilings, and a scripted
scenario's defaults read through the model-spec parser."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.config import load_settings
from orchestrator.errors import ConfigError, WorkflowError
from orchestrator.worker.submit import parse_lines
from orchestrator.workflow.request import (
    MAX_GOAL_CHARS,
    BudgetOverrides,
    GoalRequest,
    budgeted,
    default_inputs,
    parse_budgets,
)
from orchestrator.workflow.steps import start_goal

REPO = Path(__file__).resolve().parents[2]
CSV = REPO / "ops" / "scenarios" / "csv-summary.yaml"


def _line_rejected(tmp_path: Path, line: dict[str, object]) -> str:
    settings = load_settings(skills_dir=REPO / "skills", output_root=tmp_path / "out", scenario_dirs=[REPO])
    good, bad = parse_lines([json.dumps(line)], settings)
    assert good == [] and len(bad) == 1
    return bad[0].reason


def test_one_goal_length_limit_for_run_and_for_goal_lines(tmp_path: Path) -> None:
    long_goal = "x" * (MAX_GOAL_CHARS + 1)
    with pytest.raises(ValidationError, match=f"at most {MAX_GOAL_CHARS} are accepted"):
        GoalRequest(goal=long_goal)
    assert f"at most {MAX_GOAL_CHARS} are accepted" in _line_rejected(tmp_path, {"goal": long_goal})
    assert GoalRequest(goal="x" * MAX_GOAL_CHARS).goal  # the limit itself is fine
    assert "empty" in _line_rejected(tmp_path, {"goal": "  \n "})


def test_one_job_id_rule_for_goal_lines_and_for_a_goals_folder(tmp_path: Path) -> None:
    for bad in ("../escape", "-dash", "a b", "x" * 101):
        assert "cannot name a job" in _line_rejected(tmp_path, {"goal": "g", "job_id": bad})
        request = GoalRequest.model_construct(goal="g", job_id=bad, inputs=[], constraints=[])
        with pytest.raises(WorkflowError, match="cannot name"):
            start_goal(request, tmp_path / "out", load_settings(cache_dir=tmp_path / "cache"))
    assert GoalRequest(goal="g", job_id="q3-deck.v2").job_id == "q3-deck.v2"


def test_budgets_apply_the_same_way_and_the_ceilings_hold_for_both(tmp_path: Path) -> None:
    settings = load_settings()
    run_budgets = parse_budgets(["max_tool_calls=7", "time_budget_ms=5000"])
    assert run_budgets == BudgetOverrides(max_tool_calls=7, time_budget_ms=5000)
    applied = budgeted(settings, run_budgets).limits
    assert (applied.max_tool_calls, applied.time_budget_ms) == (7, 5000)
    assert applied.token_budget == settings.limits.token_budget  # what was not asked keeps the setting
    too_many = settings.ceilings.max_tool_calls + 1
    with pytest.raises(ConfigError, match=f"max_tool_calls={too_many} is over the ceiling"):
        budgeted(settings, parse_budgets([f"max_tool_calls={too_many}"]))
    assert "over the ceiling" in _line_rejected(tmp_path, {"goal": "g", "budgets": {"max_tool_calls": too_many}})


@pytest.mark.parametrize("word", ["nope=1", "max_tool_calls", "max_tool_calls=-3", "max_tool_calls=many"])
def test_a_bad_budget_word_is_refused_naming_it(word: str) -> None:
    with pytest.raises(ConfigError, match="--budget"):
        parse_budgets([word])


def test_a_scripted_scenarios_inputs_are_read_through_the_model_spec_parser() -> None:
    assert [p.name for p in default_inputs(f"scripted:{CSV}")] == ["sales.csv"]
    assert default_inputs("openai:gpt-4o-mini") == []
    with pytest.raises(ConfigError, match="unknown model"):
        default_inputs("scripted")


def test_run_refuses_a_budget_over_the_ceiling_before_anything_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "--skills", "skills", "--out", str(tmp_path / "o"),
         "--model", f"scripted:{CSV}", "--budget", "max_tool_calls=100000", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "ORCH_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "x"},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "over the ceiling" in json.loads(done.stdout)["message"]
    assert not (tmp_path / "o").exists() and not (tmp_path / "cache" / "jobs").exists()


def test_a_budget_value_out_of_range_is_refused_in_one_line_naming_the_budget_and_the_rule() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_budgets(["goal_model_calls=0", "script_timeout_s=soon"])
    message = refused.value.message
    assert "goal_model_calls=0: Input should be greater than or equal to 1" in message
    assert "script_timeout_s=soon: Input should be a valid number" in message
    assert "\n" not in message and "errors.pydantic.dev" not in message


def test_a_goal_lines_response_is_read_in_any_case_as_run_reads_it_and_anything_else_is_refused(
    tmp_path: Path,
) -> None:
    assert GoalRequest(goal="g", response="scored").response == "SCORED"
    assert "response: Input should be 'SUMMARY' or 'SCORED'" in _line_rejected(
        tmp_path, {"goal": "g", "response": "RANKED"}
    )
