"""End to end: choosing skills through `python -m orchestrator run` (the scripted OpenAI-compatible server, the real
`openai` client, the real sandbox, the bundled skills): Reflect re-plans, its plan budget, and no fit, no fake."""

from __future__ import annotations

import json
from pathlib import Path

from test_run_cli import run_cli

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def _run(scenario: str, out: Path, env: dict[str, str]) -> tuple[int, dict, list[dict]]:
    proc = run_cli(
        "run", "--skills", "skills", "--out", str(out), "--model", f"scripted:{SCENARIOS / scenario}", "--json",
        env=env,
    )
    trace = [json.loads(line)["_trace"] for line in Path(env["ORCH_SCRIPTED_TRACE"]).read_text().splitlines()]
    assert all(t["status"] == 200 for t in trace), (trace, proc.stderr)
    return proc.returncode, json.loads(proc.stdout), trace


def test_a_step_unmet_after_its_retry_is_re_planned_onto_another_skill_which_serves_the_goal(cli_env, tmp_path):
    returncode, result, trace = _run("replan.yaml", tmp_path / "out", cli_env)
    assert returncode == 0 and result["status"] == "done", result
    assert [t["purpose"] for t in trace] == ["plan", *["act"] * 4, "plan", "act", "act", "semantic"]
    assert result["plan_calls"] == 2
    # every request is counted: plans, the first try of the replaced step and its retry, the final semantic check
    assert result["metrics"]["model_calls"] == len(trace)
    [replan] = result["replans"]
    assert replan["step"] == 0 and replan["skill"] == "meeting-notes" and replan["outcome"] == "re-planned"
    assert replan["reason"] == (
        "validation_failed: summary.json: expected output missing; chart.png: expected output missing"
    )
    assert replan["steps"] == ["data/csv-summary"]
    assert [s["skill"] for s in result["plan"]["steps"]] == ["data/csv-summary"]
    assert [(s["skill_id"], s["status"]) for s in result["skills"]] == [("data/csv-summary", "done")]
    assert result["metrics"]["containers"] == 1  # the new skill's script ran in the sandbox
    assert sorted((a["path"], a["partial"]) for a in result["artifacts"]) == [
        ("chart.png", False), ("summary.json", False)
    ]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert "North" in json.dumps(summary)
    evidence = json.loads(Path(result["evidence_path"]).read_text())
    assert evidence["replans"] == result["replans"] and evidence["plan_calls"] == 2


def test_a_spent_plan_budget_ends_the_goal_unmet_saying_so_and_claims_no_artifact(cli_env, tmp_path):
    out = tmp_path / "out"
    returncode, result, trace = _run("replan-budget.yaml", out, cli_env)
    assert returncode == 1 and result["status"] == "unmet"
    assert [t["purpose"] for t in trace] == ["plan", *["act"] * 4]  # no second plan call
    assert result["plan_calls"] == 1 and result["replans"] == []
    assert result["notes"][0] == (
        "not re-planned after step 1 (meeting-notes) stayed unmet: plan budget spent (40000 of 40000 plan tokens used)"
    )
    [named] = result["notes"][1:]  # and the one note that names the model (issue 31)
    assert named.startswith("not finished because of the model scripted:")
    assert "meeting-notes (validation_failed)" in named
    assert [u["what"] for u in result["unmet"]] == ["summary.json", "chart.png"]
    assert result["artifacts"] == [] and list(out.iterdir()) == []


def test_a_goal_out_of_plan_calls_is_not_re_planned_either(cli_env, tmp_path):
    cli_env["ORCH_SELECTION__MAX_PLAN_CALLS"] = "1"
    returncode, result, trace = _run("replan.yaml", tmp_path / "out", cli_env)
    assert returncode == 1 and result["status"] == "unmet"
    assert [t["purpose"] for t in trace] == ["plan", *["act"] * 4]
    assert result["notes"][0] == (
        "not re-planned after step 1 (meeting-notes) stayed unmet: plan budget spent (1 of 1 plan calls used)"
    )
    [named] = result["notes"][1:]  # and the one note that names the model (issue 31)
    assert named.startswith("not finished because of the model scripted:")
    assert "meeting-notes (validation_failed)" in named
    assert result["artifacts"] == [] and list((tmp_path / "out").iterdir()) == []


def test_a_goal_no_skill_serves_ends_unmet_with_suggestions_and_no_files(cli_env, tmp_path):
    out = tmp_path / "out"
    returncode, result, trace = _run("no-fit.yaml", out, cli_env)
    assert returncode == 1 and result["status"] == "unmet"
    assert [t["purpose"] for t in trace] == ["plan"]  # nothing ran, nothing was judged
    assert [u["what"] for u in result["unmet"]] == ["place a phone call", "sing a song in Klingon"]
    assert {u["why"] for u in result["unmet"]} == {"no skill places phone calls or sings"}
    suggested = [s["id"] for s in result["suggestions"]]
    assert len(suggested) == 3 and all(s["description"] for s in result["suggestions"])
    assert all(", ".join(suggested) in u["next_step"] for u in result["unmet"])
    assert result["artifacts"] == [] and list(out.iterdir()) == []
    assert result["validation"]["pass"] is False and "no skill fits" in result["validation"]["rationale"]


def test_a_goal_that_needs_no_skill_is_answered_by_the_model_alone_and_claims_no_file(cli_env, tmp_path):
    out = tmp_path / "out"
    returncode, result, trace = _run("no-skill-needed.yaml", out, cli_env)
    assert returncode == 0 and result["status"] == "done", result
    assert [t["purpose"] for t in trace] == ["plan"]  # one model call: the plan that carries the answer
    assert result["answer"].startswith("The mean adds all values") and "median is the middle" in result["answer"]
    assert result["skills"] == [] and result["unmet"] == [] and result["suggestions"] == []
    assert result["artifacts"] == [] and list(out.iterdir()) == []
    assert result["validation"]["pass"] is True and "no skill was needed" in result["validation"]["rationale"]
    assert result["metrics"]["model_calls"] == 1 and result["metrics"]["tool_calls"] == 0


def test_the_no_skill_answer_is_printed_for_a_person(cli_env, tmp_path):
    scenario = SCENARIOS / "no-skill-needed.yaml"
    proc = run_cli(
        "run", "--skills", "skills", "--out", str(tmp_path / "out"), "--model", f"scripted:{scenario}", env=cli_env
    )
    assert proc.returncode == 0, proc.stderr
    assert "The mean adds all values" in proc.stdout and "done" in proc.stdout


def test_a_small_local_model_is_asked_first_and_a_chat_goal_is_answered_with_no_catalog_sent(cli_env, tmp_path):
    out = tmp_path / "out"
    returncode, result, trace = _run("triage-chat.yaml", out, {**cli_env, "ORCH_MODEL__PROFILE": "local"})
    assert returncode == 0 and result["status"] == "done", result
    assert [t["purpose"] for t in trace] == ["plan", "answer"]  # the question, then the answer: no plan, no Act
    assert result["answer"] == "72 °F is about 22.2 °C."
    assert result["skills"] == [] and result["artifacts"] == [] and list(out.iterdir()) == []
    assert result["validation"]["pass"] is True and "no skill" in result["validation"]["rationale"]
    assert result["metrics"]["model_calls"] == 2
