"""Attacks on a real worker through what it reads from Redis, and inputs that travel with the job.

Someone who reaches Redis rewrites a job's record or its saved state (checkpoint) and queues a phase again: the
worker re-checks what it reads, fails the job with the reason and writes nothing outside. And a producer whose
input file the worker cannot see (another machine, another folder) still gets its job done: the bytes travel.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from worker_helpers import REPO, Cluster, goal_line, wait_for

from orchestrator.config import load_settings
from orchestrator.worker.celery_app import create_app, phase_task

CSV_SCENARIO = REPO / "ops" / "scenarios" / "csv-summary.yaml"
WAIT = ("--wait", "--timeout", "300")


def _requeue(cluster: Cluster, job_id: str, phase: str, **fields: object) -> dict:
    """Rewrite the job's record as an intruder in Redis would, queue ``phase`` again and wait for the job to end."""
    ledger = cluster.ledger()
    ledger.update(job_id, next=phase, state="queued", running=False, finished_at=None, **fields)
    name, kwargs = phase_task(phase)
    create_app(load_settings(broker_url=cluster.redis.url)).send_task(name, args=[job_id], kwargs=kwargs)
    return wait_for(lambda: (j := cluster.job(job_id))["state"] in ("done", "unmet", "failed") and j, 120,
                    f"job {job_id} to end after {phase} was queued again")


@pytest.fixture(scope="module")
def done_job(shared_cluster: Cluster) -> Cluster:
    lines = "\n".join(goal_line(f"owned-{n}") for n in range(4))
    done = shared_cluster.cli("submit", "-", *WAIT, "--json", stdin=lines, timeout=360)
    assert done.returncode == 0, done.stdout + done.stderr
    return shared_cluster


def test_a_checkpoint_rewritten_to_write_elsewhere_fails_the_job_and_writes_nothing_outside(
    done_job: Cluster, tmp_path: Path
) -> None:
    ledger = done_job.ledger()
    target = tmp_path / "dot-ssh"
    target.mkdir()
    checkpoint = ledger.load_checkpoint("owned-0").model_dump(mode="json")
    checkpoint["state"]["out_dir"] = str(target)
    ledger.r.set("orch:checkpoint:owned-0", json.dumps(checkpoint))
    job = _requeue(done_job, "owned-0", "act:0")
    assert job["state"] == "failed" and "altered" in job["reason"] and "output folder" in job["reason"]
    assert list(target.iterdir()) == []


def test_a_checkpoint_naming_a_host_file_as_input_or_another_work_folder_fails_the_job(done_job: Cluster) -> None:
    ledger = done_job.ledger()
    checkpoint = ledger.load_checkpoint("owned-1").model_dump(mode="json")
    checkpoint["state"]["request"]["inputs"] = ["/etc/passwd"]
    checkpoint["state"]["work_dir"] = str(done_job.root / "cache" / "jobs" / "owned-2")
    ledger.r.set("orch:checkpoint:owned-1", json.dumps(checkpoint))
    job = _requeue(done_job, "owned-1", "act:0")
    assert job["state"] == "failed" and "/etc/passwd" in job["reason"] and "work folder" in job["reason"]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"skills": "/tmp"}, "not a registered library"),
        ({"budgets": {"disk_write_limit_mb": 1_000_000}}, "over the ceiling"),
        ({"inputs": [{"name": "environ", "size": 1, "sha256": "0" * 64}]}, "no longer in Redis"),
        ({"model": "scripted:/proc/1/environ"}, "not a .yaml file in a scenario folder"),
    ],
)
def test_a_record_rewritten_in_redis_is_refused_again_by_the_worker(
    done_job: Cluster, change: dict, reason: str
) -> None:
    record = done_job.ledger().get("owned-3")
    assert record is not None and record.request is not None
    # undo the other cases' changes
    clean = {**record.request.model_dump(mode="json"), "skills": "default", "budgets": {}, "inputs": []}
    job = _requeue(done_job, "owned-3", "plan", request={**clean, **change})
    assert job["state"] == "failed" and reason in job["reason"]


def test_an_out_rewritten_to_another_jobs_folder_is_refused(done_job: Cluster) -> None:
    before = sorted(p.name for p in (done_job.output_root / "owned-2").iterdir())
    record = done_job.ledger().get("owned-3")
    assert record is not None and record.request is not None
    clean = {**record.request.model_dump(mode="json"), "skills": "default", "budgets": {}, "inputs": []}
    job = _requeue(done_job, "owned-3", "plan", out="owned-2", request=clean)
    assert job["state"] == "failed" and "not the job's own" in job["reason"]
    assert sorted(p.name for p in (done_job.output_root / "owned-2").iterdir()) == before


def test_inputs_reach_a_worker_that_cannot_see_the_producers_folder(cluster: Cluster, tmp_path: Path) -> None:
    """The producer's file is gone (another machine) before any worker runs; the producer's own settings point at
    other folders than the worker's. The job still sees the file's bytes as /inputs/sales.csv."""
    mine = tmp_path / "producer-only" / "sales.csv"
    mine.parent.mkdir()
    shutil.copy(REPO / "ops" / "scenarios" / "data" / "sales.csv", mine)
    goal = {"goal": "Summarise sales.csv: total revenue per region, with a bar chart of the totals",
            "model": f"scripted:{CSV_SCENARIO}", "job_id": "carried", "inputs": [str(mine)]}
    worker_env = dict(cluster.settings_env)
    cluster.settings_env.update(ORCH_CACHE_DIR=str(tmp_path / "producer-cache"),
                                ORCH_OUTPUT_ROOT=str(tmp_path / "producer-out"))
    submitted = cluster.cli("submit", "-", "--json", stdin=json.dumps(goal))
    assert submitted.returncode == 0, submitted.stderr
    shutil.rmtree(mine.parent)
    cluster.settings_env.clear()
    cluster.settings_env.update(worker_env)
    cluster.start_worker("w1")
    job = wait_for(lambda: (j := cluster.job("carried"))["state"] in ("done", "unmet", "failed") and j, 300,
                   "the job with a carried input")
    assert job["state"] == "done", job.get("reason") or cluster.log("w1")[-3000:]
    assert (cluster.output_root / "carried" / "summary.json").is_file()
    received = cluster.root / "cache" / "jobs" / "carried" / "received" / "sales.csv"
    assert received.read_bytes() == (REPO / "ops" / "scenarios" / "data" / "sales.csv").read_bytes()


def test_a_line_naming_a_registered_library_runs_its_skills(cluster: Cluster, tmp_path: Path) -> None:
    """The operator registers a library by name on producer and worker; a line names it, never its folder."""
    library = tmp_path / "acme-skills"
    shutil.copytree(REPO / "skills", library)
    cluster.settings_env["ORCH_LIBRARIES"] = json.dumps({"acme": str(library)})
    cluster.start_worker("w1")
    done = cluster.cli("submit", "-", *WAIT, "--json", stdin=goal_line("acme-1", skills="acme"), timeout=360)
    assert done.returncode == 0, done.stdout + done.stderr
    job = cluster.job("acme-1")
    assert job["state"] == "done" and job["request"]["skills"] == "acme"
    chosen = job["skills"]["chosen"][0]
    assert chosen["id"] == "brand-guidelines" and len(chosen["sha256"]) == 64
    refused = cluster.cli("submit", "-", "--json", stdin=goal_line("acme-2", skills=str(library)))
    assert refused.returncode == 1 and "not a registered library" in refused.stdout
