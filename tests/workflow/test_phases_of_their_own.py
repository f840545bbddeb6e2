"""One phase, one unit of work: Reflect queues a retry as an Act phase and a re-plan as a Plan phase of their own
(it runs neither itself), a retry Act goes back to Reflect, and a re-plan that found nothing is judged by Reflect
as the goal was when re-plans ran inside it. Both drivers loop over the same ``advance``."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.act.act_io import ActMetrics, ActResult, RemainingBudgets
from orchestrator.config import load_settings
from orchestrator.errors import WorkflowError
from orchestrator.skills.loader import SkillLibrary
from orchestrator.testing.scripted_model import ScriptedModel
from orchestrator.workflow import phases
from orchestrator.workflow.goal import GoalState, Replan
from orchestrator.workflow.machine import advance
from orchestrator.workflow.plan import Plan, PlanStep
from orchestrator.workflow.reflect import Judge, decide
from orchestrator.workflow.reflect import Replan as ReplanDecision
from orchestrator.workflow.request import GoalRequest
from orchestrator.workflow.runtime import Runtime


def _result(skill: str, status: str, reason: str) -> ActResult:
    return ActResult(
        skill_id=skill,
        status=status,  # type: ignore[arg-type]
        exit_reason=reason,  # type: ignore[arg-type]
        remaining_budgets=RemainingBudgets(tool_calls=0, time_ms=0, tokens=0, disk_mb=0),
        metrics=ActMetrics(),
    )


def _state(tmp_path: Path, *, retried: list[int]) -> GoalState:
    return GoalState(
        request=GoalRequest(goal="g"),
        job_id="j",
        out_dir=tmp_path / "out",
        work_dir=tmp_path / "work",
        plan=Plan(steps=[PlanStep(skill="a"), PlanStep(skill="b")]),
        results=[_result("a", "done", "validated"), _result("b", "unmet", "validation_failed")],
        retried=retried,
    )


@pytest.fixture
def no_model_runtime(tmp_path: Path) -> Runtime:
    """A runtime whose model fails on any call: Reflect deciding a retry or a re-plan asks the model nothing."""
    return Runtime(settings=load_settings(cache_dir=tmp_path / "cache"), model=ScriptedModel([]),
                   library=SkillLibrary(tmp_path))


def test_reflect_queues_a_retry_as_an_act_phase_and_runs_no_act_itself(
    tmp_path: Path, no_model_runtime: Runtime
) -> None:
    state = _state(tmp_path, retried=[])
    after, nxt = advance(state, phases.Reflect(), no_model_runtime)
    assert nxt == phases.Act(1)
    assert after.results == state.results and after.retried == [] and after.superseded == []


def test_reflect_queues_a_re_plan_as_a_plan_phase_of_its_own(tmp_path: Path, no_model_runtime: Runtime) -> None:
    state = _state(tmp_path, retried=[1])  # unmet after its retry
    after, nxt = advance(state, phases.Reflect(), no_model_runtime)
    assert nxt == phases.Plan(1) and phases.token(nxt) == "plan:1"
    assert after.replans == 0 and after.replan_log == [] and after.plan == state.plan


def test_a_re_plan_that_found_no_plan_is_judged_not_asked_again() -> None:
    state = _state(Path("/nowhere"), retried=[1])
    selection = load_settings().selection.model_copy(update={"replans": 3})
    limits = load_settings().limits
    assert decide(state, selection, limits) == ReplanDecision(1)  # re-plans left
    state.replans = 1
    state.replan_log.append(Replan(step=1, skill="b", reason="validation_failed", outcome="no usable plan: x"))
    assert decide(state, selection, limits) == Judge()
    state.replan_log[-1] = state.replan_log[-1].model_copy(update={"steps": ["c"], "outcome": "re-planned"})
    assert decide(state, selection, limits) == ReplanDecision(1)  # a re-plan that found steps leaves the rule alone


def test_a_re_plan_phase_is_spelt_apart_from_the_first_plan() -> None:
    assert phases.token(phases.Plan()) == "plan" and phases.parse("plan") == phases.Plan()
    assert phases.parse("plan:0") == phases.Plan(0) and phases.parse("plan:12") == phases.Plan(12)
    for bad in ("plan:", "plan:-1", "plan:01", "plan:1x", "plan:1\n", "act:1\n", "plan:9999999", " plan:1"):
        with pytest.raises(WorkflowError):
            phases.parse(bad)
    assert phases.is_phase_token("plan:3") and not phases.is_phase_token("plan:x")
