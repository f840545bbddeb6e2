"""The reaper: what a SIGKILLed process left behind is removed; what a live process owns is never touched."""

from __future__ import annotations

import subprocess
import sys
import time

from orchestrator.sandbox.docker import SandboxRunner

HOLD_A_JOB = """
import sys, time
from pathlib import Path
from orchestrator.config import SandboxSettings
from orchestrator.sandbox.docker import SandboxRunner
runner = SandboxRunner(SandboxSettings.model_validate_json(sys.argv[1]), work_dir=Path(sys.argv[3]),
                       reap_on_start=False)
job = runner.open_job(sys.argv[4], Path(sys.argv[2]))
assert job.run_script("ok.py").ok
job.wait_ready()
print("ready", flush=True)
time.sleep(600)
"""


def job_resources(docker_client, job: str) -> tuple[list[dict], list[dict]]:
    key = {"label": f"orchtest.job={job}"}
    containers = docker_client.api.containers(all=True, filters=key)
    volumes = docker_client.api.volumes(filters=key).get("Volumes") or []
    return containers, volumes


def test_a_killed_process_leaves_orphans_that_the_reaper_removes(
    runner: SandboxRunner, sandbox_settings, docker_client, make_skill, tmp_path
):
    skill = make_skill({"ok.py": "print('{}')"})
    job_name = f"killed-{time.time_ns()}"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOLD_A_JOB,
            sandbox_settings.model_dump_json(),
            str(skill),
            str(tmp_path / "w"),
            job_name,
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        assert any(line.strip() == b"ready" for line in holder.stdout)  # log lines may come first
        containers, volumes = job_resources(docker_client, job_name)
        assert len(containers) == 2 and len(volumes) == 2  # holder + the next call's container; build + skill
        runner.reap()
        after = job_resources(docker_client, job_name)
        assert sorted(c["Id"] for c in after[0]) == sorted(c["Id"] for c in containers)  # owner alive: untouched
        assert sorted(v["Name"] for v in after[1]) == sorted(v["Name"] for v in volumes)
    finally:
        holder.kill()
        holder.wait()
    # The pre-started container was waiting on stdin; the dead owner's connection closing ends it by itself.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = [c["State"] for c in job_resources(docker_client, job_name)[0] if "-holder" not in c["Names"][0]]
        if states and all(s != "running" for s in states):
            break
        time.sleep(0.2)
    assert states and all(s != "running" for s in states)
    assert runner.reap() >= 4
    assert job_resources(docker_client, job_name) == ([], [])


def _goal_containers(docker_client, goal: str) -> list[str]:
    found = docker_client.api.containers(all=True, filters={"label": f"orchtest.goal={goal}"})
    return sorted(c["Id"] for c in found)


def test_a_goals_clean_up_removes_exactly_its_own_containers_never_a_prefix_match(
    runner: SandboxRunner, docker_client, make_skill
):
    """Attack: job ``acme`` once killed ``acme-report``'s sandbox (and a job ``2026`` every default id's)."""
    from orchestrator.sandbox.reaper import remove_job_resources

    skill = make_skill({"ok.py": "print('{}')"})
    stamp = time.time_ns()
    target = f"acme{stamp}"
    others = [f"{target}-report", f"{target}-0", f"{target}.1", f"{target}_x", f"{target}-report-0"]
    jobs = {}
    try:
        for goal in [target, *others]:
            # each goal's step job is named the way the workflow names it (<goal>-<step>)
            jobs[goal] = runner.open_job(f"{goal}-0", skill, goal=goal)
            assert jobs[goal].run_script("ok.py").ok
        assert all(jobs[goal].holder in _goal_containers(docker_client, goal) for goal in jobs)
        assert remove_job_resources(docker_client, "orchtest", target) >= 1
        assert _goal_containers(docker_client, target) == []
        for goal in others:  # every look-alike id keeps its sandbox: its holder (and build/) and its next call
            assert jobs[goal].holder in _goal_containers(docker_client, goal), goal
            assert jobs[goal].run_script("ok.py").ok
        assert remove_job_resources(docker_client, "orchtest", f"{target}-") == 0  # a bare prefix matches nothing
    finally:
        for job in jobs.values():
            job.close()
