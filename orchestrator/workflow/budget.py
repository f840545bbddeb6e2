"""The goal's own budget: tokens and model calls over its whole course (``limits.goal_token_budget``,
``limits.goal_model_calls``), whichever driver runs it.

What the goal has spent is read from its state (the plan's metrics and every Act's, superseded ones included), so a
worker that resumes a goal in another process counts the same as ``run``. Each request is allowed only while the
budget is not spent: the Act checks before each of its requests (``ActRequest.goal_tokens_left``), the plan, the
final semantic check and the SCORED answer go through :class:`BudgetedModel`. So a goal ends at most one request
over its budget: the request sent while something was still left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.config import Budgets
from orchestrator.errors import BudgetExceeded
from orchestrator.llm.interface import ChatModel, Message, ModelResponse, Purpose, ToolSpec
from orchestrator.workflow.goal import GoalMetrics, GoalState

NEXT_STEP = "raise limits.goal_token_budget / limits.goal_model_calls (or a goal's budgets), or narrow the goal"


def spent(state: GoalState, *, rerun: int | None = None) -> GoalMetrics:
    """What the goal has used so far: its plan calls and every Act's, the ones a retry or re-plan replaced too.

    ``rerun``: the index of a step being run again, whose earlier result is already among the superseded ones.
    """
    results = [r for i, r in enumerate(state.results) if i != rerun]
    return state.plan_metrics.plus([r.metrics for r in [*state.superseded, *results]])


@dataclass
class GoalBudget:
    """The goal's budget and what it used; :meth:`exhausted` names the first one spent."""

    limits: Budgets
    tokens: int = 0
    calls: int = 0

    @classmethod
    def of(cls, state: GoalState, limits: Budgets, *, rerun: int | None = None) -> GoalBudget:
        used = spent(state, rerun=rerun)
        return cls(limits, tokens=limits.counted(used.tokens_in, used.tokens_out, used.cached_tokens),
                   calls=used.model_calls)

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


class BudgetedModel:
    """A ``ChatModel`` that sends a request only while the goal's budget is not spent, counting what it used.

    Raises :class:`BudgetExceeded` instead of sending. ``tokens_in``/``tokens_out``/``calls`` are what went through
    this wrapper (so a caller interrupted by the budget can still account for the requests it made).
    """

    def __init__(self, model: ChatModel, budget: GoalBudget) -> None:
        self._model = model
        self.name = model.name
        self.budget = budget
        self.tokens_in = 0
        self.tokens_out = 0
        self.calls = 0

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        purpose: Purpose = "other",
        json_response: bool = False,
    ) -> ModelResponse:
        self.budget.refuse()
        response = self._model.complete(messages, tools=tools, purpose=purpose, json_response=json_response)
        self.tokens_in += response.usage.prompt_tokens
        self.tokens_out += response.usage.completion_tokens
        self.calls += not response.cache_hit
        usage = response.usage
        self.budget.tokens += self.budget.limits.counted(usage.prompt_tokens, usage.completion_tokens,
                                                         usage.cached_tokens)
        self.budget.calls += not response.cache_hit
        return response
