"""One rule for "the Act's time is used up": a tool that refuses to start for lack of time and the loop that decides
whether to ask the model again agree, whatever the clock reads between them."""

from __future__ import annotations

import time

import pytest

from orchestrator.act.budget import TIME_UP_MARGIN_S, BudgetTracker
from orchestrator.act.context import ActState
from orchestrator.config import Budgets


@pytest.mark.parametrize("left_ms", [0, 10, 30, 49])
def test_time_a_tool_counts_as_used_up_ends_the_act_too(left_ms: int) -> None:
    budgets = Budgets(time_budget_ms=3000)
    started = time.monotonic() - (3000 - left_ms) / 1000
    tracker = BudgetTracker(budgets, [], started=started)
    state = ActState(deadline=started + 3.0)
    assert state.time_left_s() == 0
    assert tracker.exhausted() == "budget_time"


def test_time_well_before_the_margin_is_left_for_tools_and_the_model() -> None:
    budgets = Budgets(time_budget_ms=3000)
    started = time.monotonic() - 2.0
    tracker = BudgetTracker(budgets, [], started=started)
    state = ActState(deadline=started + 3.0)
    assert 0.9 < state.time_left_s() <= 1.0 and state.time_left_s() > TIME_UP_MARGIN_S
    assert tracker.exhausted() is None
