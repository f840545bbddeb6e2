"""One rule for "the Act's time is used up" (``orchestrator/time_budget.py``): a tool that refuses to start for lack
of time and the loop that decides whether to ask the model again ask the same clock, so they agree whatever the
clock reads between them."""

from __future__ import annotations

import time

import pytest

from orchestrator.act.budget import BudgetTracker
from orchestrator.act.context import ActState
from orchestrator.config import Budgets
from orchestrator.time_budget import TIME_UP_MARGIN_S, TimeBudget, act_time_s


@pytest.mark.parametrize("left_ms", [0, 10, 30, 49])
def test_time_a_tool_counts_as_used_up_ends_the_act_too(left_ms: int) -> None:
    budgets = Budgets(time_budget_ms=3000)
    clock = TimeBudget.of(budgets, started=time.monotonic() - (3000 - left_ms) / 1000)
    tracker = BudgetTracker(budgets, clock)
    state = ActState(clock=clock)
    assert state.clock.left_s() == 0
    assert tracker.exhausted() == "budget_time"
    assert tracker.remaining().time_ms == 0


def test_time_well_before_the_margin_is_left_for_tools_and_the_model() -> None:
    budgets = Budgets(time_budget_ms=3000)
    clock = TimeBudget.of(budgets, started=time.monotonic() - 2.0)
    tracker = BudgetTracker(budgets, clock)
    state = ActState(clock=clock)
    assert 0.9 < state.clock.left_s() <= 1.0 and state.clock.left_s() > TIME_UP_MARGIN_S
    assert tracker.exhausted() is None
    assert 900 < tracker.remaining().time_ms <= 1000


def test_an_act_outside_a_loop_has_all_the_time_and_the_worker_sizes_phases_by_the_same_figure() -> None:
    assert ActState().clock.left_s() == float("inf") and not ActState().clock.is_up()
    assert act_time_s(Budgets(time_budget_ms=120_000)) == 120.0
