"""The goal's own budget (``limits.goal_model_calls``, ``limits.goal_token_budget``) holds over its whole course:
plan, every Act, retries, re-plans, the final semantic check and the SCORED answer. Spending it ends the goal
``unmet`` with what was done and a reason naming the budget; the goal never goes over by more than one request.

The model is the in-memory fake: every reply costs 1,000 prompt and 100 completion tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.config import Settings, load_settings
from orchestrator.llm.interface import Message, ModelResponse, Purpose, ToolSpec, Usage
from orchestrator.skills.loader import SkillLibrary
from orchestrator.testing import FunctionModel, json_response, tool_call_response
from orchestrator.testing.memory_sandbox import InMemorySandbox
from orchestrator.workflow.embedded import run_goal
from orchestrator.workflow.goal import GoalResult
from orchestrator.workflow.request import GoalRequest
from orchestrator.workflow.runtime import Runtime

REQUEST = 1_100
"""Tokens of one request of the fake model (prompt and completion)."""
PLAN = {"steps": [{"skill": "notes", "outputs": ["notes.md"]}], "evaluation": ["the notes are there"]}


def _usage() -> Usage:
    return Usage(prompt_tokens=1_000, completion_tokens=100)


def _plan() -> ModelResponse:
    return json_response(PLAN, prompt_tokens=1_000, completion_tokens=100)


def _never_finishes(messages: list[Message], tools: list[ToolSpec], purpose: Purpose) -> ModelResponse:
    """Plans, then writes one more page on every Act turn and never calls ``finish`` (progress, so never stalled)."""
    if purpose == "plan":
        return _plan()
    page = sum(m.role == "assistant" for m in messages)
    return tool_call_response("write_artifact", path=f"page-{page}.md", text=f"page {page}\n", _usage=_usage())


def _finishes(messages: list[Message], tools: list[ToolSpec], purpose: Purpose) -> ModelResponse:
    """Plans, writes notes.md, finishes; passes the semantic check and scores every point 1."""
    if purpose == "plan":
        return _plan()
    if purpose == "semantic":
        if "score" in (messages[-1].content or "").lower() and "points" in (messages[-1].content or "").lower():
            return json_response({"scores": [{"point": "the notes are there", "score": 1, "reason": "they are"}]},
                                 prompt_tokens=1_000, completion_tokens=100)
        return json_response({"pass": True, "missing": [], "violations": [], "rationale": "the notes are there"},
                             prompt_tokens=1_000, completion_tokens=100)
    if not any(m.role == "tool" for m in messages):
        return tool_call_response("write_artifact", path="notes.md", text="# notes\n", _usage=_usage())
    return tool_call_response("finish", summary="notes written", outputs=["build/notes.md"], _usage=_usage())


def _stalls(messages: list[Message], tools: list[ToolSpec], purpose: Purpose) -> ModelResponse:
    """Plans, then reads a file the skill does not have, again and again (the third identical failure stalls)."""
    if purpose == "plan":
        return _plan()
    return tool_call_response("read_ref", path="nowhere.md", _usage=_usage())


def _goal(
    tmp_path: Path, fn: Any, response: Any = None, qa: str = "final", **limits: Any
) -> tuple[GoalResult, FunctionModel]:
    skill = tmp_path / "skills" / "notes"
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text("---\nname: notes\ndescription: Write notes.md.\n---\nWrite notes.md.\n")
    settings: Settings = load_settings(cache_dir=tmp_path / "cache", limits=limits, qa={"mode": qa})
    model = FunctionModel(fn)
    rt = Runtime(settings=settings, model=model, library=SkillLibrary(tmp_path / "skills"), sandbox=InMemorySandbox())
    return run_goal(GoalRequest(goal="write the notes", response=response), tmp_path / "out", rt), model


def _tokens(result: GoalResult) -> int:
    return result.metrics.tokens_in + result.metrics.tokens_out


def test_a_model_that_never_finishes_ends_unmet_at_the_goals_call_budget_with_what_it_made(tmp_path: Path) -> None:
    result, model = _goal(tmp_path, _never_finishes, goal_model_calls=6)

    assert result.status == "unmet"
    assert len(model.calls) == result.metrics.model_calls == 6  # the plan and five Act turns, not one more
    step = result.skills[0]
    assert step.exit_reason == "budget_goal" and "goal's budget is spent" in step.unmet[0].why
    assert [a.path for a in result.artifacts] == [f"page-{n}.md" for n in range(5)]
    assert all(a.partial for a in result.artifacts)
    assert result.plan is not None and result.plan.steps[0].skill == "notes"
    assert "not re-planned after step 1 (notes) stayed unmet: goal budget spent (6 of 6 model calls used)" in (
        result.notes
    )


def test_a_model_that_never_finishes_stays_within_one_request_of_the_goals_token_budget(tmp_path: Path) -> None:
    result, model = _goal(tmp_path, _never_finishes, goal_token_budget=5_000)

    assert result.status == "unmet" and result.skills[0].exit_reason == "budget_goal"
    assert 5_000 <= _tokens(result) < 5_000 + REQUEST  # it stops once spent: the last request is the only overshoot
    assert len(model.calls) == result.metrics.model_calls == 5
    assert any("goal budget spent (5500 of 5000 tokens used)" in note for note in result.notes)


def test_a_retry_due_is_refused_when_the_goals_budget_is_spent(tmp_path: Path) -> None:
    result, model = _goal(tmp_path, _stalls, goal_model_calls=5)  # plan, 3 failing reads, 1 Micro-Reflect

    assert result.skills[0].exit_reason == "stalled"  # a retry may fix a stall, but there is no budget left
    assert result.status == "unmet" and len(model.calls) == result.metrics.model_calls == 5
    assert "not retried after step 1 (notes) stayed unmet: goal budget spent (5 of 5 model calls used)" in (
        result.notes
    )


def test_the_final_semantic_check_and_the_scored_answer_count_as_model_calls(tmp_path: Path) -> None:
    result, model = _goal(tmp_path, _finishes)
    assert result.status == "done"
    assert len(model.calls) == result.metrics.model_calls == 4  # plan, two Act turns, the semantic check

    result, model = _goal(tmp_path / "scored", _finishes, "SCORED")
    assert result.status == "done" and result.score == 1
    assert len(model.calls) == result.metrics.model_calls == 5  # and the scoring call
    assert _tokens(result) == 5 * REQUEST

    result, model = _goal(tmp_path / "step", _finishes, qa="step")
    assert result.status == "done"
    assert len(model.calls) == result.metrics.model_calls == 5  # and the finish's own check (qa.mode step)
    assert result.skills[0].metrics.model_calls == 3


def test_a_goal_whose_work_spent_the_budget_is_not_judged_by_one_more_call(tmp_path: Path) -> None:
    result, model = _goal(tmp_path, _finishes, "SCORED", goal_model_calls=3)  # the plan and two Act turns spend it

    assert [s.status for s in result.skills] == ["done"]
    assert len(model.calls) == result.metrics.model_calls == 3  # no semantic check, no scoring call
    assert result.status == "unmet" and result.validation is not None and not result.validation.pass_
    assert "semantic check not finished: the goal's budget is spent (3 of 3 model calls used)" in (
        result.validation.violations
    )
    assert result.scores == [] and any("SCORED: not scored: the goal's budget is spent" in n for n in result.notes)
    assert [a.path for a in result.artifacts] == ["notes.md"]


def test_a_budget_too_small_for_the_plan_fails_the_goal_at_the_plan_naming_the_budget(tmp_path: Path) -> None:
    def rambles(messages: list[Message], tools: list[ToolSpec], purpose: Purpose) -> ModelResponse:
        return json_response({"thoughts": "let me think"}, prompt_tokens=1_000, completion_tokens=100)

    result, model = _goal(tmp_path, rambles, goal_model_calls=1)  # the plan's repair round is one call too many

    assert result.status == "failed" and result.error is not None and len(model.calls) == 1
    assert result.error.message == "the goal's budget is spent (1 of 1 model calls used)"
    assert "goal_model_calls" in result.error.next_step and result.artifacts == []


def _cached_prefix(messages: list[Message], tools: list[ToolSpec], purpose: Purpose) -> ModelResponse:
    """``_never_finishes`` on a server that served 900 of every 1,000 prompt tokens from its prefix cache."""
    response = _never_finishes(messages, tools, purpose)
    usage = Usage(prompt_tokens=1_000, completion_tokens=100, cached_tokens=900)
    return response.model_copy(update={"usage": usage})


def test_token_budgets_count_only_what_the_server_processed_when_cached_prefixes_are_not_counted(
    tmp_path: Path,
) -> None:
    counted, model = _goal(tmp_path / "a", _cached_prefix, goal_token_budget=1_000)
    assert counted.status == "unmet" and len(model.calls) == 1  # 1,100 counted tokens: spent by the plan

    processed, model = _goal(tmp_path / "b", _cached_prefix, goal_token_budget=1_000, count_cached_tokens=False)
    assert processed.status == "unmet" and processed.skills[0].exit_reason == "budget_goal"
    assert len(model.calls) == 5  # 200 processed tokens a request: the plan and four Act turns reach 1,000
    assert processed.metrics.cached_tokens == 4_500 and _tokens(processed) == 5_500  # reported apart, not hidden
    assert any("goal budget spent (1000 of 1000 tokens used)" in note for note in processed.notes)


def test_a_goal_the_model_cannot_finish_names_the_model_as_the_reason(tmp_path: Path) -> None:
    result, _ = _goal(tmp_path, _stalls, goal_model_calls=20)

    assert result.status == "unmet" and result.skills[0].exit_reason == "stalled"
    assert any(n.startswith("not finished because of the model function-model: notes (stalled)") for n in result.notes)
