"""Faults that lose no goal: a worker SIGKILLed mid-goal, Redis restarted with a batch queued, a batch of 50.

Real Redis (a private server per test), real Celery workers (subprocesses), real Docker.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from worker_helpers import BRAND_GOAL, BRAND_JSON, LABEL_PREFIX, REPO, Cluster, goal_line, wait_for

FAST_TAKEOVER = {
    "ORCH_WORKER__HEARTBEAT_S": "1",
    "ORCH_WORKER__STALE_AFTER_S": "6",
    "ORCH_WORKER__SWEEP_S": "1",
}


def _scenario_with_delay(src: Path, dest: Path, delay_ms: int) -> Path:
    data = yaml.safe_load(src.read_text())
    data["delay_ms"] = delay_ms
    dest.write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


def _job_containers(docker_client, job_id: str) -> list[str]:
    key = f"{LABEL_PREFIX}.job"
    found = docker_client.api.containers(all=True, filters={"label": key})  # one call: no inspect races
    labels = [(c.get("Labels") or {}).get(key, "") for c in found]
    return [v for v in labels if v == job_id or v.startswith(f"{job_id}-")]


def _states(cluster: Cluster, ids: list[str]) -> dict[str, str]:
    ledger = cluster.ledger()
    return {i: (r.state if (r := ledger.get(i)) else "missing") for i in ids}


@pytest.mark.docker
@pytest.mark.redis
def test_a_worker_killed_mid_goal_is_taken_over_and_leaves_no_container(
    cluster: Cluster, docker_client, sandbox_image: str, tmp_path: Path
) -> None:
    cluster.settings_env.update(FAST_TAKEOVER)
    scenario = _scenario_with_delay(REPO / "ops/scenarios/brand-deck.yaml", tmp_path / "deck.yaml", 1200)
    cluster.start_worker("doomed")
    line = json.dumps({"goal": "Make a 5-slide deck on Q3 results", "model": f"scripted:{scenario}", "job_id": "kill"})
    assert cluster.cli("submit", "-", stdin=line).returncode == 0
    ledger = cluster.ledger()

    def pptx_step_running() -> bool:
        rec = ledger.get("kill")
        running = rec is not None and rec.state == "acting" and rec.step == 1 and rec.running
        return running and bool(_job_containers(docker_client, "kill"))

    # step 1 (the pptx skill) is running and has its sandbox containers: kill the worker's whole process group
    wait_for(lambda: ledger.get("kill") and ledger.get("kill").next == "act:1", 300, "the pptx step to be next")
    cluster.start_worker("survivor")
    wait_for(pptx_step_running, 120, "the pptx step to run in its sandbox")
    assert ledger.get("kill").worker.startswith("doomed@")
    killed_at = time.monotonic()
    cluster.kill_worker("doomed")

    wait_for(lambda: _states(cluster, ["kill"])["kill"] in ("done", "unmet", "failed"), 180, "the job to end")
    recovered_s = time.monotonic() - killed_at
    job = cluster.job("kill")
    assert job["state"] == "done", (job["reason"], cluster.log("survivor"))
    assert recovered_s < 120
    assert job["attempts"] == 2
    takeovers = [h for h in job["history"] if h["outcome"] == "lost"]
    assert len(takeovers) == 1 and "doomed@" in takeovers[0]["reason"] and "during act:1" in takeovers[0]["reason"]
    lost = takeovers[0]  # the interrupted attempt, named after the worker that was lost, with its duration
    assert lost["worker"].startswith("doomed@") and lost["attempt"] == 1 and lost["end"] - lost["start"] > 0
    assert lost["taken_over_by"].startswith("survivor@")
    text = cluster.cli("jobs", "kill").stdout
    assert "act:1" in text and "on doomed@" in text and "→ lost" in text
    trace = cluster.cli("jobs", "kill", "--trace").stdout  # the lost attempt's spans sit under it, named
    assert "act:1 attempt 1 on doomed@" in trace and "lost (taken over by survivor@" in trace, trace
    runs = [(h["phase"], h["worker"].split("@")[0]) for h in job["history"] if h["outcome"] != "lost"]
    assert runs == [("plan", "doomed"), ("act:0", "doomed"), ("act:1", "survivor"), ("reflect", "survivor")]
    paths = [a["path"] for a in job["artifacts"]]
    assert len(paths) == len(set(paths)) and any(p.endswith(".pptx") for p in paths)
    assert _job_containers(docker_client, "kill") == []


@pytest.mark.redis
def test_a_redis_restart_with_a_batch_queued_loses_nothing(cluster: Cluster) -> None:
    cluster.settings_env.update(FAST_TAKEOVER)
    ids = [f"restart-{i}" for i in range(8)]
    done = cluster.cli("submit", "-", stdin="\n".join(goal_line(i) for i in ids))
    assert done.returncode == 0, done.stderr
    cluster.redis.stop()  # SIGTERM, as a service manager restarts it: the append-only file keeps the queue
    cluster.redis.start()
    assert set(_states(cluster, ids).values()) == {"queued"}
    cluster.start_worker("w1", concurrency=2)
    wait_for(lambda: set(_states(cluster, ids).values()) <= {"done", "unmet", "failed"}, 400, "the batch to end", 1)
    assert set(_states(cluster, ids).values()) == {"done"}, cluster.log("w1")[-3000:]
    for job_id in ids:
        job = cluster.job(job_id)
        committed = [h["phase"] for h in job["history"] if h["outcome"] not in ("lost", "lease_lost")]
        assert len(committed) == len(set(committed)), job["history"]  # no phase saved twice
        assert [a["path"] for a in job["artifacts"]] == ["brand.json"]
        assert (cluster.output_root / job_id / "brand.json").is_file()


@pytest.mark.redis
def test_a_batch_of_50_gives_50_results_none_lost_none_run_twice(cluster: Cluster) -> None:
    ids = [f"fifty-{i:02d}" for i in range(50)]
    cluster.start_worker("w1", concurrency=2)
    cluster.start_worker("w2", concurrency=2)
    done = cluster.cli(
        "submit", "-", "--wait", "--json", "--timeout", "600", stdin="\n".join(goal_line(i) for i in ids), timeout=650
    )
    report = json.loads(done.stdout)
    assert done.returncode == 0, (done.stderr, cluster.log("w1"))
    assert sorted(j["job_id"] for j in report["jobs"]) == ids
    assert {j["state"] for j in report["jobs"]} == {"done"}
    ledger = cluster.ledger()
    for job_id in ids:
        record = ledger.get(job_id)
        assert record.attempts == 1
        assert [h["phase"] for h in record.history] == ["plan", "act:0", "reflect"]
        assert [a["path"] for a in record.artifacts] == ["brand.json"]
        assert (cluster.output_root / job_id / "brand.json").is_file()
    assert {r.worker.split("@")[0] for r in map(ledger.get, ids)} == {"w1", "w2"}


SLEEPER = {
    "goal": "Write slept.txt after a long nap",
    "model": "scripted-demo",
    "steps": [
        {"purpose": "plan", "reply": {"content": json.dumps({
            "steps": [{"skill": "brand-guidelines", "why": "any skill will do", "expected": "slept.txt",
                       "outputs": [{"path": "slept.txt", "kind": "text"}]}],
            "evaluation": ["slept.txt exists"]})}},
        {"purpose": "act", "reply": {"tool_calls": [{"name": "write_artifact", "arguments": {
            "path": "sleep.py", "text": "import time\ntime.sleep(300)\nopen('build/slept.txt', 'w').write('z')\n"}}]}},
        {"purpose": "act", "reply": {"tool_calls": [{"name": "run_script", "arguments": {
            "path": "build/sleep.py", "timeout_s": 100}}]}},
        {"purpose": "act", "reply": {"tool_calls": [{"name": "finish", "arguments": {
            "summary": "slept", "outputs": ["build/slept.txt"]}}]}},
    ],
}


@pytest.mark.docker
@pytest.mark.redis
def test_on_the_soft_time_limit_the_jobs_containers_are_killed_and_the_job_fails_saying_so(
    cluster: Cluster, docker_client, sandbox_image: str, tmp_path: Path
) -> None:
    # act's soft limit = time budget (3 s) + one model call (2 s, no retry) + script timeout (1 s) + margin (3 s)
    cluster.settings_env.update(
        ORCH_MODEL__REQUEST_TIMEOUT_S="2", ORCH_MODEL__MAX_RETRIES="0", ORCH_WORKER__TIME_LIMIT_MARGIN_S="3"
    )
    scenario = tmp_path / "sleeper.yaml"
    scenario.write_text(yaml.safe_dump(SLEEPER, sort_keys=False))
    line = json.dumps({"goal": SLEEPER["goal"], "model": f"scripted:{scenario}", "job_id": "sleepy",
                       "budgets": {"time_budget_ms": 3000, "script_timeout_s": 1}})
    cluster.start_worker("w1")
    assert cluster.cli("submit", "-", stdin=line).returncode == 0
    ledger = cluster.ledger()

    wait_for(lambda: _job_containers(docker_client, "sleepy"), 120, "the script's container to run")
    started = time.monotonic()
    wait_for(lambda: _states(cluster, ["sleepy"])["sleepy"] in ("done", "unmet", "failed"), 60, "the job to end")
    assert time.monotonic() - started < 30  # the soft limit, not the 100 s script timeout, ended it
    record = ledger.get("sleepy")
    assert record.state == "failed", (record.reason, cluster.log("w1")[-3000:])
    assert "act:0 ran past its soft time limit" in record.reason and "container(s) of the job were killed" in (
        record.reason
    )
    assert record.result["error"]["where"] == "act:0"
    assert _job_containers(docker_client, "sleepy") == []
    assert not (cluster.output_root / "sleepy" / "slept.txt").exists()


@pytest.mark.docker
@pytest.mark.redis
def test_a_redis_restart_while_phases_run_loses_nothing_and_runs_nothing_twice(
    cluster: Cluster, docker_client, sandbox_image: str, tmp_path: Path
) -> None:
    # beats every second; a lease outlives the outage (a takeover would run a phase again)
    cluster.settings_env.update(ORCH_WORKER__HEARTBEAT_S="1", ORCH_WORKER__STALE_AFTER_S="20", ORCH_WORKER__SWEEP_S="1")
    brand = _scenario_with_delay(BRAND_JSON, tmp_path / "brand.yaml", 400)
    csv = _scenario_with_delay(REPO / "ops/scenarios/csv-summary.yaml", tmp_path / "csv.yaml", 400)
    sales = str(REPO / "ops/scenarios/data/sales.csv")
    lines = [goal_line(f"midway-b{i}", model=f"scripted:{brand}") for i in range(3)] + [
        json.dumps({"goal": "Summarise sales.csv: total revenue per region, with a bar chart of the totals",
                    "model": f"scripted:{csv}", "job_id": f"midway-c{i}", "inputs": [sales]})
        for i in range(3)
    ]
    ids = [json.loads(line)["job_id"] for line in lines]
    cluster.start_worker("w1", concurrency=2)
    cluster.start_worker("w2", concurrency=1)
    assert cluster.cli("submit", "-", stdin="\n".join(lines)).returncode == 0
    ledger = cluster.ledger()

    def running() -> list[str]:
        return [i for i in ids if (r := ledger.get(i)) is not None and r.running and r.state != "queued"]

    in_flight = wait_for(lambda: (r := running()) and len(r) >= 2 and r, 180, "two phases to run")
    cluster.redis.stop()  # SIGTERM, as a service manager restarts it, while those phases run
    time.sleep(5)  # long enough for running phases to finish (and save) while Redis is away
    cluster.redis.start()

    wait_for(lambda: set(_states(cluster, ids).values()) <= {"done", "unmet", "failed"}, 400, "the goals to end", 1)
    logs = cluster.log("w1")[-4000:] + cluster.log("w2")[-4000:]
    assert set(_states(cluster, ids).values()) == {"done"}, logs
    for job_id in ids:
        record = cluster.ledger().get(job_id)
        assert record.attempts == 1, (job_id, in_flight, record.history, logs)  # no phase was run again
        assert [h["phase"] for h in record.history] == ["plan", "act:0", "reflect"], (job_id, record.history)
        paths = [a["path"] for a in record.artifacts]
        assert len(paths) == len(set(paths)) and paths, paths
        assert all((cluster.output_root / job_id / p).is_file() for p in paths)
        assert _job_containers(docker_client, job_id) == []


@pytest.mark.redis
def test_a_phase_taken_over_plays_its_steps_again_on_the_shared_scripted_server(
    cluster: Cluster, tmp_path: Path
) -> None:
    from orchestrator.llm.scenario_server import ScenarioLibraryServer, load_library

    folder = tmp_path / "scenarios"
    folder.mkdir()
    _scenario_with_delay(BRAND_JSON, folder / "brand-json.yaml", 1500)
    with ScenarioLibraryServer(load_library(folder)) as server:  # as the compose stack's scripted-llm
        cluster.settings_env.update(FAST_TAKEOVER, OPENAI_BASE_URL=server.base_url)
        cluster.start_worker("doomed")
        line = json.dumps({"goal": BRAND_GOAL, "model": "openai:brand-json", "job_id": "shared"})
        assert cluster.cli("submit", "-", stdin=line).returncode == 0
        ledger = cluster.ledger()

        def mid_act() -> bool:
            record = ledger.get("shared")
            used = {p.session: p.steps_used for p in server.players}.get("shared", 0)
            return record is not None and record.state == "acting" and record.running and used >= 3

        wait_for(mid_act, 120, "the act phase to have used two of its steps")
        cluster.start_worker("survivor")
        cluster.kill_worker("doomed")
        wait_for(lambda: _states(cluster, ["shared"])["shared"] in ("done", "unmet", "failed"), 120, "the job to end")
        job = cluster.job("shared")
        assert job["state"] == "done", (job["reason"], server.failures, cluster.log("survivor")[-3000:])
        assert server.failures == []
    assert job["attempts"] == 2
    runs = [(h["phase"], h["worker"].split("@")[0]) for h in job["history"] if h["outcome"] != "lost"]
    assert runs == [("plan", "doomed"), ("act:0", "survivor"), ("reflect", "survivor")]
    assert json.loads((cluster.output_root / "shared" / "brand.json").read_text())["name"] == "Acme"
