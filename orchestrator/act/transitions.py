"""The typed transitions of the Act loop: each turn returns one of these, and the driver dispatches on it."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.act.act_io import ExitReason


@dataclass(frozen=True)
class Exit:
    """Why the Act ends, and what a person can do about it."""

    reason: ExitReason
    why: str
    next_step: str = ""


@dataclass(frozen=True)
class Continue:
    """The Act goes on with another turn."""


@dataclass(frozen=True)
class Finished:
    """The model finished and the outputs passed (or QA is off): ``exit`` says which."""

    exit: Exit


@dataclass(frozen=True)
class Stopped:
    """The Act ends without a pass: a budget, a violation, a cycle, a stall, a failed model or sandbox."""

    exit: Exit


StepResult = Continue | Finished | Stopped
