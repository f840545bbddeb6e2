"""A graceful stop hands the running phase back: a worker told to stop (SIGTERM, as `docker compose stop` sends it
to the worker's main process) interrupts its running phase within a few heartbeats, removes the phase's sandbox
containers, puts the phase back on the queue with the reason, and exits long before the phase would have ended;
the next worker runs the phase from the last saved state (the plan is not run again), no sooner than the backoff
the hand-back was queued with.

Real Redis (a private server), real Celery workers, real Docker."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import yaml
from test_faults import SLEEPER, _job_containers
from worker_helpers import LABEL_PREFIX, Cluster, wait_for


def _container_ids(docker_client, job_id: str) -> set[str]:
    key = f"{LABEL_PREFIX}.job"
    found = docker_client.api.containers(all=True, filters={"label": key})
    labels = {c["Id"]: (c.get("Labels") or {}).get(key, "") for c in found}
    return {cid for cid, v in labels.items() if v == job_id or v.startswith(f"{job_id}-")}


@pytest.mark.docker
@pytest.mark.redis
def test_a_graceful_stop_hands_the_running_phase_back_to_the_next_worker(
    cluster: Cluster, docker_client, sandbox_image: str, tmp_path: Path
) -> None:
    cluster.settings_env.update(ORCH_WORKER__HEARTBEAT_S="1", ORCH_WORKER__REQUEUE_BACKOFF_S="8")
    scenario = tmp_path / "sleeper.yaml"
    scenario.write_text(yaml.safe_dump(SLEEPER, sort_keys=False))
    cluster.start_worker("leaving")
    line = json.dumps({"goal": SLEEPER["goal"], "model": f"scripted:{scenario}", "job_id": "handback"})
    assert cluster.cli("submit", "-", stdin=line).returncode == 0
    ledger = cluster.ledger()
    wait_for(lambda: _job_containers(docker_client, "handback"), 120, "the script's container to run")
    cluster.start_worker("next")
    wait_for(lambda: any(w["name"].startswith("next@") and w["ready"] for w in ledger.workers()), 60,
             "the next worker to be ready")

    running_before = _container_ids(docker_client, "handback")
    assert running_before
    leaving = cluster.workers.pop("leaving")
    stopped = time.monotonic()
    os.kill(leaving.pid, signal.SIGTERM)  # the main process only, as a container runtime does
    leaving.wait(timeout=60)
    assert time.monotonic() - stopped < 30, "the stop waited for the phase (a 300 s script) instead of handing it back"

    history = ledger.get("handback").history
    handed = [h for h in history if str(h["outcome"]).startswith("given_back")]
    assert len(handed) == 1 and handed[0]["worker"].startswith("leaving@"), history
    assert handed[0]["phase"] == "act:0" and "was stopped during act:0" in handed[0]["reason"]
    assert not running_before & _container_ids(docker_client, "handback")  # its script's containers went with it

    wait_for(lambda: (r := ledger.get("handback")).running and (r.worker or "").startswith("next@"), 90,
             "the next worker to run the phase")
    assert [h["phase"] for h in ledger.get("handback").history].count("plan") == 1  # resumed after the saved plan
    # Not at once: the first attempt's hand-back waits 4-8 s (half of 8 s fixed, half random) in the queue, though
    # the next worker stood idle and ready all along.
    waited = handed[0]["requeued_after_s"]
    assert 4.0 <= waited <= 8.0, handed[0]
    started_again = ledger.get("handback").phase_started
    assert started_again is not None and started_again - handed[0]["end"] >= waited - 0.5, (started_again, handed)
    assert cluster.cli("jobs", "handback", "--cancel").returncode == 0
    wait_for(lambda: not _job_containers(docker_client, "handback"), 60, "the job's containers to be removed")
