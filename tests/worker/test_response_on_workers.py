"""A goal line's ``response`` reaches the worker's judge: SCORED jobs end with each evaluation point's score and
the mean, SUMMARY jobs with the account of what was made, and ``jobs ID`` shows either, as ``run`` prints it.

Real worker processes and a private Redis; the model is the scripted server replaying the text-calls transcript
(its last ``semantic`` step is the scoring reply, asked for only by SCORED).
"""

from __future__ import annotations

import json

import pytest
from worker_helpers import REPO, Cluster

TRANSCRIPT = REPO / "tests" / "llm" / "transcripts" / "text-calls.yaml"
GOAL = "Give me our brand rules as a machine-readable brand.json"


@pytest.fixture(scope="module")
def jobs(shared_cluster: Cluster) -> Cluster:
    """Two jobs of the same goal, one per strategy, run once on the module's worker. The scored job plays its own
    copy of the transcript (another model name, in the cluster's scenario folder), so neither is answered from the
    other's replies in the shared response cache and both count every model call."""
    copy = shared_cluster.root / "text-calls-scored.yaml"
    copy.write_text(TRANSCRIPT.read_text().replace("model: qwen-like\n", "model: qwen-like-scored\n", 1))
    lines = "\n".join(
        json.dumps({"goal": GOAL, "model": f"scripted:{model}", "job_id": job_id, **extra})
        for job_id, model, extra in (("answered", TRANSCRIPT, {}), ("scored", copy, {"response": "SCORED"}))
    )
    done = shared_cluster.cli("submit", "-", "--wait", "--timeout", "400", "--json", stdin=lines, timeout=450)
    assert done.returncode == 0, (done.stdout, done.stderr, shared_cluster.log("w1"))
    return shared_cluster


def test_a_scored_goal_line_ends_with_a_score_per_evaluation_point_and_their_mean(jobs: Cluster) -> None:
    result = jobs.job("scored")["result"]
    assert result["status"] == "done" and result["response"] == "SCORED" and result["answer"] is None
    assert result["scores"] == [
        {"point": "brand.json follows the schema", "score": 1.0, "reason": "it validated"},
        {"point": "every brand colour is in brand.json", "score": 0.8,
         "reason": "the preview shows four of the five colours"},
    ]
    assert result["score"] == 0.9
    summary = jobs.job("answered")["result"]
    assert summary["response"] == "SUMMARY" and summary["scores"] == [] and summary["score"] is None
    assert summary["answer"].startswith("Made brand.json (")
    # the scoring reply is one more model call, counted like run counts it
    assert result["metrics"]["model_calls"] == summary["metrics"]["model_calls"] + 1
    assert result["metrics"]["response_cache_hits"] == summary["metrics"]["response_cache_hits"] == 0


def test_jobs_id_shows_the_scores_or_the_answer_as_run_prints_them(jobs: Cluster) -> None:
    scored = jobs.cli("jobs", "scored")
    assert scored.returncode == 0, scored.stderr
    assert "1.00  brand.json follows the schema — it validated" in scored.stdout
    assert "0.80  every brand colour is in brand.json" in scored.stdout
    assert "score: 0.90" in scored.stdout
    answered = jobs.cli("jobs", "answered")
    assert "answer: Made brand.json (" in answered.stdout and "score:" not in answered.stdout
    assert "\nbrand-guidelines: brand.json written and valid\n" in answered.stdout  # its lines, not a "\\n"
