"""The ledger decides who runs which phase of a job: once, by one worker at a time, and takes over dead ones."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry
from worker_helpers import RedisServer

from orchestrator.errors import WorkflowError
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import JobRecord
from orchestrator.workflow.goal import CHECKPOINT_VERSION, Checkpoint, GoalState
from orchestrator.workflow.request import GoalRequest


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    s = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield s
    s.stop()


@pytest.fixture
def ledger(server: RedisServer) -> Iterator[Ledger]:
    led = Ledger.from_url(server.url)
    led.r.flushdb()
    yield led


def _job(ledger: Ledger, job_id: str = "j1") -> JobRecord:
    record = JobRecord(job_id=job_id, goal="g", submitted_at=time.time())
    assert ledger.create(record)
    return record


def _checkpoint(note: str = "") -> Checkpoint:
    state = GoalState(request=GoalRequest(goal="g"), job_id="j1", out_dir=Path("/o"), work_dir=Path("/w"), notes=[note])
    return Checkpoint(state=state)


def test_a_job_id_is_created_once(ledger: Ledger) -> None:
    _job(ledger)
    assert not ledger.create(JobRecord(job_id="j1", goal="another goal", submitted_at=time.time()))
    assert ledger.get("j1").goal == "g"


def test_only_the_next_phase_runs_and_only_on_one_worker(ledger: Ledger) -> None:
    _job(ledger)
    assert ledger.acquire("j1", "act:0", worker="a", lease_s=30, max_attempts=3)[0] == "stale"
    outcome, token, attempts = ledger.acquire("j1", "plan", worker="a", lease_s=30, max_attempts=3)
    assert (outcome, attempts) == ("ok", 1)
    assert ledger.acquire("j1", "plan", worker="b", lease_s=30, max_attempts=3)[0] == "busy"
    record = ledger.get("j1")
    assert (record.state, record.worker, record.running) == ("planning", "a", True)
    ledger.commit_phase("j1", token, _checkpoint(), next="act:0")
    assert ledger.release("j1", token)
    # a redelivered plan task now does nothing
    assert ledger.acquire("j1", "plan", worker="b", lease_s=30, max_attempts=3)[0] == "stale"
    outcome, _, attempts = ledger.acquire("j1", "act:0", worker="b", lease_s=30, max_attempts=3)
    assert (outcome, attempts) == ("ok", 1)
    assert ledger.get("j1").state == "acting"


def test_a_stale_heartbeat_is_taken_over_once_with_attempts_raised(ledger: Ledger) -> None:
    _job(ledger)
    _, token, _ = ledger.acquire("j1", "plan", worker="dead", lease_s=30, max_attempts=3)
    assert ledger.running_ids() == ["j1"]
    assert ledger.take_over_if_stale("j1", stale_after_s=60, max_attempts=3, sweeper="s")[0] == "fresh"
    ledger.update("j1", heartbeat=time.time() - 120)
    assert ledger.take_over_if_stale("j1", stale_after_s=60, max_attempts=3, sweeper="s") == ("requeue", "plan", 2)
    # a second sweeper finds nothing left to take over
    assert ledger.take_over_if_stale("j1", stale_after_s=60, max_attempts=3, sweeper="t")[0] == "fresh"
    record = ledger.get("j1")
    assert record.attempts == 2 and "stopped heartbeating during plan" in (record.reason or "")
    # the dead worker lost its lease: it can neither renew nor commit
    assert not ledger.renew("j1", token, 30)
    outcome, _, attempts = ledger.acquire("j1", "plan", worker="live", lease_s=30, max_attempts=3)
    assert (outcome, attempts) == ("ok", 2)


def test_after_the_attempt_cap_the_job_fails_with_the_reason(ledger: Ledger) -> None:
    _job(ledger)
    for _ in range(3):
        outcome, _, _ = ledger.acquire("j1", "plan", worker="dies", lease_s=30, max_attempts=3)
        assert outcome == "ok"
        ledger.update("j1", heartbeat=time.time() - 120)
        outcome, _, _ = ledger.take_over_if_stale("j1", stale_after_s=60, max_attempts=3, sweeper="s")
    assert outcome == "exhausted"
    record = ledger.get("j1")
    assert record.state == "failed" and record.next == "end" and record.attempts == 4
    assert "gave up after 3 attempts" in (record.reason or "")
    assert ledger.running_ids() == []
    assert ledger.acquire("j1", "plan", worker="late", lease_s=30, max_attempts=3)[0] == "stale"


def test_a_phase_redelivered_after_its_worker_died_counts_as_an_attempt(ledger: Ledger) -> None:
    _job(ledger)
    ledger.acquire("j1", "plan", worker="dead", lease_s=0.2, max_attempts=3)
    time.sleep(0.3)  # the lease expired, the running flag stayed: the first run never finished
    outcome, _, attempts = ledger.acquire("j1", "plan", worker="b", lease_s=30, max_attempts=3)
    assert (outcome, attempts) == ("ok", 2)


def test_commit_is_refused_to_a_worker_that_lost_its_lease(ledger: Ledger, tmp_path: Path) -> None:
    from orchestrator.worker.leases import LeaseLost

    _job(ledger)
    _, token, _ = ledger.acquire("j1", "plan", worker="slow", lease_s=30, max_attempts=3)
    ledger.update("j1", heartbeat=time.time() - 120)
    ledger.take_over_if_stale("j1", stale_after_s=60, max_attempts=3, sweeper="s")
    with pytest.raises(LeaseLost):
        ledger.commit_phase("j1", token, _checkpoint(), next="act:0")
    assert ledger.get("j1").next == "plan"


def test_a_workers_ledger_rides_out_a_redis_restart_and_saves_the_phase_once(tmp_path: Path) -> None:
    import threading

    server = RedisServer(tmp_path / "redis").start()
    try:
        ledger = Ledger.from_url(server.url, outage_s=20)
        _job(ledger)
        _, token, _ = ledger.acquire("j1", "plan", worker="w", lease_s=60, max_attempts=3)
        server.stop()  # the phase is running; Redis goes away and comes back 2 s later
        threading.Timer(2, server.start).start()
        ledger.commit_phase("j1", token, _checkpoint("n1"), next="act:0")  # waits for Redis, then saves
        ledger.commit_phase("j1", token, _checkpoint("n1"), next="act:0")  # a retried save changes nothing
        assert ledger.release("j1", token)
        record = ledger.get("j1")
        assert (record.next, record.running, record.attempts) == ("act:0", False, 1)
        assert ledger.load_checkpoint("j1") == _checkpoint("n1")
        assert ledger.acquire("j1", "plan", worker="late", lease_s=60, max_attempts=3)[0] == "stale"
    finally:
        server.stop()


class _LosesReplies(redis.Connection):
    """A connection whose reply to the next write (a script or a push) is lost after Redis ran it (as when Redis stops
    mid-reply)."""

    lose = 0

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        self._sent = args[0]
        super().send_command(*args, **kwargs)

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        response = super().read_response(*args, **kwargs)
        if self._sent in ("EVALSHA", "RPUSH") and _LosesReplies.lose > 0:
            _LosesReplies.lose -= 1
            raise redis.ConnectionError("the reply was lost")
        return response


@pytest.fixture
def lossy(server: RedisServer) -> Ledger:
    """A worker's ledger whose client sends a call again when its reply is lost (the script ran already)."""
    pool = redis.ConnectionPool.from_url(
        server.url, connection_class=_LosesReplies, retry=Retry(ExponentialBackoff(cap=0.1, base=0.01), retries=3)
    )
    ledger = Ledger(redis.Redis(connection_pool=pool))
    ledger.r.flushdb()
    _LosesReplies.lose = 0
    return ledger


