"""Goals queued through the producer run on real Celery workers; the ledger tells operators what happened."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from worker_helpers import REPO, Cluster, goal_line, wait_for

WAIT = ("--wait", "--timeout", "400")


@pytest.fixture(scope="module")
def batch(shared_cluster: Cluster) -> tuple[Cluster, int, dict]:
    """One batch with good and bad lines, run once on the module's worker; the tests below inspect it."""
    lines = "\n".join(
        [
            goal_line("batch-a"),
            '{"goal": ""}',
            goal_line("batch-b"),
            goal_line("batch-escape", out="../elsewhere"),
            "not json",
        ]
    )
    done = shared_cluster.cli("submit", "-", *WAIT, "--json", stdin=lines, timeout=450)
    return shared_cluster, done.returncode, json.loads(done.stdout)


def test_a_batch_runs_on_a_worker_and_the_ledger_holds_each_result(batch: tuple[Cluster, int, dict]) -> None:
    cluster, returncode, report = batch
    assert returncode == 1  # some lines were rejected
    assert [a["job_id"] for a in report["accepted"]] == ["batch-a", "batch-b"]
    rejected = {r["line"]: r["reason"] for r in report["rejected"]}
    assert set(rejected) == {2, 4, 5}
    assert "goal" in rejected[2] and "its own folder" in rejected[4] and "not JSON" in rejected[5]
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


def test_a_job_id_submitted_twice_runs_once(batch: tuple[Cluster, int, dict]) -> None:
    cluster = batch[0]
    again = cluster.cli("submit", "-", *WAIT, "--json", stdin=goal_line("batch-a"))
    assert again.returncode == 0
    accepted = json.loads(again.stdout)["accepted"]
    assert [(a["line"], a["job_id"], a["duplicate"], a["rerun"], a["state"]) for a in accepted] == [
        (1, "batch-a", True, False, "done")
    ]
    assert [h["phase"] for h in cluster.job("batch-a")["history"]] == ["plan", "act:0", "reflect"]


def test_the_wait_summary_says_where_each_jobs_files_are(batch: tuple[Cluster, int, dict]) -> None:
    cluster = batch[0]
    again = cluster.cli("submit", "-", *WAIT, stdin=goal_line("batch-a"))
    assert again.returncode == 0, again.stderr
    assert "output folder" in again.stdout and str(cluster.output_root / "batch-a") in again.stdout
    assert f"files: in each job's output folder under {cluster.output_root}" in again.stdout
    assert "no job queued: no batch was made (every job was submitted before)" in again.stderr


def test_a_submit_whose_every_line_is_rejected_names_no_batch(shared_cluster: Cluster) -> None:
    lines = '{"goal": ""}\nnot json\n'
    text = shared_cluster.cli("submit", "-", stdin=lines)
    assert text.returncode == 1
    assert "line 1 rejected" in text.stderr and "line 2 rejected" in text.stderr
    assert "jobs --batch" not in text.stderr and "no job queued" in text.stderr
    as_json = shared_cluster.cli("submit", "-", "--json", stdin=lines)
    report = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and report["batch"] is None and report["accepted"] == []
    assert [r["line"] for r in report["rejected"]] == [1, 2]


def test_jobs_trace_prints_the_goal_span_tree_from_the_ledger(batch: tuple[Cluster, int, dict]) -> None:
    cluster = batch[0]
    trace = json.loads(cluster.cli("jobs", "batch-a", "--trace", "--json").stdout)
    spans = {s["span_id"]: s for s in trace["spans"]}
    goal = [s for s in spans.values() if s["name"] == "goal"]
    assert len(goal) == 1 and goal[0]["parent_id"] is None
    phases = [s for s in spans.values() if s["parent_id"] == goal[0]["span_id"]]
    assert sorted(s["name"] for s in phases) == ["act", "plan", "reflect"]
    models = [spans[s["parent_id"]]["name"] for s in spans.values() if s["name"] == "model"]
    # reflect's semantic verdict may be reused from an earlier job with identical artifacts (no model call)
    assert models.count("plan") == 1 and models.count("act") == 4 and models.count("reflect") <= 1
    text = cluster.cli("jobs", "batch-a", "--trace").stdout
    assert "goal" in text and "plan" in text and "act" in text


def _with_hostile_tool_call(src: Path, dest: Path) -> Path:
    """The scenario with a tool name full of console markup sent along with the act's first tool call."""
    data = yaml.safe_load(src.read_text())
    act = next(s for s in data["steps"] if s["purpose"] == "act")
    act["reply"]["tool_calls"].insert(0, {"name": "[/oops][bold]no_such_tool", "arguments": {}})
    data["inputs"] = [str(src.parent / entry) for entry in data.get("inputs", [])]  # the copy lives elsewhere
    dest.write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


