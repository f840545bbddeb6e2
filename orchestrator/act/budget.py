"""Budget accounting for one Act: tool calls, wall time, tokens (as reported by the API), disk."""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.act.act_io import ExitReason, RemainingBudgets, StepRecord
from orchestrator.config import Budgets
from orchestrator.llm.usage_ledger import ModelRequest, Spending, UsageLedger
from orchestrator.time_budget import TimeBudget

MANY_CALLS = 6
"""An Act with at least this many tool calls, half of them failed, spent its budget on the model's mistakes."""


@dataclass
class BudgetTracker:
    """Budgets against what the Act did: tool calls from its step records, tokens and model calls from the ledger of
    model requests (its requests are those after ``mark``), never counted by hand."""

    budgets: Budgets
    clock: TimeBudget
    """The Act's time (``orchestrator.time_budget``: the one rule for "time is up", the tools' too)."""
    records: list[StepRecord] = field(default_factory=list)
    goal_tokens_left: int | None = None
    goal_calls_left: int | None = None
    disk_bytes: int = 0
    ledger: UsageLedger = field(default_factory=UsageLedger)
    mark: int = 0

    @property
    def tool_calls(self) -> int:
        return sum(r.kind == "tool" for r in self.records)

    def spent(self) -> Spending:
        """What the Act's model requests spent (its turns, Micro-Reflect and a finish's own semantic check)."""
        return self.ledger.since(self.mark)

    def last_request(self) -> ModelRequest:
        """The ledger's entry of the request the Act made last (what its step records show)."""
        return self.ledger.requests[-1]

    @property
    def tokens(self) -> int:
        """Tokens the budgets count (a cached prompt prefix only when ``count_cached_tokens``)."""
        return self.spent().counted(self.budgets)

    @property
    def model_calls(self) -> int:
        return self.spent().model_calls

    def elapsed_ms(self) -> int:
        return self.clock.elapsed_ms()

    def exhausted(self) -> ExitReason | None:
        """The first budget that has run out, or None."""
        if self.tool_calls >= self.budgets.max_tool_calls:
            return "budget_tool_calls"
        if self.clock.is_up():
            return "budget_time"
        if self.tokens >= self.budgets.token_budget:
            return "budget_tokens"
        if self.goal_tokens_left is not None and self.tokens >= self.goal_tokens_left:
            return "budget_goal"
        if self.goal_calls_left is not None and self.model_calls >= self.goal_calls_left:
            return "budget_goal"
        return None

    def remaining(self) -> RemainingBudgets:
        return RemainingBudgets(
            tool_calls=max(0, self.budgets.max_tool_calls - self.tool_calls),
            time_ms=int(self.clock.left_s() * 1000),
            tokens=max(0, self.budgets.token_budget - self.tokens),
            disk_mb=round(max(0.0, self.budgets.disk_write_limit_mb - self.disk_bytes / 1_048_576), 3),
        )

    def describe(self, reason: ExitReason) -> tuple[str, str]:
        """(why, next step) for a budget exit."""
        b = self.budgets
        table = {
            "budget_tool_calls": (
                f"tool-call budget used up ({self.tool_calls}/{b.max_tool_calls})",
                "raise limits.max_tool_calls (ORCH_LIMITS__MAX_TOOL_CALLS) or narrow the goal",
            ),
            "budget_time": (
                f"time budget used up ({self.elapsed_ms()} ms of {int(self.clock.seconds * 1000)} ms)",
                "raise limits.time_budget_ms (ORCH_LIMITS__TIME_BUDGET_MS) or use a faster model",
            ),
            "budget_tokens": (
                f"token budget used up ({self.tokens} of {b.token_budget} tokens reported by the API"
                + ("" if b.count_cached_tokens else ", cached prompt prefixes not counted") + ")",
                "raise limits.token_budget (ORCH_LIMITS__TOKEN_BUDGET) or shorten the skill's documents",
            ),
            "budget_goal": (
                f"the goal's budget is spent (this skill used {self.tokens} tokens and {self.model_calls} model "
                f"calls of the {self.goal_tokens_left} tokens and {self.goal_calls_left} calls the goal had left)",
                "raise limits.goal_token_budget / limits.goal_model_calls, narrow the goal or use a stronger model",
            ),
        }
        why, next_step = table.get(reason, (reason, ""))
        tools = [r for r in self.records if r.kind == "tool"]
        failed = sum(not r.ok for r in tools)
        if len(tools) >= MANY_CALLS and failed * 2 >= len(tools):  # the model spent it on calls that could not work
            why += f"; {failed} of the {len(tools)} tool calls failed"
            next_step = ("the model spent the budget on calls that failed (see the errors in the evidence): give the "
                         "goal more detail or use a stronger model")
        return why, next_step
