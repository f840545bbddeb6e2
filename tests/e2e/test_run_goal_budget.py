"""End to end: the goal's own budget through `python -m orchestrator run --budget` (the scripted OpenAI-compatible
server, the real `openai` client, the bundled skills). The scenario is Reflect's re-plan (scenarios/replan.yaml);
its budget stops it long before the second plan, and the result says which budget and what was done."""

from __future__ import annotations

import json
from pathlib import Path

from test_run_cli import run_cli

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def _run(out: Path, env: dict[str, str], *budgets: str) -> tuple[int, dict, list[dict]]:
    args = [word for budget in budgets for word in ("--budget", budget)]
    proc = run_cli(
        "run", "--skills", "skills", "--out", str(out), "--model", f"scripted:{SCENARIOS / 'replan.yaml'}", "--json",
        *args, env=env,
    )
    trace = [json.loads(line)["_trace"] for line in Path(env["ORCH_SCRIPTED_TRACE"]).read_text().splitlines()]
    assert all(t["status"] == 200 for t in trace), (trace, proc.stderr)
    return proc.returncode, json.loads(proc.stdout), trace


def test_a_goal_out_of_model_calls_is_neither_retried_nor_re_planned_and_says_which_budget(cli_env, tmp_path):
    returncode, result, trace = _run(tmp_path / "out", cli_env, "goal_model_calls=3")
    assert returncode == 1 and result["status"] == "unmet"
    assert [t["purpose"] for t in trace] == ["plan", "act", "act"]  # the server was asked three times, no more
    assert result["metrics"]["model_calls"] == 3 and result["plan_calls"] == 1
    assert result["notes"][0] == (
        "not retried after step 1 (meeting-notes) stayed unmet: goal budget spent (3 of 3 model calls used)"
    )
    [named] = result["notes"][1:]  # and the one note that names the model (issue 31)
    assert named.startswith("not finished because of the model scripted:")
    assert "meeting-notes (validation_failed)" in named
    assert [s["skill"] for s in result["plan"]["steps"]] == ["meeting-notes"]  # what was done is reported
    assert result["replans"] == []


def test_a_goal_token_budget_stops_the_goal_within_one_request_of_it(cli_env, tmp_path):
    returncode, result, trace = _run(tmp_path / "out", cli_env, "goal_token_budget=4000")
    assert returncode == 1 and result["status"] == "unmet"
    used = result["metrics"]["tokens_in"] + result["metrics"]["tokens_out"]
    assert len(trace) == result["metrics"]["model_calls"]
    assert any("goal budget spent" in note and "of 4000 tokens used" in note for note in result["notes"]), result
    assert [t["purpose"] for t in trace] == ["plan", "act"]  # the Act's first request spent what was left
    per_request = {}
    for record in result["skills"][0]["evidence_summary"]:
        per_request[record["step"]] = per_request.get(record["step"], 0) + record["tokens_in"] + record["tokens_out"]
    plan = used - sum(per_request.values())
    assert 4000 <= used < 4000 + max(plan, *per_request.values())


def test_a_budget_over_the_operators_ceiling_is_refused_before_anything_runs(cli_env, tmp_path):
    cli_env["ORCH_CEILINGS__GOAL_MODEL_CALLS"] = "10"
    proc = run_cli(
        "run", "--skills", "skills", "--out", str(tmp_path / "out"), "--model", f"scripted:{SCENARIOS / 'replan.yaml'}",
        "--budget", "goal_model_calls=11", env=cli_env,
    )
    assert proc.returncode != 0
    assert "goal_model_calls=11 is over the ceiling 10" in proc.stderr
    assert not Path(cli_env["ORCH_SCRIPTED_TRACE"]).exists() or not Path(cli_env["ORCH_SCRIPTED_TRACE"]).read_text()
