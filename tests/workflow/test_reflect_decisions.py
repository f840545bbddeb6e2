"""Reflect's decision, as a table: the goal's steps so far, its plan budgets and the goal's own budget in, what
Reflect does next out.

This is the specification of retry and re-plan; the end-to-end tests (tests/e2e/test_run_select.py, tests/worker/
test_select_jobs.py) only prove that `run` and a worker carry these decisions out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.act.act_io import ActMetrics, ActResult, RemainingBudgets
from orchestrator.config import Budgets, SelectionSettings
from orchestrator.llm.usage_ledger import ModelRequest, UsageLedger
from orchestrator.workflow.goal import GoalState
from orchestrator.workflow.plan import NoFit, Plan, PlanStep
from orchestrator.workflow.reflect import Judge, Refused, Replan, RetryStep, decide
from orchestrator.workflow.request import GoalRequest

DONE = ("done", "validated")
UNMET_FIXABLE = ("unmet", "validation_failed")  # another try, told what was missing, may fix it
STALLED = ("unmet", "stalled")
UNMET_OUT_OF_TOOLS = ("unmet", "budget_tool_calls")  # another try would only run out again
FAILED = ("failed", "sandbox_error")


def _state(
    steps: list[tuple[str, str]],
    *,
    planned: int | None = None,
    retried: tuple[int, ...] = (),
    replans: int = 0,
    plan_calls: int = 1,
    plan_tokens: int = 500,
    act_calls: int = 0,
    act_tokens: int = 0,
) -> GoalState:
    count = len(steps) if planned is None else planned
    results = [
        ActResult(
            skill_id=f"skill-{i}",
            status=status,  # type: ignore[arg-type]
            exit_reason=reason,  # type: ignore[arg-type]
            remaining_budgets=RemainingBudgets(tool_calls=0, time_ms=0, tokens=0, disk_mb=0),
            metrics=ActMetrics(model_calls=act_calls, tokens_in=act_tokens) if i == 0 else ActMetrics(),
        )
        for i, (status, reason) in enumerate(steps)
    ]
    return GoalState(
        request=GoalRequest(goal="g"),
        job_id="j",
        out_dir=Path("/out"),
        work_dir=Path("/work"),
        plan=Plan(steps=[PlanStep(skill=f"skill-{i}") for i in range(count)], no_fit=None if count else NoFit()),
        results=results,
        retried=list(retried),
        replans=replans,
        ledger=_ledger(plan_calls, plan_tokens, act_calls, act_tokens),
    )


def _ledger(plan_calls: int, plan_tokens: int, act_calls: int, act_tokens: int) -> UsageLedger:
    """The goal's requests: the plan's first one carries its tokens, so does the first step's first one."""
    ledger = UsageLedger()
    for i in range(plan_calls):
        ledger.record(ModelRequest(purpose="plan", charged_to="plan", prompt_tokens=plan_tokens if i == 0 else 0))
    for i in range(max(act_calls, 1 if act_tokens else 0)):
        ledger.record(ModelRequest(purpose="act", charged_to="act", step=0, prompt_tokens=act_tokens if i == 0 else 0))
    return ledger


SELECTION = SelectionSettings(replans=1, max_plan_calls=4, plan_token_budget=40_000)
LIMITS = Budgets(goal_model_calls=20, goal_token_budget=100_000)
"""The goal's budget; the first step's Act spends ``act_calls`` and ``act_tokens`` of it (the plan its own)."""

