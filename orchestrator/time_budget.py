"""The one rule for "the Act's time is up", for everyone who asks: the Act loop before each request, the tools that
bound their own work by the Act's time (``template_expand``, ``diff``, ``validate``, the renderings), the finish
that makes thumbnails only with time left, and the worker that sizes a phase's time limits from the Act's time.

An Act's time is ``limits.time_budget_ms`` from its start (``time.monotonic``). Less than
:data:`TIME_UP_MARGIN_S` left counts as none: a tool starts no more work then, and the loop asks the model no more,
so a tool's "the time is used up" never meets a loop that asks again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from orchestrator.config import Budgets

TIME_UP_MARGIN_S = 0.05
"""Less of the Act's time than this left counts as none."""


def act_time_s(limits: Budgets) -> float:
    """How long one Act may run, in seconds."""
    return limits.time_budget_ms / 1000


@dataclass(frozen=True)
class TimeBudget:
    """An Act's time: ``seconds`` from ``started`` (``time.monotonic()``)."""

    seconds: float
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def of(cls, limits: Budgets, *, started: float | None = None) -> TimeBudget:
        return cls(act_time_s(limits), time.monotonic() if started is None else started)

    @property
    def ends(self) -> float:
        """When the time is up (``time.monotonic()``)."""
        return self.started + self.seconds

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def left_s(self) -> float:
        """Seconds left; 0 once less than :data:`TIME_UP_MARGIN_S` is left."""
        left = self.ends - time.monotonic()
        return left if left > TIME_UP_MARGIN_S else 0.0

    def is_up(self) -> bool:
        return self.left_s() == 0.0
