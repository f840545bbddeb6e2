"""A goal's ledger of model requests: each request the goal sends is recorded once, charged to the part of the goal
that made it, saved with the goal's state between phases; the result's metrics and the plan's calls are read from it.

The model is the in-memory fake of ``test_goal_budget``: every reply costs 1,000 prompt and 100 completion tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.config import load_settings
from orchestrator.llm.usage_ledger import Spending
from orchestrator.skills.loader import SkillLibrary
from orchestrator.testing import FunctionModel
from orchestrator.testing.memory_sandbox import InMemorySandbox
from orchestrator.workflow import phases
from orchestrator.workflow.embedded import run_goal
from orchestrator.workflow.goal import Checkpoint, GoalResult, GoalState
from orchestrator.workflow.machine import advance
from orchestrator.workflow.request import GoalRequest
from orchestrator.workflow.runtime import Runtime
from orchestrator.workflow.steps import start_goal
from tests.workflow.test_goal_budget import _finishes, _stalls


def _runtime(tmp_path: Path, fn: Any, **qa: Any) -> tuple[Runtime, FunctionModel]:
    skill = tmp_path / "skills" / "notes"
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text("---\nname: notes\ndescription: Write notes.md.\n---\nWrite notes.md.\n")
    settings = load_settings(cache_dir=tmp_path / "cache", qa=qa or {"mode": "final"})
    model = FunctionModel(fn)
    return Runtime(settings=settings, model=model, library=SkillLibrary(tmp_path / "skills"),
                   sandbox=InMemorySandbox()), model


def _phase_by_phase(tmp_path: Path, fn: Any, response: str = "SUMMARY") -> tuple[GoalState, GoalResult, FunctionModel]:
    """The goal run the way workers run it: one phase at a time, its state saved as JSON and read back between."""
    rt, model = _runtime(tmp_path, fn)
    state = start_goal(GoalRequest(goal="write the notes", response=response), tmp_path / "out", rt.settings)
    phase: phases.Phase = phases.FIRST
    while not isinstance(phase, phases.Done):
        state, phase = advance(state, phase, rt)
        state = Checkpoint.load(Checkpoint(state=state).model_dump(mode="json")).state
    assert phase.result is not None
    return state, phase.result, model


def test_every_request_is_recorded_once_charged_to_the_part_of_the_goal_that_made_it(tmp_path: Path) -> None:
    state, result, model = _phase_by_phase(tmp_path, _finishes, "SCORED")

    charged = [(r.purpose, r.charged_to, r.step) for r in state.ledger.requests]
    assert charged == [
        ("plan", "plan", None),
        ("act", "act", 0),  # write notes.md
        ("act", "act", 0),  # finish
        ("semantic", "final_check", None),
        ("semantic", "respond", None),  # the SCORED scoring
    ]
    assert [c.purpose for c in model.calls] == [r.purpose for r in state.ledger.requests]
    assert all((r.prompt_tokens, r.completion_tokens) == (1_000, 100) for r in state.ledger.requests)


def test_the_results_metrics_are_read_from_the_ledger_saved_across_phases(tmp_path: Path) -> None:
    state, result, _ = _phase_by_phase(tmp_path, _finishes, "SCORED")

    spent = state.ledger.spent()
    m = result.metrics
    assert (m.tokens_in, m.tokens_out, m.model_calls, m.response_cache_hits, m.cached_tokens) == (
        spent.tokens_in, spent.tokens_out, spent.model_calls, spent.cache_hits, spent.cached_tokens
    ) == (5_000, 500, 5, 0, 0)
    act = Spending.of(r for r in state.ledger.requests if r.step == 0)
    assert (result.skills[0].metrics.tokens_in, result.skills[0].metrics.model_calls) == (act.tokens_in, 2)
    assert result.plan_calls == state.ledger.spent("plan", "replan").model_calls == 1
    # the step records keep each request's usage as evidence: they agree with the ledger
    assert sum(r.tokens_in for r in result.skills[0].evidence_summary) == act.tokens_in


def test_run_and_a_phase_by_phase_driver_report_the_same_spending(tmp_path: Path) -> None:
    _, by_phases, _ = _phase_by_phase(tmp_path / "phases", _stalls)
    rt, _ = _runtime(tmp_path / "run", _stalls)
    by_run = run_goal(GoalRequest(goal="write the notes"), tmp_path / "run" / "out", rt)

    fields = ("tokens_in", "tokens_out", "model_calls", "tool_calls", "response_cache_hits", "cached_tokens")
    assert [getattr(by_phases.metrics, f) for f in fields] == [getattr(by_run.metrics, f) for f in fields]
    assert by_run.metrics.model_calls > 5  # plan, the stalled Act, its retry (superseded: still counted), re-plan
    assert len(by_run.skills) == 1 and by_phases.plan_calls == by_run.plan_calls


def test_a_finishs_own_check_is_charged_to_its_act(tmp_path: Path) -> None:
    rt, model = _runtime(tmp_path, _finishes, mode="step")
    state = start_goal(GoalRequest(goal="write the notes"), tmp_path / "out", rt.settings)
    phase: phases.Phase = phases.FIRST
    while not isinstance(phase, phases.Done):
        state, phase = advance(state, phase, rt)
    assert [(r.purpose, r.charged_to) for r in state.ledger.requests][1:4] == [
        ("act", "act"), ("act", "act"), ("semantic", "act")
    ]
    assert len(model.calls) == len(state.ledger.requests)
