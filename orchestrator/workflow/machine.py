"""The goal machine: one transition, ``advance(state, phase, runtime) -> (state, next phase)``, holding every rule
of a goal's course once. ``run`` loops over it in one process; a worker calls it once per task, saving the state
in between (``workflow.run.drive`` and ``worker.phases.run_phase``).

The rules:

- Plan: choose the steps; a plan with no step (no skill fits) goes straight to Reflect.
- Act(i): run step i; a failed step stops the chain (later steps build on its outputs), so does the last step:
  then Reflect; otherwise Act(i + 1) — unless the goal's budget is spent: the steps left are not run (a note says
  so) and Reflect judges what was done. A step that ran already is the retry Reflect queued: it runs once more,
  told why it stayed unmet, in place (later steps are not run again), then Reflect.
- Plan(i): the re-plan Reflect queued: a new plan from step i on; the chain resumes at Act(i), or, when no plan
  came of it, Reflect judges.
- Reflect: ``reflect.decide`` says what to do: queue a retry (Act(i)) or a re-plan (Plan(i)), each a phase of its
  own, or end the goal with its verdict.
- The goal's own budget (``workflow.budget``) holds over all of it: each Act gets what is left, Reflect refuses a
  retry or re-plan once it is spent, and the final check and the SCORED answer are not asked for beyond it.
"""

from __future__ import annotations

from orchestrator.workflow import phases, reflect
from orchestrator.workflow.budget import GoalBudget
from orchestrator.workflow.goal import GoalState
from orchestrator.workflow.judge import judge
from orchestrator.workflow.phases import Phase
from orchestrator.workflow.runtime import Runtime
from orchestrator.workflow.steps import act_step, plan_goal, refuse, replan, retry_step, skip_steps


def _is_retry(state: GoalState, index: int) -> bool:
    """Step ``index`` ran already: only Reflect queues an Act of such a step (a re-plan drops the steps it replaces)."""
    return index < len(state.results)


def advance(state: GoalState, phase: Phase, rt: Runtime) -> tuple[GoalState, Phase]:
    """Run ``phase`` on a copy of ``state``; returns the new state and the phase to run next.

    ``state`` itself is left as it was: when the phase raises, it is still the last state saved, which is what
    a failure result is built from (``judge.failed_result``) in both drivers.
    """
    state = state.model_copy(deep=True)
    match phase:
        case phases.Plan(step=None):
            plan_goal(state, rt)
            return state, _next_step(state, 0, rt)
        case phases.Plan(step=step):
            assert step is not None
            return state, _next_step(state, step, rt) if replan(state, step, rt) else phases.Reflect()
        case phases.Act(index=index) if _is_retry(state, index):
            retry_step(state, index, rt)
            return state, phases.Reflect()
        case phases.Act(index=index):
            act_step(state, index, rt)
            if state.results[index].status == "failed":
                return state, phases.Reflect()
            return state, _next_step(state, index + 1, rt)
        case phases.Reflect():
            return state, _reflect(state, rt)
        case phases.Done():
            raise ValueError("a goal that is done has no next phase")


def _next_step(state: GoalState, index: int, rt: Runtime) -> Phase:
    """Act(index), or Reflect after the last step or once the goal's budget is spent (the steps left are not run)."""
    assert state.plan is not None
    if index >= len(state.plan.steps):
        return phases.Reflect()
    if (spent := GoalBudget.of(state, rt.settings.limits).exhausted()) is not None:
        skip_steps(state, index, spent, rt)
        return phases.Reflect()
    return phases.Act(index)


def _reflect(state: GoalState, rt: Runtime) -> Phase:
    match reflect.decide(state, rt.settings.selection, rt.settings.limits):
        case reflect.RetryStep(index=index):
            return phases.Act(index)
        case reflect.Replan(step=step):
            return phases.Plan(step)
        case reflect.Refused() as refused:
            refuse(state, refused, rt)
            return phases.Done(judge(state, rt))
        case reflect.Judge():
            return phases.Done(judge(state, rt))
