"""A goal that ends on a worker keeps its evidence like `run` does: secrets masked in the ledger and the evidence
file, the job folder and the file readable by their owner only."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from orchestrator.config import load_settings
from orchestrator.errors import ModelError
from orchestrator.worker.bookkeeping import failed
from orchestrator.worker.records import JobRecord

SECRET_URL = "http://alice:s3cretpass@model.example/v1"


def test_a_failed_phase_keeps_secrets_out_of_the_ledger_and_its_evidence_is_owner_only(tmp_path: Path) -> None:
    settings = load_settings(cache_dir=tmp_path / "cache", output_root=tmp_path / "out")
    record = JobRecord(job_id="evidence-1", goal="report with key sk-abcdefghijklmnopqrst", out="evidence-1")
    error = ModelError(f"cannot connect to the model server at {SECRET_URL}", where="model:plan")
    outcome = failed(settings, record, None, error, "plan")
    kept = json.dumps(outcome.fields, default=str)
    assert "s3cretpass" not in kept and "sk-abcdefghijklmnopqrst" not in kept
    assert outcome.fields["reason"].startswith("cannot connect to the model server at http://***:***@model.example")
    evidence = Path(outcome.fields["result"]["evidence_path"])
    text = evidence.read_text()
    assert "s3cretpass" not in text and "sk-abcdefghijklmnopqrst" not in text
    assert stat.S_IMODE(evidence.stat().st_mode) == 0o600
    assert stat.S_IMODE(evidence.parent.stat().st_mode) == 0o700
    assert not list(evidence.parent.glob(".result-*"))  # no temporary file left behind
