"""Following jobs rides out a Redis restart: ``submit --wait`` and ``jobs --watch`` say in one line that Redis went
away and in one that it is back, then go on; the exit code keeps its meaning (0: every job done).

Real Redis (a private server per test, stopped with SIGTERM and started again on its port with its append-only
file), a real Celery worker, the real CLI as a subprocess.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis
import yaml
from worker_helpers import BRAND_JSON, REPO, Cluster, goal_line, wait_for

OUTAGE_S = 4


def _slow_brand(tmp_path: Path) -> Path:
    data = yaml.safe_load(BRAND_JSON.read_text())
    data["delay_ms"] = 1500  # every reply takes 1.5 s: the job is still running when Redis goes away
    dest = tmp_path / "slow-brand.yaml"
    dest.write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


def _restart_redis(cluster: Cluster) -> None:
    cluster.redis.stop()  # SIGTERM, as a service manager restarts it
    time.sleep(OUTAGE_S)
    cluster.redis.start()


def _events(stderr: str) -> list[str]:
    return [json.loads(line).get("event", "") for line in stderr.splitlines() if line.startswith("{")]


def test_submit_wait_rides_out_a_redis_restart_and_keeps_its_exit_code(cluster: Cluster, tmp_path: Path) -> None:
    cluster.settings_env.update(ORCH_WORKER__HEARTBEAT_S="1", ORCH_WORKER__STALE_AFTER_S="30")
    cluster.start_worker("w1")
    goals = tmp_path / "goals.jsonl"
    goals.write_text(goal_line("outage-wait", model=f"scripted:{_slow_brand(tmp_path)}") + "\n")
    waiting = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "submit", str(goals), "--wait", "--json"],
        cwd=REPO, env=cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    ledger = cluster.ledger()
    wait_for(lambda: (r := ledger.get("outage-wait")) is not None and r.state != "queued", 120, "the job to start")
    _restart_redis(cluster)
    out, err = waiting.communicate(timeout=300)
    assert "Traceback" not in err, err[-3000:]
    assert waiting.returncode == 0, (out, err[-3000:], cluster.log("w1")[-3000:])
    events = _events(err)
    assert events.count("submit.redis_lost") == 1 and events.count("submit.redis_back") == 1, events
    report = json.loads(out)
    assert [(j["job_id"], j["state"]) for j in report["jobs"]] == [("outage-wait", "done")]
    assert report["timed_out"] is False


def test_jobs_watch_rides_out_a_redis_restart(cluster: Cluster) -> None:
    assert cluster.cli("submit", "-", stdin=goal_line("outage-watch")).returncode == 0  # no worker: it stays queued
    watching = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "jobs", "--watch"],
        cwd=REPO, env=cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    probe = redis.Redis.from_url(cluster.redis.url)
    wait_for(lambda: len(probe.client_list()) >= 2, 60, "the watch to read the ledger")  # its client and ours
    probe.close()
    time.sleep(1)
    _restart_redis(cluster)
    time.sleep(3)  # and read the ledger again since
    watching.send_signal(signal.SIGINT)
    out, err = watching.communicate(timeout=30)
    assert "Traceback" not in err, err[-3000:]
    assert watching.returncode == 0, err[-3000:]
    events = _events(err)
    assert events.count("jobs.redis_lost") == 1 and events.count("jobs.redis_back") == 1, events
    assert "outage-watch" in out
