"""States mean what they say between phases: a job whose last phase saved and whose next phase waits for a worker
reads ``queued (act 2/4)`` in ``jobs``, ``queued`` with ``waiting_for`` in ``--json`` (the ledger still holds the
last phase's ``acting``); a phase that runs reads as its state; ``stalled`` stays ``stalled``."""

from __future__ import annotations

import json
import time

from worker_helpers import Cluster

from orchestrator.config import load_settings
from orchestrator.worker.records import JobRecord
from orchestrator.worker.views import shown_state, state_label, summary, waiting_for
from orchestrator.workflow import phases

SETTINGS = load_settings()


def _record(**fields: object) -> JobRecord:
    base: dict[str, object] = {"job_id": "j", "goal": "g", "submitted_at": time.time(), "plan": ["a", "b", "c", "d"],
                               "steps_total": 4}
    return JobRecord.model_validate({**base, **fields})


def test_a_job_between_phases_is_queued_for_its_next_phase() -> None:
    waiting = _record(state="acting", running=False, next=phases.token(phases.Act(1)), step=0)
    assert shown_state(waiting, SETTINGS) == ("queued", None)
    assert state_label(waiting, SETTINGS) == "queued (act 2/4)"
    row = summary(waiting, SETTINGS)
    assert (row["state"], row["waiting_for"]) == ("queued", "act 2/4")
    reflect = _record(state="acting", running=False, next=phases.token(phases.Reflect()))
    assert state_label(reflect, SETTINGS) == "queued (reflect)"
    fresh = _record(state="queued", plan=[], steps_total=None)
    assert state_label(fresh, SETTINGS) == "queued (plan)"


def test_a_running_phase_and_an_ended_job_read_as_they_are() -> None:
    now = time.time()
    running = _record(state="acting", running=True, heartbeat=now, next=phases.token(phases.Act(1)), step=1)
    assert state_label(running, SETTINGS, now) == "acting" and waiting_for(running) is None
    silent = running.model_copy(update={"heartbeat": now - 10 * SETTINGS.worker.stalled_after_s})
    assert shown_state(silent, SETTINGS, now)[0] == "stalled"
    done = _record(state="done", running=False, next=phases.token(phases.Done()))
    assert state_label(done, SETTINGS) == "done" and "waiting_for" not in summary(done, SETTINGS)


def test_jobs_shows_the_phase_a_queued_job_waits_for(cluster: Cluster) -> None:
    ledger = cluster.ledger()
    record = _record(job_id="between", state="acting", next=phases.token(phases.Act(1)), step=0, skill="a")
    assert ledger.create(record)
    table = cluster.cli("jobs").stdout
    assert "queued (act 2/4)" in table and "acting" not in table
    one = json.loads(cluster.cli("jobs", "between", "--json").stdout)
    assert (one["state"], one["ledger_state"], one["waiting_for"]) == ("queued", "acting", "act 2/4")
    listed = json.loads(cluster.cli("jobs", "--state", "queued", "--json").stdout)
    assert [(j["job_id"], j["waiting_for"]) for j in listed] == [("between", "act 2/4")]
