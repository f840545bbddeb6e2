"""Goals queued through the producer run on real Celery workers; the ledger tells operators what happened."""

from __future__ import annotations

import json

from worker_helpers import Cluster, goal_line, wait_for


def test_a_batch_runs_on_a_worker_and_the_ledger_holds_each_result(shared_cluster: Cluster) -> None:
    cluster = shared_cluster
    lines = "\n".join(
        [
            goal_line("batch-a"),
            '{"goal": ""}',
            goal_line("batch-b"),
            goal_line("batch-escape", out="../elsewhere"),
            "not json",
        ]
    )
    done = cluster.cli("submit", "-", "--wait", "--json", "--timeout", "150", stdin=lines, timeout=180)
    report = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr  # some lines were rejected
    assert [a["job_id"] for a in report["accepted"]] == ["batch-a", "batch-b"]
    rejected = {r["line"]: r["reason"] for r in report["rejected"]}
    assert set(rejected) == {2, 4, 5}
    assert "goal" in rejected[2] and "outside the output root" in rejected[4] and "not JSON" in rejected[5]
    assert [j["state"] for j in report["jobs"]] == ["done", "done"], cluster.log("w1")

    job = cluster.job("batch-a")
    assert {"job_id", "state", "attempts", "artifacts", "result"} <= job.keys()
    assert job["state"] == "done" and job["attempts"] == 1
    assert [a["path"] for a in job["artifacts"]] == ["brand.json"]
    assert (cluster.output_root / "batch-a" / "brand.json").is_file()
    assert json.loads((cluster.output_root / "batch-a" / "brand.json").read_text())["name"] == "Acme"
    assert job["result"]["status"] == "done"
    assert [h["phase"] for h in job["history"]] == ["plan", "act:0", "reflect"]
    assert job["worker"].startswith("w1@")
    assert job["skills"]["chosen"][0]["id"] == "brand-guidelines"
    assert len(job["skills"]["loaded"][0]["sha256"]) == 64
    assert {v["id"] for v in job["skills"]["available"]} >= {"brand-guidelines", "document-skills/pptx"}
    assert job["trace_id"] and len(job["trace_id"]) == 32


def test_a_job_id_submitted_twice_runs_once(shared_cluster: Cluster) -> None:
    cluster = shared_cluster
    first = cluster.cli("submit", "-", "--wait", "--json", "--timeout", "150", stdin=goal_line("twice"), timeout=180)
    assert first.returncode == 0, first.stderr
    again = cluster.cli("submit", "-", "--json", stdin=goal_line("twice"))
    assert again.returncode == 0
    assert json.loads(again.stdout)["accepted"] == [{"line": 1, "job_id": "twice", "duplicate": True}]
    job = wait_for(lambda: cluster.job("twice"), 10, "the job record")
    assert [h["phase"] for h in job["history"]] == ["plan", "act:0", "reflect"]


def test_jobs_trace_prints_the_goal_span_tree_from_the_ledger(shared_cluster: Cluster) -> None:
    cluster = shared_cluster
    done = cluster.cli("submit", "-", "--wait", "--timeout", "150", stdin=goal_line("traced"), timeout=180)
    assert done.returncode == 0, done.stderr
    trace = json.loads(cluster.cli("jobs", "traced", "--trace", "--json").stdout)
    spans = {s["span_id"]: s for s in trace["spans"]}
    goal = [s for s in spans.values() if s["name"] == "goal"]
    assert len(goal) == 1 and goal[0]["parent_id"] is None
    phases = [s for s in spans.values() if s["parent_id"] == goal[0]["span_id"]]
    assert sorted(s["name"] for s in phases) == ["act", "plan", "reflect"]
    models = [spans[s["parent_id"]]["name"] for s in spans.values() if s["name"] == "model"]
    # reflect's semantic verdict may be reused from an earlier job with identical artifacts (no model call)
    assert models.count("plan") == 1 and models.count("act") == 4 and models.count("reflect") <= 1
    text = cluster.cli("jobs", "traced", "--trace").stdout
    assert "goal" in text and "plan" in text and "act" in text
