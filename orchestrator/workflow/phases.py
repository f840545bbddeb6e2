"""The course of a goal as typed values: ``Plan(step) | Act(index) | Reflect | Done(result)``.

This is the one module that spells a phase as text (``plan``, ``plan:N``, ``act:N``, ``reflect``, ``end``): the
worker keeps the token of a job's next phase in its ledger and queues tasks by it; everything else passes typed
phases. One phase is one unit of work: a plan (or a re-plan), one Act (or one retry of it), one Reflect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from orchestrator.errors import WorkflowError

if TYPE_CHECKING:  # the goal's models pull in the whole Act; a phase token is read without them (jobs, submit)
    from orchestrator.workflow.goal import GoalResult


class PhaseKind(StrEnum):
    """What a phase does; also the name of its Celery task and of its time limits."""

    PLAN = "plan"
    ACT = "act"
    REFLECT = "reflect"
    DONE = "end"


@dataclass(frozen=True)
class Plan:
    """Choose the skills for the goal; with ``step``, the re-plan Reflect asked for: a new plan of the work from step
    ``step`` on (the steps before it are kept)."""

    step: int | None = None
    kind = PhaseKind.PLAN


@dataclass(frozen=True)
class Act:
    """Run step ``index`` of the plan; a step that ran already is run again: the retry Reflect asked for."""

    index: int
    kind = PhaseKind.ACT


@dataclass(frozen=True)
class Reflect:
    """Decide: queue a retry (an Act) or a re-plan (a Plan), or judge the goal (see ``workflow.reflect.decide``)."""

    kind = PhaseKind.REFLECT


@dataclass(frozen=True)
class Done:
    """The goal ended; ``result`` is None only when read back from a token (the ledger keeps the result itself)."""

    result: GoalResult | None = None
    kind = PhaseKind.DONE


Phase = Plan | Act | Reflect | Done

_ACT = re.compile(r"act:(0|[1-9][0-9]{0,5})")
_REPLAN = re.compile(r"plan:(0|[1-9][0-9]{0,5})")


def token(phase: Phase) -> str:
    """The phase as the ledger and the task queue spell it."""
    if isinstance(phase, Act):
        return f"{PhaseKind.ACT.value}:{phase.index}"
    if isinstance(phase, Plan) and phase.step is not None:
        return f"{PhaseKind.PLAN.value}:{phase.step}"
    return phase.kind.value


def parse(text: str) -> Phase:
    """The phase a token names; :class:`WorkflowError` for anything else (the ledger is input too)."""
    if text == PhaseKind.PLAN.value:
        return Plan()
    if text == PhaseKind.REFLECT.value:
        return Reflect()
    if text == PhaseKind.DONE.value:
        return Done()
    if (match := _ACT.fullmatch(text)) is not None:
        return Act(int(match.group(1)))
    if (match := _REPLAN.fullmatch(text)) is not None:
        return Plan(int(match.group(1)))
    raise WorkflowError(f"not a phase of a goal: {text[:60]!r}", where="phase", next_step="report it as a bug")


def is_phase_token(text: str) -> bool:
    """True for the token of a phase that runs (``plan``, ``plan:N``, ``act:N``, ``reflect``)."""
    try:
        return not isinstance(parse(text), Done)
    except WorkflowError:
        return False


FIRST: Phase = Plan()
