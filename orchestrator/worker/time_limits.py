"""Celery time limits per phase, derived from the budgets, and the broker visibility timeout above them all.

A phase is one unit of work (``workflow.phases``): a plan or a re-plan, one Act or one retry of it, one Reflect
(which queues a retry or a re-plan as a phase of its own, or judges the goal). Each limit is sized for its unit.
The Act loop enforces ``time_budget_ms`` itself between turns; the task limits are the backstop for a phase stuck
in one model call or one script. The soft limit leaves the task time to kill the job's containers and record the
failure; the hard limit kills the worker process if even that hangs.
"""

from __future__ import annotations

import random
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from orchestrator.config import Settings, WorkerSettings
from orchestrator.time_budget import act_time_s
from orchestrator.workflow.phases import PhaseKind


def _model_call_s(settings: Settings) -> float:
    m = settings.model
    return m.request_timeout_s * (m.max_retries + 1)


def _act_s(settings: Settings) -> float:
    return act_time_s(settings.limits) + _model_call_s(settings) + settings.limits.script_timeout_s


def soft_limit_s(settings: Settings, phase: PhaseKind) -> float:
    margin = settings.worker.time_limit_margin_s
    if phase == PhaseKind.PLAN:
        return 2 * _model_call_s(settings) + margin  # an unusable plan is sent back once (a re-plan's too)
    if phase == PhaseKind.REFLECT:
        # The final check of the whole output, given the time an Act has, and two model calls: the semantic check
        # and the SCORED answer.
        return act_time_s(settings.limits) + 2 * _model_call_s(settings) + margin
    return _act_s(settings) + margin


def hard_limit_s(settings: Settings, phase: PhaseKind) -> float:
    return soft_limit_s(settings, phase) + max(30.0, settings.worker.time_limit_margin_s)


def requeue_delay_s(worker: WorkerSettings, attempt: int, rng: random.Random | None = None) -> float:
    """How long a phase handed back (or taken over) after its ``attempt``-th attempt waits in the queue: exponential
    in the attempts (``requeue_backoff_s`` × 2^(attempt - 1), at most ``requeue_backoff_max_s``) with equal jitter,
    half of it fixed and half random. So a phase is never sent back at once (a worker whose environment just failed
    is not handed its own phase again in a tight loop), and phases handed back together (a stopped worker's) come
    back spread out."""
    full = min(worker.requeue_backoff_max_s, worker.requeue_backoff_s * 2.0 ** min(max(0, attempt - 1), 30))
    return full / 2 + (rng or random).uniform(0, full / 2)


VISIBILITY_MARGIN_S = 600.0
MIN_VISIBILITY_S = 3600.0


def at_ceilings(settings: Settings) -> Settings:
    """``settings`` with the largest time budgets a goal line may ask for: each of ``time_budget_ms`` and
    ``script_timeout_s`` at its ceiling (or at the deployment's default, when that is larger)."""
    limits, ceilings = settings.limits, settings.ceilings
    widest = limits.model_copy(update={
        "time_budget_ms": max(limits.time_budget_ms, ceilings.time_budget_ms),
        "script_timeout_s": max(limits.script_timeout_s, ceilings.script_timeout_s),
    })
    return settings.model_copy(update={"limits": widest})


def visibility_timeout_s(settings: Settings) -> float:
    """Longer than any phase of any accepted goal may run: the hard limit of the longest phase with every time
    budget at its ceiling, plus ``VISIBILITY_MARGIN_S`` (an hour at least). Redis redelivers an unacknowledged task
    only after this, so a slow phase is never handed to a second worker while the first still runs it; and every
    budget within the ceilings is accepted. (A dead worker's phase is taken over by the ledger after
    ``worker.stale_after_s``, long before.)"""
    widest = at_ceilings(settings)
    longest = max(hard_limit_s(widest, kind) for kind in (PhaseKind.PLAN, PhaseKind.ACT, PhaseKind.REFLECT))
    return max(MIN_VISIBILITY_S, longest + VISIBILITY_MARGIN_S)


class SoftLimitReached(BaseException):
    """The phase's soft time limit passed.

    Raised in place of Celery's ``SoftTimeLimitExceeded``, which is an ``Exception``: the Act loop's and the
    workflow's catch-alls (a tool that crashed, a bug of ours) would take it for one tool's failure and carry on.
    A ``BaseException`` passes through them, running their ``finally`` clean-ups, up to the phase.
    """


@contextmanager
def soft_limit_interrupts() -> Iterator[None]:
    """While inside: the soft time limit's signal (``SIGUSR1`` in a prefork pool process) raises
    :class:`SoftLimitReached`. Only in the main thread (the signal's), where prefork and solo pools run tasks."""
    sig = getattr(signal, "SIGUSR1", None)
    if sig is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def reached(signum: int, frame: FrameType | None) -> None:
        raise SoftLimitReached()

    previous = signal.signal(sig, reached)
    try:
        yield
    finally:
        signal.signal(sig, previous)
