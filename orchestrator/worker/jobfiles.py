"""A job's folders on a shared machine: its output folder (claimed per ledger), its evidence per run, and what a
cancelled job leaves behind."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from orchestrator.config import Settings
from orchestrator.errors import WorkflowError
from orchestrator.logs import mask_value
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import JobRecord
from orchestrator.worker.tenancy import STACK_PATTERN, Refused, own_out_dir
from orchestrator.workflow.evidence import write_evidence
from orchestrator.workflow.folders import evidence_folder, jobs_folder
from orchestrator.workflow.request import job_id_ok

OWNERS_DIR = ".orchestrator/owners"
"""Under the output root: which ledger and job own each job folder (``<out>.json``), so two stacks sharing an
output root never write into each other's folders. Kept beside the folders, not in them: those hold only results."""


def job_out_dir(settings: Settings, record: JobRecord) -> Path:
    """``<output root>/<job id>``, checked again here: the ledger is input too."""
    return own_out_dir(settings, record.job_id, record.out)


def evidence_dir(settings: Settings, record: JobRecord) -> Path:
    """``<cache>/jobs/<stack>/<job id>/run-<n>``: a re-run keeps the earlier runs' evidence, and two ledgers sharing
    a cache folder never write over each other's. A stack or job id altered in Redis never leads elsewhere: the
    evidence of such a job (its failure) goes under ``<cache>/jobs/altered/``."""
    root = jobs_folder(settings.cache_dir).resolve()
    stack = record.stack or "local"
    if not re.fullmatch(STACK_PATTERN, stack) and stack != "local":
        stack = "altered"
    job = record.job_id if job_id_ok(record.job_id) else "altered"
    folder = evidence_folder(settings.cache_dir.resolve(), stack, job, max(1, int(record.run)))
    if not folder.resolve().is_relative_to(root):
        raise Refused(f"evidence folder of {job} resolves outside {root}", where="evidence")
    return folder


def _owner_file(settings: Settings, folder: Path) -> Path:
    root = settings.output_root.resolve()
    return root / OWNERS_DIR / f"{folder.relative_to(root).as_posix()}.json"


def claim_output(settings: Settings, folder: Path, record: JobRecord) -> None:
    """Refuse an output folder that a job of another ledger wrote (same job id or ``out``, another stack)."""
    try:
        owner = json.loads(_owner_file(settings, folder).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    theirs = str(owner.get("ledger", "")) if isinstance(owner, dict) else ""
    if theirs and theirs != (record.stack or "local"):
        raise WorkflowError(
            f"output folder {folder} belongs to job {owner.get('job_id')!r} of another ledger ({theirs}); "
            f"this ledger is {record.stack or 'local'}",
            where="output",
            next_step="give each stack its own output root (ORCH_OUTPUT_ROOT), or another job id or out",
        )


def write_owner(settings: Settings, folder: Path, record: JobRecord) -> None:
    path = _owner_file(settings, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"ledger": record.stack or "local", "job_id": record.job_id}), encoding="utf-8")


def mark_cancelled(settings: Settings, ledger: Ledger, job_id: str) -> None:
    """A cancelled job's files stay where they are, listed in the ledger and its evidence as partial."""
    record = ledger.get(job_id)
    if record is None or record.state != "cancelled" or record.result is not None:
        return
    folder = job_out_dir(settings, record)
    artifacts = [
        {"path": p.relative_to(folder).as_posix(), "size": p.stat().st_size, "sha256": _file_hash(p), "partial": True}
        for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()
    ] if folder.is_dir() else []
    result: dict[str, Any] = {
        "job_id": job_id,
        "goal": record.goal,
        "status": "cancelled",
        "artifacts": artifacts,
        "out_dir": str(folder),
        "error": {"where": "cancel", "message": record.reason or "cancelled", "next_step": "jobs ID --rerun"},
    }
    result["evidence_path"] = write_evidence(evidence_dir(settings, record), result)
    ledger.update(job_id, result=mask_value(result), artifacts=artifacts)


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
