"""Choosing skills on the distributed path (real Redis, a real Celery worker): a goal no skill serves ends unmet
with suggestions, and Reflect queues a retry as the step's act phase and a re-plan as a plan phase of its own,
whose new plan's steps are queued as act phases, each phase queuing the next."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from worker_helpers import REPO, Cluster

SCENARIOS = REPO / "tests" / "e2e" / "scenarios"
WAIT = ("--wait", "--timeout", "300")


def _line(job_id: str, scenario: str) -> str:
    path = SCENARIOS / scenario
    goal = yaml.safe_load(path.read_text())["goal"]
    return json.dumps({"goal": goal, "model": f"scripted:{path}", "job_id": job_id})


@pytest.fixture(scope="module")
def jobs(shared_cluster: Cluster) -> Cluster:
    lines = "\n".join(
        [
            _line("select-no-fit", "no-fit.yaml"),
            _line("select-replan", "replan.yaml"),
            _line("select-replan-tail", "replan-tail.yaml"),
        ]
    )
    done = shared_cluster.cli("submit", "-", *WAIT, "--json", stdin=lines, timeout=360)
    report = json.loads(done.stdout)
    accepted = [a["job_id"] for a in report["accepted"]]
    assert accepted == ["select-no-fit", "select-replan", "select-replan-tail"], done.stderr
    return shared_cluster


def test_a_goal_no_skill_serves_ends_unmet_with_suggestions_and_no_artifacts(jobs: Cluster) -> None:
    job = jobs.job("select-no-fit")
    assert job["state"] == "unmet", jobs.log("w1")
    assert [h["phase"] for h in job["history"]] == ["plan", "reflect"]
    assert job["plan"] == [] and job["artifacts"] == []
    result = job["result"]
    assert result["status"] == "unmet" and len(result["suggestions"]) == 3
    assert [u["what"] for u in result["unmet"]] == ["place a phone call", "sing a song in Klingon"]
    ids = ", ".join(s["id"] for s in result["suggestions"])
    assert all(ids in u["next_step"] for u in result["unmet"])
    out = jobs.output_root / "select-no-fit"
    assert not out.exists() or list(out.iterdir()) == []


def test_a_re_plan_is_queued_as_new_act_phases_and_the_job_ends_done(jobs: Cluster) -> None:
    job = jobs.job("select-replan")
    assert job["state"] == "done", (job.get("reason"), jobs.log("w1"))
    # the first reflect queued the step's retry, the second the re-plan; the new plan's step ran as its own act phase
    assert [h["phase"] for h in job["history"]] == [
        "plan", "act:0", "reflect", "act:0", "reflect", "plan:0", "act:0", "reflect"
    ]
    assert job["plan"] == ["data/csv-summary"] and job["steps_total"] == 1
    assert [v["id"] for v in job["skills"]["chosen"]] == ["data/csv-summary"]
    assert sorted(a["path"] for a in job["artifacts"]) == ["chart.png", "summary.json"]
    result = job["result"]
    assert result["plan_calls"] == 2
    assert [(r["skill"], r["steps"], r["outcome"]) for r in result["replans"]] == [
        ("meeting-notes", ["data/csv-summary"], "re-planned")
    ]
    summary = Path(jobs.output_root / "select-replan" / "summary.json")
    assert "North" in summary.read_text()


def test_a_re_plan_keeps_the_done_steps_and_queues_the_replaced_one_at_its_index(jobs: Cluster) -> None:
    job = jobs.job("select-replan-tail")
    assert job["state"] == "done", (job.get("reason"), jobs.log("w1"))
    assert [h["phase"] for h in job["history"]] == [
        "plan", "act:0", "act:1", "reflect", "act:1", "reflect", "plan:1", "act:1", "reflect"
    ]
    assert job["plan"] == ["brand-guidelines", "data/csv-summary"] and job["steps_total"] == 2
    assert sorted(a["path"] for a in job["artifacts"]) == ["brand.json", "chart.png", "summary.json"]
    [replan] = job["result"]["replans"]
    assert (replan["step"], replan["skill"], replan["steps"]) == (1, "meeting-notes", ["data/csv-summary"])
    assert [(s["skill_id"], s["status"]) for s in job["result"]["skills"]] == [
        ("brand-guidelines", "done"), ("data/csv-summary", "done")
    ]