CASES: list[tuple[str, dict[str, Any], object]] = [
    ("every step done: judge", {"steps": [DONE, DONE]}, Judge()),
    ("no step planned (no skill fits): judge", {"steps": [], "planned": 0}, Judge()),
    ("a failed step and nothing unmet: judge", {"steps": [DONE, FAILED]}, Judge()),
    ("an unmet step a retry may fix: retry it", {"steps": [DONE, UNMET_FIXABLE]}, RetryStep(1)),
    ("a stalled step: retry it", {"steps": [STALLED]}, RetryStep(0)),
    ("the first of two retryable steps first", {"steps": [UNMET_FIXABLE, UNMET_FIXABLE]}, RetryStep(0)),
    ("the next retryable step once the first was retried",
     {"steps": [UNMET_FIXABLE, UNMET_FIXABLE], "retried": (0,)}, RetryStep(1)),
    ("unmet after its retry: re-plan from it", {"steps": [DONE, UNMET_FIXABLE], "retried": (1,)}, Replan(1)),
    ("unmet for a reason a retry cannot fix: re-plan at once", {"steps": [UNMET_OUT_OF_TOOLS, DONE]}, Replan(0)),
    ("the first stuck step is where the re-plan starts",
     {"steps": [DONE, UNMET_OUT_OF_TOOLS, UNMET_OUT_OF_TOOLS]}, Replan(1)),
    ("an unmet step before a failed one: re-plan from the unmet one",
     {"steps": [UNMET_OUT_OF_TOOLS, FAILED]}, Replan(0)),
    ("re-plans used up: judge, nothing refused",
     {"steps": [UNMET_FIXABLE], "retried": (0,), "replans": 1}, Judge()),
    ("plan calls spent: refused, naming them",
     {"steps": [UNMET_FIXABLE], "retried": (0,), "plan_calls": 4}, Refused(0, "4 of 4 plan calls used")),
    ("plan tokens spent: refused, naming them",
     {"steps": [DONE, UNMET_OUT_OF_TOOLS], "plan_tokens": 40_000}, Refused(1, "40000 of 40000 plan tokens used")),
    ("plan calls are named before plan tokens",
     {"steps": [UNMET_OUT_OF_TOOLS], "plan_calls": 5, "plan_tokens": 50_000}, Refused(0, "5 of 4 plan calls used")),
    ("one plan call and one token left: re-plan",
     {"steps": [UNMET_OUT_OF_TOOLS], "plan_calls": 3, "plan_tokens": 39_999}, Replan(0)),
    ("goal calls spent (plan and Acts together): a retry is refused, naming them",
     {"steps": [STALLED], "act_calls": 19}, Refused(0, "20 of 20 model calls used", "goal", "retry")),
    ("goal tokens spent: a retry is refused, naming them",
     {"steps": [DONE, UNMET_FIXABLE], "act_tokens": 99_500},
     Refused(1, "100000 of 100000 tokens used", "goal", "retry")),
    ("goal calls spent: a re-plan is refused by the goal's budget",
     {"steps": [("unmet", "budget_goal")], "act_calls": 19}, Refused(0, "20 of 20 model calls used", "goal")),
    ("the goal's budget is named before the plan's",
     {"steps": [UNMET_OUT_OF_TOOLS], "plan_calls": 4, "act_tokens": 99_500},
     Refused(0, "100000 of 100000 tokens used", "goal")),
    ("goal calls are named before goal tokens",
     {"steps": [UNMET_OUT_OF_TOOLS], "act_calls": 30, "act_tokens": 200_000},
     Refused(0, "31 of 20 model calls used", "goal")),
    ("every step done with the goal's budget spent: judge, nothing refused",
     {"steps": [DONE, DONE], "act_calls": 40}, Judge()),
    ("one goal call and one goal token left: retry",
     {"steps": [STALLED], "act_calls": 18, "act_tokens": 99_499}, RetryStep(0)),
]


@pytest.mark.parametrize(("case", "given", "expected"), CASES, ids=[c[0] for c in CASES])
def test_reflect_decides(case: str, given: dict[str, Any], expected: object) -> None:
    assert decide(_state(**given), SELECTION, LIMITS) == expected


def test_re_planning_switched_off_judges_what_a_spent_budget_would_have_refused() -> None:
    state = _state([UNMET_FIXABLE], retried=(0,), plan_calls=4)
    assert decide(state, SELECTION.model_copy(update={"replans": 0}), LIMITS) == Judge()


def test_the_decision_reads_the_state_and_changes_nothing() -> None:
    state = _state([DONE, UNMET_FIXABLE], retried=(1,))
    before = state.model_dump()
    decide(state, SELECTION, LIMITS)
    assert state.model_dump() == before
