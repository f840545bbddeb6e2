"""Reflect's decision, as a pure function of the goal state and the plan budgets.

``decide`` says what Reflect does next; ``workflow.machine`` carries it out (a retry and a re-plan are phases of
their own, each followed by Reflect again). The rules, in order:

1. A plan with no step (no skill fits), or a re-plan that found none: judge (the goal ends ``unmet``, with
   suggestions when no skill fitted at all).
2. The first step that ended ``unmet`` for a reason another try may fix, and was not retried yet: retry it once —
   unless the goal's own budget (tokens or model calls, ``workflow.budget``) is spent: refused, naming it.
3. No step stuck (unmet after its retry, or unmet for a reason a retry cannot fix): judge.
4. A step stuck, re-plans used up (``selection.replans``): judge.
5. A step stuck, the goal's budget spent: refused, naming it (model calls before tokens).
6. A step stuck, the plan calls or the plan tokens spent: refused, naming the budget that refused it.
7. Otherwise: re-plan from the stuck step (the steps before it are kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orchestrator.act.act_io import ActResult
from orchestrator.config import Budgets, SelectionSettings
from orchestrator.workflow.budget import GoalBudget, plan_spending
from orchestrator.workflow.goal import GoalState

RETRYABLE_EXITS = frozenset({"validation_failed", "stalled", "missing_reference"})
"""Exit reasons one more try, told what was missing, may fix (a budget or a violation it would only repeat)."""


@dataclass(frozen=True)
class RetryStep:
    """Run step ``index`` once more, told why it stayed unmet."""

    index: int


@dataclass(frozen=True)
class Replan:
    """Ask for a new plan of the remaining work from step ``step`` on."""

    step: int


@dataclass(frozen=True)
class Refused:
    """A re-plan (or a retry) was due after step ``step`` but ``budget`` (e.g. ``4 of 4 plan calls used``) of the
    plan or of the goal as a whole (``scope``) refused it."""

    step: int
    budget: str
    scope: Literal["plan", "goal"] = "plan"
    action: Literal["re-plan", "retry"] = "re-plan"


@dataclass(frozen=True)
class Judge:
    """Validate the whole output and give the goal's verdict."""


Decision = RetryStep | Replan | Refused | Judge


def retryable(result: ActResult) -> bool:
    return result.exit_reason in RETRYABLE_EXITS


def decide(state: GoalState, selection: SelectionSettings, limits: Budgets) -> Decision:
    """What Reflect does next (see the module docstring for the rules); ``limits`` hold the goal's budget."""
    if state.plan is None or not state.plan.steps or (state.replan_log and not state.replan_log[-1].steps):
        return Judge()
    goal_spent = GoalBudget.of(state, limits).exhausted()
    for index, result in enumerate(state.results):
        if result.status == "unmet" and index not in state.retried and retryable(result):
            return RetryStep(index) if goal_spent is None else Refused(index, goal_spent, "goal", "retry")
    stuck = next(
        (i for i, r in enumerate(state.results) if r.status == "unmet" and (i in state.retried or not retryable(r))),
        None,
    )
    if stuck is None or state.replans >= selection.replans:
        return Judge()
    if goal_spent is not None:
        return Refused(stuck, goal_spent, "goal")
    plan = plan_spending(state)
    if plan.model_calls >= selection.max_plan_calls:
        return Refused(stuck, f"{plan.model_calls} of {selection.max_plan_calls} plan calls used")
    spent = plan.counted(limits)
    if spent >= selection.plan_token_budget:
        return Refused(stuck, f"{spent} of {selection.plan_token_budget} plan tokens used")
    return Replan(stuck)
