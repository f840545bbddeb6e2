"""Defence in depth: whoever gets write access to Redis cannot steer a worker. Hostile values are written into a job
record directly (a real Redis), then the worker's phase code reads it: the job fails saying which field was altered,
and nothing is written outside the output root and the cache's job folders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from worker_helpers import BRAND_GOAL, BRAND_JSON, REPO, RedisServer

from orchestrator.config import load_settings
from orchestrator.errors import WorkflowError
from orchestrator.worker.jobfiles import evidence_dir
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.phases import PhaseContext, run_phase
from orchestrator.worker.submit import submit_lines
from orchestrator.worker.tenancy import record_problems

HOSTILE: list[tuple[str, Any]] = [
    ("stack", "/tmp/attacker"),
    ("stack", "../../../../tmp/attacker"),
    ("stack", "abc123\n"),
    ("owner", "alice\n"),
    ("owner", "../bob"),
    ("batch", "b1\n"),
    ("batch", "../../x"),
    ("out", "../other-job"),
    ("out", "/etc"),
    ("job_id", "job-1\n"),
    ("job_id", "../../escape"),
]


@pytest.fixture
def ledger_env(tmp_path: Path) -> Any:
    server = RedisServer(tmp_path / "redis").start()
    settings = load_settings(None, broker_url=server.url, output_root=tmp_path / "out", cache_dir=tmp_path / "cache",
                             skills_dir=REPO / "skills", scenario_dirs=[REPO])
    yield Ledger.from_url(server.url), settings, tmp_path
    server.stop()


def _submit(ledger: Ledger, settings: Any, job_id: str) -> None:
    line = json.dumps({"goal": BRAND_GOAL, "model": f"scripted:{BRAND_JSON}", "job_id": job_id})
    report = submit_lines([line], settings, ledger, lambda record, phase: None, new_job_id=lambda: "x", owner="alice")
    assert [a.job_id for a in report.accepted] == [job_id], report


def _files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(("field", "value"), HOSTILE)
def test_a_hostile_value_written_into_redis_fails_the_job_and_writes_nothing_outside(
    ledger_env: Any, field: str, value: Any
) -> None:
    ledger, settings, tmp_path = ledger_env
    _submit(ledger, settings, "job-1")
    ledger.r.hset("orch:job:job-1", field, json.dumps(value))  # as anyone with write access to Redis could
    before = _files_under(tmp_path) - _files_under(tmp_path / "redis")
    context = PhaseContext(settings=settings, ledger=ledger, worker="w-test", enqueue=lambda r, p, **_: None,
                           runtimes=None)  # type: ignore[arg-type]  # refused before any runtime is opened
    assert run_phase(context, "job-1", "plan") == "ok"
    record = ledger.get("job-1")
    assert record.state == "failed"
    assert "altered" in record.reason, record.reason
    if field != "job_id":  # an altered id field is answered as before: the folder is not the job's own
        assert field in record.reason
    written = _files_under(tmp_path) - _files_under(tmp_path / "redis") - before
    jobs = (tmp_path / "cache" / "jobs").resolve()
    assert written and all(p.resolve().is_relative_to(jobs) for p in written), written
    assert not Path("/tmp/attacker").exists()


def test_every_hostile_value_is_named_and_a_clean_record_has_no_problems(ledger_env: Any) -> None:
    ledger, settings, _ = ledger_env
    _submit(ledger, settings, "job-2")
    clean = ledger.get("job-2")
    assert record_problems(clean) == [] and clean.owner == "alice"
    for field, value in HOSTILE:
        assert record_problems(clean.model_copy(update={field: value})), (field, value)
    assert record_problems(clean.model_copy(update={"run": 0}))
    altered = evidence_dir(settings, clean.model_copy(update={"stack": "/tmp/attacker"}))
    assert altered.is_relative_to((settings.cache_dir / "jobs").resolve()) and "altered" in altered.parts


def test_an_altered_ledger_identity_is_refused_at_submit(ledger_env: Any) -> None:
    ledger, settings, _ = ledger_env
    ledger.r.set("orch:stack", "/tmp/attacker")
    with pytest.raises(WorkflowError, match="orch:stack"):
        _submit(ledger, settings, "job-3")
    assert ledger.get("job-3") is None


def test_the_batch_report_escapes_every_label_a_hostile_record_carries(tmp_path: Path) -> None:
    from orchestrator.cli.batch_report import write_report
    from orchestrator.worker.records import JobRecord
    from orchestrator.worker.views import batch_report

    settings = load_settings(None, output_root=tmp_path / "out", cache_dir=tmp_path / "cache")
    evil = '<img src=x onerror="alert(1)">'
    record = JobRecord(
        job_id=f"j{evil}", goal=evil, state="failed", submitted_at=1.0, started_at=1.0, finished_at=3.0,
        reason=evil, worker=evil, batch=evil,
        history=[{"phase": f"plan{evil}", "worker": evil, "attempt": 1, "start": 1.0, "end": 2.0, "outcome": evil}],
    )
    page = tmp_path / "report.html"
    write_report(page, evil, [record], batch_report([record], settings), settings)
    text = page.read_text()
    assert "<img" not in text and 'onerror="alert' not in text  # in the page and in the chart's data alike
    assert "&lt;img" in text
    # The chart's row labels too: plotly reads a subset of HTML in them (links, styles), so they are escaped.
    assert '"y":["j&lt;img' in text and '"y":["j\\u003cimg' not in text
