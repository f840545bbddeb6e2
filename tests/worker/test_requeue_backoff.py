"""A phase handed back (or taken over) is queued again after a backoff: exponential in its attempts, bounded, with
jitter, never at once. The real-worker side (the next worker starts it no sooner than that):
tests/worker/test_graceful_stop.py."""

from __future__ import annotations

import random

import pytest

from orchestrator.config import load_settings
from orchestrator.errors import ConfigError
from orchestrator.worker.time_limits import requeue_delay_s


def _worker(base_s: float = 2.0, cap_s: float = 60.0):
    return load_settings(worker={"requeue_backoff_s": base_s, "requeue_backoff_max_s": cap_s}).worker


@pytest.mark.parametrize(("attempt", "full"), [(1, 2.0), (2, 4.0), (3, 8.0), (5, 32.0), (6, 60.0), (40, 60.0),
                                               (10**9, 60.0), (0, 2.0), (-3, 2.0)])
def test_the_wait_doubles_per_attempt_up_to_the_cap_and_is_never_less_than_half(attempt: int, full: float) -> None:
    rng = random.Random(attempt)
    delays = [requeue_delay_s(_worker(), attempt, rng) for _ in range(300)]
    assert all(full / 2 <= d <= full for d in delays)
    assert max(delays) - min(delays) > full / 4  # jittered: phases handed back together come back spread out


def test_the_defaults_wait_a_few_seconds_and_the_cap_stays_far_inside_the_visibility_timeout() -> None:
    worker = load_settings().worker
    assert 1.0 <= requeue_delay_s(worker, 1) <= 2.0
    with pytest.raises(ConfigError):
        load_settings(worker={"requeue_backoff_max_s": 3600})
    assert requeue_delay_s(_worker(base_s=0), 3) == 0.0  # switched off, as an operator may choose
