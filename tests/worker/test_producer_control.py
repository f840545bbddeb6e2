"""A producer controls their jobs and waiting tells them what goes on: no live worker is said, a timeout names the
jobs still waiting and exits 3, a running phase whose worker went silent shows ``stalled``, a job is cancelled
(running: its containers killed, its files kept as partial) and run again explicitly, its earlier run kept; a
worker that cannot reach its model takes no work, and one that meets such an error mid-job hands the phase back.

Real Redis (a private server per test), real Celery workers, real Docker.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_faults import SLEEPER, _job_containers
from worker_helpers import BRAND_GOAL, REPO, Cluster, RedisServer, free_port, goal_line, wait_for


@pytest.mark.docker
@pytest.mark.redis
def test_without_a_worker_waiting_says_so_times_out_with_code_3_and_a_queued_job_can_be_cancelled_and_rerun(
    cluster: Cluster, sandbox_image: str
) -> None:
    cluster.settings_env.update(ORCH_WORKER__HEARTBEAT_S="1")
    started = time.monotonic()
    waited = cluster.cli("submit", "-", "--wait", "--timeout", "12", stdin=goal_line("lonely"), timeout=60)
    assert waited.returncode == 3
    assert time.monotonic() - started < 30
    lines = [json.loads(x) for x in waited.stderr.splitlines() if x.startswith("{")]
    events = [x["event"] for x in lines]
    assert "submit.workers" in events and "no live worker consumes queue" in waited.stderr
    assert events.count("submit.progress") >= 2  # off a terminal: a line at least every 10 s
    timeout = next(x for x in lines if x["event"] == "submit.timeout")
    assert timeout["not_ended"] == ["lonely"] and "lonely queued" in timeout["message"]

    listed = json.loads(cluster.cli("jobs", "--json").stdout)
    assert listed[0]["state"] == "queued" and "no live worker" in listed[0]["note"]

    # a phase whose worker stopped heart-beating: the ledger still says acting, people are told stalled
    ledger = cluster.ledger()
    assert cluster.cli("submit", "-", stdin=goal_line("silent")).returncode == 0
    outcome, _token, _ = ledger.acquire("silent", "plan", worker="gone@host:1", lease_s=60, max_attempts=3)
    assert outcome == "ok"
    stalled = wait_for(lambda: (j := cluster.job("silent"))["state"] == "stalled" and j, 15, "stalled")
    assert stalled["ledger_state"] == "planning" and stalled["stalled_since"] > 0
    assert "gone@host:1 stopped heart-beating" in stalled["note"]
    assert [j["job_id"] for j in json.loads(cluster.cli("jobs", "--state", "stalled", "--json").stdout)] == ["silent"]

    cancelled = cluster.cli("jobs", "lonely", "--cancel")
    assert cancelled.returncode == 0 and cluster.job("lonely")["state"] == "cancelled"
    assert cluster.cli("jobs", "lonely", "--cancel").returncode == 1  # already ended: said, nothing changed
    duplicate = json.loads(cluster.cli("submit", "-", "--json", stdin=goal_line("lonely")).stdout)
    assert duplicate["accepted"][0]["duplicate"] and duplicate["accepted"][0]["state"] == "cancelled"

    cluster.start_worker("w1")
    again = cluster.cli("submit", "-", "--rerun", "--wait", "--timeout", "200", "--json",
                        stdin=goal_line("lonely"), timeout=260)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["accepted"][0]["rerun"] is True
    job = cluster.job("lonely")
    assert job["state"] == "done" and job["run"] == 2
    assert [(r["run"], r["state"]) for r in job["earlier_runs"]] == [(1, "cancelled")]
    assert "/run-2/" in job["evidence_path"]
    assert cluster.cli("jobs", "lonely", "--rerun").returncode == 1  # a done job is not run again


@pytest.mark.docker
@pytest.mark.redis
def test_cancelling_a_running_job_stops_its_phase_kills_its_containers_and_keeps_its_files(
    cluster: Cluster, docker_client, sandbox_image: str, tmp_path: Path
) -> None:
    cluster.settings_env.update(ORCH_WORKER__HEARTBEAT_S="1")
    scenario = tmp_path / "sleeper.yaml"
    scenario.write_text(yaml.safe_dump(SLEEPER, sort_keys=False))
    cluster.start_worker("w1")
    line = json.dumps({"goal": SLEEPER["goal"], "model": f"scripted:{scenario}", "job_id": "napping"})
    assert cluster.cli("submit", "-", stdin=line).returncode == 0
    wait_for(lambda: _job_containers(docker_client, "napping"), 120, "the script's container to run")
    assert cluster.cli("jobs", "napping", "--cancel").returncode == 0
    assert cluster.job("napping")["state"] == "cancelled"
    wait_for(lambda: not _job_containers(docker_client, "napping"), 30, "the job's containers to be killed")
    job = wait_for(lambda: (j := cluster.job("napping"))["result"] and j, 30, "the worker to mark the files")
    assert job["state"] == "cancelled" and job["result"]["status"] == "cancelled"
    assert all(a["partial"] for a in job["artifacts"])
    assert job["history"][-1]["outcome"] == "cancelled"  # said as such, not as a lost lease
    assert Path(job["result"]["evidence_path"]).is_file()
    # Celery (and so Flower) never records the stopped phase as a success
    from celery.result import AsyncResult

    from orchestrator.config import load_settings
    from orchestrator.worker.celery_app import create_app

    task = AsyncResult(job["task_id"], app=create_app(load_settings(broker_url=cluster.redis.url)))
    wait_for(lambda: task.state in ("FAILURE", "REVOKED", "SUCCESS"), 60, "the phase's task to be recorded")
    assert task.state in ("FAILURE", "REVOKED"), task.state
    if task.state == "FAILURE":
        assert type(task.result).__name__ == "JobCancelled" and "cancelled" in str(task.result)


@pytest.mark.docker
@pytest.mark.redis
def test_a_worker_without_its_model_takes_no_work_and_one_that_loses_it_hands_the_phase_back(
    cluster: Cluster, sandbox_image: str
) -> None:
    port = free_port()
    llm = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "scripted-llm", "--scenarios", str(REPO / "ops" / "scenarios"),
         "--port", str(port)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        # "no model settings": the default model at an address nothing answers; its readiness check says so
        cluster.settings_env.update(ORCH_WORKER__CHECK_MODEL="true", ORCH_WORKER__READY_CHECK_S="1")
        cluster.start_worker("nomodel")
        # this one skips the model check, so it takes the job, then cannot reach the model mid-phase
        cluster.settings_env.update(ORCH_WORKER__CHECK_MODEL="false", ORCH_WORKER__STANDBY_S="600")
        cluster.start_worker("unlucky")
        ledger = cluster.ledger()
        wait_for(lambda: len(ledger.workers()) == 2, 60, "both workers to announce themselves")
        lacking = next(w for w in ledger.workers() if w["name"].startswith("nomodel@"))
        assert not lacking["ready"] and "model openai:gpt-4o-mini" in lacking["missing"][0]

        line = json.dumps({"goal": BRAND_GOAL, "model": "openai:brand-json", "job_id": "handed-back"})
        assert cluster.cli("submit", "-", stdin=line).returncode == 0
        wait_for(lambda: any(h["outcome"].startswith("given_back") for h in cluster.job("handed-back")["history"]),
                 120, "the phase to be handed back")
        job = cluster.job("handed-back")
        assert job["state"] == "queued" and "could not run plan" in job["reason"]
        unlucky = wait_for(lambda: [w for w in ledger.workers() if w["name"].startswith("unlucky@")
                                    and not w["ready"]], 30, "the unlucky worker to stand by")
        assert "standing by until" in unlucky[0]["missing"][0] and "cannot connect" in unlucky[0]["missing"][0]
        assert "not ready" in cluster.cli("jobs").stdout  # queued jobs: no ready worker, and why

        cluster.settings_env.update(
            ORCH_WORKER__CHECK_MODEL="true", ORCH_MODEL__NAME="openai:brand-json",
            OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1",
        )
        cluster.start_worker("healthy")
        job = wait_for(lambda: (j := cluster.job("handed-back"))["state"] == "done" and j, 90, "the job to end")
        assert job["worker"].startswith("healthy@") and job["attempts"] == 2
        assert not any(h["worker"].startswith("nomodel@") for h in job["history"])
    finally:
        llm.terminate()
        llm.wait(timeout=10)


@pytest.mark.docker
@pytest.mark.redis
def test_two_ledgers_sharing_an_output_root_and_a_cache_never_mix_files_or_evidence(
    cluster: Cluster, sandbox_image: str, tmp_path: Path
) -> None:
    other = Cluster(root=cluster.root, redis=RedisServer(tmp_path / "redis-2").start())
    try:
        cluster.start_worker("first")
        other.start_worker("second")
        ours = cluster.cli("submit", "-", "--wait", "--timeout", "200", stdin=goal_line("same-id"), timeout=260)
        assert ours.returncode == 0, ours.stderr
        theirs = other.cli("submit", "-", "--wait", "--timeout", "200", stdin=goal_line("same-id"), timeout=260)
        assert theirs.returncode == 1
        mine, refused = cluster.job("same-id"), other.job("same-id")
        assert mine["state"] == "done" and refused["state"] == "failed"
        assert "belongs to job 'same-id' of another ledger" in refused["reason"]
        assert mine["evidence_path"] != refused["evidence_path"]
        assert Path(mine["evidence_path"]).is_file() and Path(refused["evidence_path"]).is_file()
        assert json.loads(Path(mine["evidence_path"]).read_text())["status"] == "done"
    finally:
        other.stop_all()
        other.redis.stop()
