"""The goal machine: one transition, ``advance(state, phase, runtime) -> (state, next phase)``, holding every rule
of a goal's course once. ``run`` loops over it in one process; a worker calls it once per task, saving the state
in between (``workflow.run.drive`` and ``worker.phases.run_phase``).

The rules:

- Plan: choose the steps; a plan with no step (no skill fits) goes straight to Reflect.
- Act(i): run step i; a failed step stops the chain (later steps build on its outputs), so does the last step:
  then Reflect; otherwise Act(i + 1).
- Reflect: ``reflect.decide`` says what to do; retries run in place (the step keeps its index, later steps are not
  run again), a re-plan resumes the chain at the first replaced step, anything else ends the goal with its verdict.
"""

from __future__ import annotations

from orchestrator.workflow import phases, reflect
from orchestrator.workflow.judge import judge
from orchestrator.workflow.models import GoalState
from orchestrator.workflow.phases import Phase
from orchestrator.workflow.runtime import Runtime
from orchestrator.workflow.steps import act_step, plan_goal, refuse_replan, replan, retry_step


def advance(state: GoalState, phase: Phase, rt: Runtime) -> tuple[GoalState, Phase]:
    """Run ``phase`` on a copy of ``state``; returns the new state and the phase to run next.

    ``state`` itself is left as it was: when the phase raises, it is still the last state saved, which is what
    a failure result is built from (``judge.failed_result``) in both drivers.
    """
    state = state.model_copy(deep=True)
    match phase:
        case phases.Plan():
            plan_goal(state, rt)
            return state, _first_step(state)
        case phases.Act(index=index):
            act_step(state, index, rt)
            return state, _after_step(state, index)
        case phases.Reflect():
            return state, _reflect(state, rt)
        case phases.Done():
            raise ValueError("a goal that is done has no next phase")


def _first_step(state: GoalState) -> Phase:
    assert state.plan is not None
    return phases.Act(0) if state.plan.steps else phases.Reflect()


def _after_step(state: GoalState, index: int) -> Phase:
    assert state.plan is not None
    if state.results[index].status == "failed" or index + 1 >= len(state.plan.steps):
        return phases.Reflect()
    return phases.Act(index + 1)


def _reflect(state: GoalState, rt: Runtime) -> Phase:
    while True:
        match reflect.decide(state, rt.settings.selection):
            case reflect.RetryStep(index=index):
                retry_step(state, index, rt)
            case reflect.Replan(step=step):
                if replan(state, step, rt):
                    return phases.Act(step)
                return phases.Done(judge(state, rt))
            case reflect.Refused(step=step, budget=budget):
                refuse_replan(state, step, budget, rt)
                return phases.Done(judge(state, rt))
            case reflect.Judge():
                return phases.Done(judge(state, rt))