@pytest.mark.docker
def test_each_tool_call_and_each_container_is_a_span_under_its_act(
    shared_cluster: Cluster, sandbox_image: str, tmp_path: Path
) -> None:
    cluster = shared_cluster
    # in the cluster's folder: the workers read scenarios only from their scenario folders (scenario_dirs)
    scenario = _with_hostile_tool_call(REPO / "ops/scenarios/csv-summary.yaml", cluster.root / "traced-csv.yaml")
    line = json.dumps({
        "goal": "Summarise sales.csv: total revenue per region, with a bar chart of the totals",
        "model": f"scripted:{scenario}", "job_id": "traced-csv",  # sales.csv: the scenario's own `inputs`
    })
    done = cluster.cli("submit", "-", *WAIT, stdin=line, timeout=450)
    assert done.returncode == 0 and cluster.job("traced-csv")["state"] == "done", (done.stdout, cluster.log("w1"))

    trace = json.loads(cluster.cli("jobs", "traced-csv", "--trace", "--json").stdout)
    spans = {s["span_id"]: s for s in trace["spans"]}
    act = next(s for s in spans.values() if s["name"] == "act")
    tools = sorted((s for s in spans.values() if s["name"] == "tool"), key=lambda s: s["start"])
    assert [t["attributes"]["orch.tool"] for t in tools] == ["[/oops][bold]no_such_tool", "run_script", "finish"]
    assert {t["parent_id"] for t in tools} == {act["span_id"]}
    unknown, script, _finish = (t["attributes"] for t in tools)
    assert unknown["orch.ok"] is False and "unknown tool" in unknown["orch.error"]
    assert script["orch.ok"] is True and script["orch.skill_id"] == "data/csv-summary" and script["orch.step"] == 1

    containers = [s for s in spans.values() if s["name"] == "container"]
    assert len(containers) == 1 and containers[0]["parent_id"] == tools[1]["span_id"]
    box = containers[0]["attributes"]
    assert box["orch.script"] == "scripts/summarize.py" and box["orch.exit_code"] == 0 and box["orch.ok"] is True
    assert box["orch.container"] and box["orch.duration_ms"] > 0 and "orch.violation" not in box
    assert tools[1]["start"] <= containers[0]["start"] <= containers[0]["end"] <= tools[1]["end"]

    text = cluster.cli("jobs", "traced-csv", "--trace")
    assert text.returncode == 0, text.stderr
    assert "[/oops][bold]no_such_tool" in text.stdout and "container" in text.stdout  # printed literally


def test_every_log_line_of_a_job_carries_its_trace_id(batch: tuple[Cluster, int, dict]) -> None:
    cluster = batch[0]
    trace_id = cluster.job("batch-b")["trace_id"]
    lines = [json.loads(x) for x in cluster.log("w1").splitlines() if x.startswith("{") and '"batch-b"' in x]
    events = {line["event"] for line in lines}
    assert {"plan.started", "plan.done", "act.started", "act.done", "validate.done"} <= events
    assert {line.get("trace_id") for line in lines} == {trace_id}


def test_spans_are_exported_over_otlp_when_the_standard_variables_are_set(cluster: Cluster) -> None:
    received: list[bytes] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            received.append(self.path.encode() + b" " + self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cluster.settings_env.update(
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}", OTEL_BSP_SCHEDULE_DELAY="200"
        )
        cluster.start_worker("w1")
        done = cluster.cli("submit", "-", *WAIT, stdin=goal_line("exported"), timeout=450)
        assert done.returncode == 0, done.stderr
        trace_id = bytes.fromhex(cluster.job("exported")["trace_id"])
        wait_for(lambda: any(b"/v1/traces " in r and trace_id in r and b"goal" in r for r in received), 30, "spans")
        assert any(trace_id in r and b"orch.tool" in r and b"read_ref" in r for r in received)  # the tool spans too
    finally:
        server.shutdown()


def test_submit_says_when_redis_cannot_be_reached(shared_cluster: Cluster) -> None:
    cluster = shared_cluster
    cluster.settings_env["ORCH_BROKER_URL"] = "redis://127.0.0.1:9/0"
    try:
        done = cluster.cli("submit", "-", "--json", stdin=goal_line("nowhere"))
    finally:
        del cluster.settings_env["ORCH_BROKER_URL"]
    assert done.returncode == 2
    error = json.loads(done.stdout)
    assert "cannot reach Redis" in error["message"] and "ORCH_BROKER_URL" in error["next_step"]


def test_jobs_lists_the_ledger_and_refuses_an_unknown_id(batch: tuple[Cluster, int, dict]) -> None:
    cluster = batch[0]
    listing = json.loads(cluster.cli("jobs", "--json").stdout)
    entry = next(j for j in listing if j["job_id"] == "batch-b")
    assert entry["state"] == "done" and entry["artifacts"] == ["brand.json"]
    table = cluster.cli("jobs").stdout
    assert "batch-b" in table and "done" in table
    unknown = cluster.cli("jobs", "no-such-job", "--json")
    assert unknown.returncode == 2 and "no job" in json.loads(unknown.stdout)["message"]


def test_a_redelivered_task_of_a_finished_step_does_nothing(batch: tuple[Cluster, int, dict]) -> None:
    from orchestrator.config import load_settings
    from orchestrator.worker.celery_app import create_app

    cluster = batch[0]
    before = cluster.job("batch-b")
    producer = create_app(load_settings(broker_url=cluster.redis.url))
    results = [
        producer.send_task("orchestrator.plan", args=["batch-b"]),
        producer.send_task("orchestrator.act", args=["batch-b"], kwargs={"step": 0}),
        producer.send_task("orchestrator.reflect", args=["batch-b"]),
    ]
    assert [r.get(timeout=60)["outcome"] for r in results] == ["stale", "stale", "stale"]
    after = cluster.job("batch-b")
    assert after["history"] == before["history"] and after["result"] == before["result"]
