"""``jobs ID --download DIR``: an ended job's files and evidence. Read from the output root when this machine sees
it (no worker, no phase queue), else brought through Redis by a worker (no shared folder). A job that has not ended
has nothing to download yet.

``DIR/files/…`` holds the job's output files (checked against their sha256), ``DIR/evidence/result.json`` the
masked result the ledger keeps (``run-N.json`` for earlier runs) and ``DIR/evidence/job.json`` the ledger record.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from orchestrator.cli.common import emit_json, notice
from orchestrator.cli.remote import print_download
from orchestrator.config import Settings
from orchestrator.errors import OrchestratorError
from orchestrator.logs import dumps_safe, mask_value
from orchestrator.worker.blobs import BlobStore
from orchestrator.worker.export import BLOB_TTL_S, MAX_FILE_BYTES, MAX_FILES, MAX_TOTAL_BYTES
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import TERMINAL, JobRecord
from orchestrator.worker.tenancy import own_out_dir

EXIT_INCOMPLETE = 1
WAIT_S = 120.0


def download(ledger: Ledger, settings: Settings, job_id: str, dest: Path, *, as_json: bool) -> int:
    # Deferred: the Celery app module reads the settings when imported; only this command needs it.
    from orchestrator.worker.celery_app import create_app

    record = ledger.get(job_id)
    assert record is not None
    if record.state not in TERMINAL:
        return print_download(job_id, dest, [], [f"job {job_id} has not ended ({record.state}): its files can be "
                                                 "downloaded once it is done, unmet, failed or cancelled"],
                              as_json=as_json)
    if _visible_here(settings, record):
        # Deferred: reading job folders loads the evidence writer's imports; only a download needs them.
        from orchestrator.api import files

        with files.job_archive(ledger, settings, record) as archive:
            names, missing = files.unpack_checked(archive, dest, max_files=MAX_FILES + 10, max_bytes=MAX_TOTAL_BYTES)
        return print_download(job_id, dest, names, missing, as_json=as_json)
    app = create_app(settings)
    problems: list[str] = []
    manifest: dict[str, Any] = {"files": [], "skipped": []}
    try:
        manifest = app.send_task("orchestrator.export", args=[job_id], argsrepr=f"job={job_id}").get(
            timeout=WAIT_S, disable_sync_subtasks=False
        )
    except Exception as e:  # noqa: BLE001 - a timeout or a worker error: the evidence still comes from the ledger
        problems.append(f"no worker sent the files within {WAIT_S:g} s ({type(e).__name__}: {e}); "
                        f"is a worker running? (jobs shows it)")
    blobs = BlobStore(ledger.r, max_bytes=MAX_FILE_BYTES, ttl_s=BLOB_TTL_S)
    files_dir = dest / "files"
    written = []
    for item in manifest.get("files", []):
        target = _inside(files_dir, str(item.get("path", "")))
        data = _fetch(blobs, str(item.get("sha256", "")))
        if target is None or data is None:
            problems.append(f"{item.get('path')!r}: " + ("unsafe name" if target is None else "missing or corrupt"))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written.append(item["path"])
    problems += [f"{s.get('path')!r} not sent: {s.get('reason')}" for s in manifest.get("skipped", [])]
    evidence = dest / "evidence"
    evidence.mkdir(parents=True, exist_ok=True)
    (evidence / "job.json").write_text(dumps_safe(mask_value(record.model_dump(mode="json"))), encoding="utf-8")
    if record.result is not None:
        (evidence / "result.json").write_text(dumps_safe(record.result), encoding="utf-8")
    for earlier in ledger.earlier_runs(job_id, record.run):
        (evidence / f"run-{earlier.run}.json").write_text(
            dumps_safe(mask_value(earlier.model_dump(mode="json"))), encoding="utf-8"
        )
    report = {"job_id": job_id, "dest": str(dest), "files": written, "evidence": str(evidence), "problems": problems}
    if as_json:
        emit_json(report)
    else:
        notice("jobs.download", f"job {job_id}: {len(written)} file(s) in {files_dir}, evidence in {evidence}"
               + (f"; problems: {'; '.join(problems)}" if problems else ""), level="warning" if problems else "info")
    return EXIT_INCOMPLETE if problems else 0


def _visible_here(settings: Settings, record: JobRecord) -> bool:
    try:
        return own_out_dir(settings, record.job_id, record.out or None).is_dir()
    except OrchestratorError:  # an altered record: the worker's export refuses it too
        return False


def _fetch(blobs: BlobStore, sha256: str) -> bytes | None:
    try:
        return blobs.get(sha256)
    except OrchestratorError:  # not a sha256: the manifest came from a worker, but is checked like any input
        return None


def _inside(root: Path, rel: str) -> Path | None:
    """``root/rel`` for a plain relative name (no ``..``, not absolute, no empty or odd parts), else None."""
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or any(p in ("", ".", "..") or "\\" in p for p in parts):
        return None
    if any(ord(c) < 32 for c in rel):
        return None
    target = root.joinpath(*parts)
    return target if target.resolve().is_relative_to(root.resolve()) else None


