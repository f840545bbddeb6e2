"""The goal's own budget: tokens and model calls over its whole course (``limits.goal_token_budget``,
``limits.goal_model_calls``), whichever driver runs it, and the goal's metrics.

What the goal has spent is read from its ledger of model requests (``state.ledger``, see
``orchestrator.llm.usage_ledger``): every request is recorded there once, superseded Acts' included, and the ledger
is saved with the state, so a worker that resumes a goal in another process counts the same as ``run``. Each request
is allowed only while the budget is not spent: the Act checks before each of its requests
(``ActRequest.goal_tokens_left``), the plan, the final semantic check and the SCORED answer go through
:func:`goal_model`. So a goal ends at most one request over its budget: the request sent while something was still
left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.act.act_io import ActMetrics, Disclosure
from orchestrator.config import Budgets
from orchestrator.errors import BudgetExceeded
from orchestrator.llm.interface import ChatModel
from orchestrator.llm.usage_ledger import ChargedTo, LedgerModel, Spending
from orchestrator.validate.validator import ValidationReport
from orchestrator.workflow.goal import GoalMetrics, GoalState

NEXT_STEP = "raise limits.goal_token_budget / limits.goal_model_calls (or a goal's budgets), or narrow the goal"


@dataclass(frozen=True)
class GoalBudget:
    """The goal's budget and what its ledger says it used; :meth:`exhausted` names the first one spent."""

    limits: Budgets
    tokens: int = 0
    calls: int = 0

    @classmethod
    def of(cls, state: GoalState, limits: Budgets) -> GoalBudget:
        used = state.ledger.spent()
        return cls(limits, tokens=used.counted(limits), calls=used.model_calls)

    @property
    def tokens_left(self) -> int:
        return max(0, self.limits.goal_token_budget - self.tokens)

    @property
    def calls_left(self) -> int:
        return max(0, self.limits.goal_model_calls - self.calls)

    def exhausted(self) -> str | None:
        """The budget that is spent with its numbers (``5 of 5 model calls used``), or None while both have some
        left. Calls are named before tokens."""
        if self.calls >= self.limits.goal_model_calls:
            return f"{self.calls} of {self.limits.goal_model_calls} model calls used"
        if self.tokens >= self.limits.goal_token_budget:
            return f"{self.tokens} of {self.limits.goal_token_budget} tokens used"
        return None

    def refuse(self) -> None:
        """Raise :class:`BudgetExceeded` when the budget is spent (before a request is sent)."""
        if (reason := self.exhausted()) is not None:
            calls = self.calls >= self.limits.goal_model_calls
            raise BudgetExceeded(
                f"the goal's budget is spent ({reason})",
                where="budget",
                next_step=NEXT_STEP,
                budget="goal_model_calls" if calls else "goal_token_budget",
                limit=self.limits.goal_model_calls if calls else self.limits.goal_token_budget,
                used=self.calls if calls else self.tokens,
            )


def goal_model(
    state: GoalState, model: ChatModel, limits: Budgets, charged_to: ChargedTo, *, step: int | None = None,
    guarded: bool = True,
) -> LedgerModel:
    """``model`` recording every request in the goal's ledger, charged to ``charged_to``. ``guarded``: each request
    is refused with :class:`BudgetExceeded` once the goal's budget is spent (the Act checks by itself instead, so it
    can end with its reason)."""

    def refuse() -> None:
        GoalBudget.of(state, limits).refuse()

    return LedgerModel(model, state.ledger, charged_to=charged_to, step=step, guard=refuse if guarded else None)


def plan_spending(state: GoalState) -> Spending:
    """What every plan request of the goal spent (the first plan, its searches, re-plans); the goal restated for the
    skill search (purpose ``select``) is the shortlist's question, not a plan call (its tokens count in the goal's
    budget all the same)."""
    return Spending.of(r for r in state.ledger.requests if r.charged_to in ("plan", "replan") and r.purpose != "select")


def goal_metrics(state: GoalState, final: ValidationReport | None = None) -> GoalMetrics:
    """The goal's metrics: model requests from its ledger, the rest (tool calls, containers, time, disclosure) from
    the plan and every Act's result, superseded ones included, and the final validation's time."""
    acts: Sequence[ActMetrics] = [r.metrics for r in [*state.superseded, *state.results]]
    used = state.ledger.spent()
    disclosure = Disclosure(l1=state.plan_offered)
    for m in acts:
        disclosure = disclosure + m.disclosure.model_copy(update={"l1": 0})
    return GoalMetrics(
        tokens_in=used.tokens_in,
        tokens_out=used.tokens_out,
        model_calls=used.model_calls,
        response_cache_hits=used.cache_hits,
        cached_tokens=used.cached_tokens,
        tool_calls=sum(m.tool_calls for m in acts),
        duration_ms=state.plan_ms + sum(m.duration_ms for m in acts) + (final.duration_ms if final else 0),
        containers=sum(m.containers for m in acts),
        memo_hits=sum(m.memo_hits for m in acts),
        disclosure=disclosure,
    )
