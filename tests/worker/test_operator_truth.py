"""What operators and producers see of a batch, tried as they would: Celery's record of each phase tells the truth
(a failed job's last phase is a FAILURE with the reason, unmet is told apart from done), batches sum up with their
failures' reasons, an HTML report draws the timeline, and a job's files come back through the service.

Real Redis (a private server), a real Celery worker, real Docker; the HTML report is opened in headless Chromium.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from celery.result import AsyncResult
from worker_helpers import REPO, Cluster, goal_line

SCENARIOS = REPO / "tests" / "e2e" / "scenarios"
BROKEN_PLAN = {"goal": "Anything at all", "model": "scripted-demo",
               "steps": [{"purpose": "plan", "reply": {"content": "this is not a plan"}}] * 4}


@pytest.fixture(scope="module")
def batch(shared_cluster: Cluster) -> tuple[Cluster, dict]:
    broken = shared_cluster.root / "broken.yaml"  # inside the cluster's scenario_dirs
    broken.write_text(yaml.safe_dump(BROKEN_PLAN))
    no_fit = SCENARIOS / "no-fit.yaml"
    lines = [
        goal_line("truth-done"),
        json.dumps({"goal": "Anything at all", "model": f"scripted:{broken}", "job_id": "truth-failed"}),
        json.dumps({"goal": yaml.safe_load(no_fit.read_text())["goal"], "model": f"scripted:{no_fit}",
                    "job_id": "truth-unmet"}),
    ]
    done = shared_cluster.cli("submit", "-", "--wait", "--timeout", "300", "--json", "--batch", "truth-batch",
                              stdin="\n".join(lines), timeout=360)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["batch"] == "truth-batch", done.stderr
    assert not report["rejected"], report["rejected"]
    return shared_cluster, report


def _last_task(cluster: Cluster, job_id: str) -> AsyncResult:
    from orchestrator.config import load_settings
    from orchestrator.worker.celery_app import create_app

    app = create_app(load_settings(broker_url=cluster.redis.url))
    return AsyncResult(cluster.job(job_id)["task_id"], app=app)


def test_a_failed_jobs_last_phase_is_a_celery_failure_carrying_the_reason(batch: tuple[Cluster, dict]) -> None:
    cluster, report = batch
    states = {j["job_id"]: j["state"] for j in report["jobs"]}
    assert states == {"truth-done": "done", "truth-failed": "failed", "truth-unmet": "unmet"}, cluster.log("w1")
    failed = _last_task(cluster, "truth-failed")
    assert failed.state == "FAILURE"
    reason = cluster.job("truth-failed")["reason"]
    assert reason and reason in str(failed.result)
    assert type(failed.result).__name__ == "JobFailed"


def test_unmet_is_told_apart_from_done_and_each_phase_result_lists_its_progress(
    batch: tuple[Cluster, dict],
) -> None:
    cluster, _ = batch
    done, unmet = _last_task(cluster, "truth-done"), _last_task(cluster, "truth-unmet")
    assert done.state == unmet.state == "SUCCESS"
    assert done.result["job_state"] == "done" and unmet.result["job_state"] == "unmet"
    assert [u["what"] for u in unmet.result["unmet"]] == ["place a phone call", "sing a song in Klingon"]
    assert any(line.startswith("validate") or line.startswith("job.ended") for line in done.result["progress"])


def test_a_batch_sums_up_states_durations_and_each_failures_reason(batch: tuple[Cluster, dict]) -> None:
    cluster, _ = batch
    summary = json.loads(cluster.cli("jobs", "--batch", "truth-batch", "--json").stdout)
    assert summary["counts"] == {"done": 1, "failed": 1, "unmet": 1}
    assert summary["durations"]["ended"] == 3 and summary["durations"]["max_s"] > 0
    reasons = {f["job_id"]: f["reason"] for f in summary["failures"]}
    assert set(reasons) == {"truth-failed", "truth-unmet"}
    assert reasons["truth-failed"] == cluster.job("truth-failed")["reason"]
    assert "place a phone call" in reasons["truth-unmet"]
    assert reasons["truth-unmet"] == cluster.job("truth-unmet")["reason"]  # the ledger's own, as a failure has
    listing = cluster.cli("jobs", "--state", "unmet").stdout
    assert "place a phone call —" in listing and "sing a song in Klingon" in listing
    failed_only = json.loads(cluster.cli("jobs", "--state", "failed", "--json").stdout)
    assert [j["job_id"] for j in failed_only] == ["truth-failed"]
    text = cluster.cli("jobs", "--batch", "truth-batch").stdout
    assert reasons["truth-failed"] in text  # piped: the reason is printed whole, never cut at 80 columns


def test_jobs_id_says_where_the_files_and_the_evidence_are(batch: tuple[Cluster, dict]) -> None:
    cluster, _ = batch
    text = cluster.cli("jobs", "truth-done").stdout
    evidence = cluster.job("truth-done")["evidence_path"]
    assert f"output folder: {cluster.output_root / 'truth-done'}" in text
    assert f"evidence: {evidence}" in text and Path(evidence).is_file()


def test_download_brings_the_files_and_the_evidence_through_redis(
    batch: tuple[Cluster, dict], tmp_path: Path
) -> None:
    cluster, _ = batch
    dest = tmp_path / "fetched"
    done = cluster.cli("jobs", "truth-done", "--download", str(dest), "--json", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    job = cluster.job("truth-done")
    fetched = dest / "files" / "brand.json"
    assert hashlib.sha256(fetched.read_bytes()).hexdigest() == job["artifacts"][0]["sha256"]
    assert json.loads((dest / "evidence" / "result.json").read_text())["status"] == "done"


def test_the_batch_report_is_a_self_contained_page_with_a_timeline(
    batch: tuple[Cluster, dict], tmp_path: Path
) -> None:
    cluster, _ = batch
    page = tmp_path / "report.html"
    assert cluster.cli("jobs", "--batch", "truth-batch", "--report", str(page)).returncode == 0
    assert "<script src=" not in page.read_text()  # everything inline: it opens offline
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.fail("Debian's chromium is required to check the report (bash ops/setup.sh installs it)")
    dom = subprocess.run(
        [str(browser), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000", "--dump-dom",
         page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert "js-plotly-plot" in dom and "<svg" in dom  # plotly's JavaScript ran and drew the chart
    assert dom.count('class="job"') == 3
    reason = cluster.job("truth-failed")["reason"]
    assert 'data-job="truth-failed" data-state="failed"' in dom and reason[:60] in dom
    assert ">act:0<" in dom and ">reflect<" in dom  # a bar per phase, labelled with its phase