def test_an_acquire_whose_reply_was_lost_and_sent_again_holds_its_lease_with_one_attempt(lossy: Ledger) -> None:
    ledger = lossy
    _job(ledger)
    _LosesReplies.lose = 1
    outcome, token, attempts = ledger.acquire("j1", "plan", worker="w", lease_s=60, max_attempts=3)
    assert _LosesReplies.lose == 0  # the first reply was indeed lost
    assert (outcome, attempts) == ("ok", 1)
    assert ledger.get("j1").attempts == 1
    assert ledger.acquire("j1", "plan", worker="other", lease_s=60, max_attempts=3)[0] == "busy"
    ledger.commit_phase("j1", token, _checkpoint(), next="act:0")
    assert ledger.release("j1", token)


def test_a_phase_given_back_whose_reply_was_lost_is_still_queued_once(lossy: Ledger) -> None:
    _job(lossy)
    _, token, _ = lossy.acquire("j1", "plan", worker="w", lease_s=60, max_attempts=3)
    _LosesReplies.lose = 1
    assert lossy.give_back("j1", token, why="model server down", max_attempts=3) == "queued"  # not "lost"
    assert _LosesReplies.lose == 0
    record = lossy.get("j1")
    assert (record.state, record.running, record.attempts) == ("queued", False, 1)
    assert lossy.acquire("j1", "plan", worker="other", lease_s=60, max_attempts=3)[::2] == ("ok", 2)


