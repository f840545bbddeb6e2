"""A goal submitted again to real workers is answered from the response cache, phase after phase, and ends done.

The worker keeps its scripted model server between goals and opens a model client per phase; the only thing a
phase hands on is the conversation's cursor in the goal's saved state, which counts the turns the cache answered.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from worker_helpers import BRAND_GOAL, BRAND_JSON, REPO, Cluster, goal_line

WAIT = ("--wait", "--timeout", "400")


def _submit(cluster: Cluster, job_id: str) -> dict:
    done = cluster.cli("submit", "-", *WAIT, "--json", stdin=goal_line(job_id), timeout=450)
    assert done.returncode == 0, done.stderr + cluster.log("w1")
    return cluster.job(job_id)


def test_the_same_goal_submitted_twice_is_answered_from_the_cache_the_second_time(cluster: Cluster) -> None:
    cluster.start_worker("w1")
    first = _submit(cluster, "cache-first")
    again = _submit(cluster, "cache-again")

    for job in (first, again):
        assert job["state"] == "done" and job["result"]["status"] == "done", cluster.log("w1")
        assert [h["phase"] for h in job["history"]] == ["plan", "act:0", "reflect"]
        brand = cluster.output_root / job["job_id"] / "brand.json"
        assert json.loads(brand.read_text())["name"] == "Acme"
    before, after = first["result"]["metrics"], again["result"]["metrics"]
    assert before["response_cache_hits"] == 0 and before["model_calls"] > 0
    assert after["response_cache_hits"] >= 5  # the plan and the four Act turns (the verdict may be the memo's)
    assert after["model_calls"] == 0 and after["tokens_in"] == 0
    assert "scenario_mismatch" not in cluster.log("w1")


def _with_provider_cache(src: Path, dest: Path) -> Path:
    """The scenario with every reply saying the provider served 800 of its 1000 prompt tokens from its cache."""
    data = yaml.safe_load(src.read_text())
    for step in data["steps"]:
        step["reply"]["usage"] = {"prompt_tokens": 1000, "completion_tokens": 10, "cached_tokens": 800}
    dest.write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


def test_provider_prompt_cache_hits_are_in_a_workers_metrics_as_in_runs(cluster: Cluster) -> None:
    scenario = _with_provider_cache(BRAND_JSON, cluster.root / "provider-cache.yaml")
    cluster.start_worker("w1")
    line = json.dumps({"goal": BRAND_GOAL, "model": f"scripted:{scenario}", "job_id": "provider-cache"})
    done = cluster.cli("submit", "-", *WAIT, "--json", stdin=line, timeout=450)
    assert done.returncode == 0, done.stderr + cluster.log("w1")
    by_worker = cluster.job("provider-cache")["result"]["metrics"]
    ran = cluster.cli("run", BRAND_GOAL, "--skills", str(REPO / "skills"), "--out", str(cluster.root / "run-out"),
                      "--model", f"scripted:{scenario}", "--no-memo", "--json")
    assert ran.returncode == 0, ran.stderr
    by_run = json.loads(ran.stdout)["metrics"]

    for metrics in (by_worker, by_run):
        assert metrics["cached_tokens"] >= 800 * 6  # plan, four Act turns and the semantic check
        assert metrics["cached_tokens"] * 1000 == metrics["tokens_in"] * 800
    assert by_worker["cached_tokens"] == by_run["cached_tokens"]