def test_a_takeover_whose_reply_was_lost_still_requeues_the_phase_counted_once(lossy: Ledger) -> None:
    _job(lossy)
    lossy.acquire("j1", "plan", worker="dead", lease_s=60, max_attempts=3)
    lossy.update("j1", heartbeat=time.time() - 120)
    _LosesReplies.lose = 1
    assert lossy.take_over_if_stale("j1", stale_after_s=60, max_attempts=3, sweeper="s") == ("requeue", "plan", 2)
    assert _LosesReplies.lose == 0
    assert lossy.get("j1").attempts == 2
    # another sweep (a new call) finds nothing left to take over
    assert lossy.take_over_if_stale("j1", stale_after_s=60, max_attempts=3, sweeper="t")[0] == "fresh"


def test_a_history_entry_whose_reply_was_lost_is_kept_once(lossy: Ledger) -> None:
    _job(lossy)
    entry = {"phase": "plan", "worker": "w", "attempt": 1, "start": 1.0, "end": 2.0, "outcome": "act:0"}
    _LosesReplies.lose = 1
    lossy.add_history("j1", entry)
    assert _LosesReplies.lose == 0
    lossy.add_history("j1", {**entry, "phase": "act:0", "outcome": "reflect"})
    assert [h["phase"] for h in lossy.history("j1")] == ["plan", "act:0"]


def test_commands_run_by_people_fail_fast_when_redis_is_away(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis").start()
    ledger = Ledger.from_url(server.url)
    server.stop()
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError):
        ledger.get("j1")
    assert time.monotonic() - started < 15


def test_a_checkpoint_of_another_schema_version_is_refused_saying_so(ledger: Ledger) -> None:
    _job(ledger)
    _, token, _ = ledger.acquire("j1", "plan", worker="w", lease_s=30, max_attempts=3)
    ledger.commit_phase("j1", token, _checkpoint("kept"), next="act:0")
    assert ledger.load_checkpoint("j1") == _checkpoint("kept")
    old = _checkpoint().model_dump(mode="json")
    del old["version"]  # as the first workers saved it
    ledger.r.set("orch:checkpoint:j1", json.dumps(old))
    with pytest.raises(WorkflowError, match=f"schema version 1; this worker reads version {CHECKPOINT_VERSION}"):
        ledger.load_checkpoint("j1")
    ledger.r.set("orch:checkpoint:j1", json.dumps({**_checkpoint().model_dump(mode="json"), "state": {"plan": 7}}))
    with pytest.raises(WorkflowError, match="the goal's saved state does not read back"):
        ledger.load_checkpoint("j1")
