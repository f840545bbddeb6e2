"""A finished job's files and evidence, read from where finished jobs keep them (no worker, no phase queue).

The output files come from the job's own folder under the output root (no links followed, within the export caps),
each checked against the sha256 the job recorded for it; the evidence comes from the ledger (the job's record, its
result and its earlier runs, masked). A job that has not ended has nothing to download yet.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import IO, Any

from orchestrator.api.access import ApiRefusal
from orchestrator.config import Settings
from orchestrator.logs import dumps_safe, mask_value
from orchestrator.worker.export import MAX_FILE_BYTES, read_job_files
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import TERMINAL, JobRecord
from orchestrator.worker.tenancy import own_out_dir

MANIFEST = "manifest.json"
SPOOL_BYTES = 16 * 1024 * 1024


def check_ended(record: JobRecord) -> None:
    if record.state not in TERMINAL:
        raise ApiRefusal(409, f"job {record.job_id} has not ended ({record.state}): its files can be downloaded "
                         "once it is done, unmet, failed or cancelled", state=record.state)


def safe_rel(rel: str) -> PurePosixPath | None:
    """``rel`` as a plain relative name (no ``..``, not absolute, no empty parts or control characters), else None."""
    path = PurePosixPath(rel)
    if not rel or path.is_absolute() or any(p in ("", ".", "..") or "\\" in p for p in path.parts):
        return None
    if any(ord(c) < 32 or ord(c) == 127 for c in rel):
        return None
    return path


def _recorded(record: JobRecord) -> dict[str, str]:
    return {str(a.get("path")): str(a.get("sha256")) for a in record.artifacts if a.get("sha256")}


def job_files(settings: Settings, record: JobRecord) -> tuple[list[tuple[str, bytes, str]], list[dict[str, str]]]:
    """``([(path, bytes, sha256)], skipped)`` of an ended job's output folder; a file whose bytes no longer match
    the sha256 the job recorded is skipped, saying so."""
    folder = own_out_dir(settings, record.job_id, record.out or None)
    recorded = _recorded(record)
    files: list[tuple[str, bytes, str]] = []
    skipped: list[dict[str, str]] = []
    for rel, data, reason in read_job_files(folder):
        if data is None:
            if rel != "." or record.artifacts:
                skipped.append({"path": rel, "reason": reason})
            continue
        digest = hashlib.sha256(data).hexdigest()
        if rel in recorded and recorded[rel] != digest:
            skipped.append({"path": rel, "reason": "changed since the job ended (its sha256 differs)"})
            continue
        files.append((rel, data, digest))
    return files, skipped


def one_file(settings: Settings, record: JobRecord, rel: str) -> tuple[bytes, str]:
    """The bytes and sha256 of one output file of an ended job (404 for anything that is not one)."""
    check_ended(record)
    wanted = safe_rel(rel)
    missing = ApiRefusal(404, f"no file {rel[:200]!r} in job {record.job_id}")
    if wanted is None:
        raise missing
    for path, data, digest in job_files(settings, record)[0]:
        if path == wanted.as_posix():
            return data, digest
    raise missing


def _evidence(ledger: Ledger, record: JobRecord) -> dict[str, str]:
    texts = {"evidence/job.json": dumps_safe(mask_value(record.model_dump(mode="json")))}
    if record.result is not None:
        texts["evidence/result.json"] = dumps_safe(record.result)
    for earlier in ledger.earlier_runs(record.job_id, record.run):
        texts[f"evidence/run-{earlier.run}.json"] = dumps_safe(mask_value(earlier.model_dump(mode="json")))
    return texts


def add_job(archive: zipfile.ZipFile, ledger: Ledger, settings: Settings, record: JobRecord, prefix: str = "") -> dict[
    str, Any
]:
    """Write one ended job into ``archive`` under ``prefix``: ``files/…``, ``evidence/…``; returns its manifest."""
    files, skipped = job_files(settings, record)
    listed = []
    for rel, data, digest in files:
        archive.writestr(f"{prefix}files/{rel}", data)
        listed.append({"path": rel, "size": len(data), "sha256": digest})
    evidence = _evidence(ledger, record)
    for name, text in evidence.items():
        archive.writestr(prefix + name, text)
    return {"job_id": record.job_id, "state": record.state, "files": listed, "skipped": skipped,
            "evidence": sorted(evidence)}


def job_archive(ledger: Ledger, settings: Settings, record: JobRecord) -> IO[bytes]:
    """A zip of one ended job: ``files/…``, ``evidence/…`` and ``manifest.json`` (each file's size and sha256)."""
    check_ended(record)
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - the response closes it
    with zipfile.ZipFile(spool, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        manifest = add_job(archive, ledger, settings, record)
        archive.writestr(MANIFEST, json.dumps(manifest, indent=2))
    spool.seek(0)
    return spool


def batch_archive(ledger: Ledger, settings: Settings, batch: str, records: list[JobRecord]) -> IO[bytes]:
    """A zip of a batch: ``<job id>/files/…`` and ``<job id>/evidence/…`` per ended job, and ``manifest.json``
    (per job its files, or that it has not ended)."""
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - the response closes it
    jobs: list[dict[str, Any]] = []
    with zipfile.ZipFile(spool, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for record in records:
            if record.state not in TERMINAL:
                jobs.append({"job_id": record.job_id, "state": record.state, "not_ended": True, "files": [],
                             "skipped": [], "evidence": []})
                continue
            jobs.append(add_job(archive, ledger, settings, record, prefix=f"{record.job_id}/"))
        archive.writestr(MANIFEST, json.dumps({"batch": batch, "jobs": jobs}, indent=2))
    spool.seek(0)
    return spool


def unpack_checked(source: IO[bytes], dest: Path, *, max_files: int, max_bytes: int) -> tuple[list[str], list[str]]:
    """Unpack an archive this API made into ``dest``, trusting nothing in it: every name a plain relative path
    inside ``dest``, every file within ``MAX_FILE_BYTES`` and its manifest's sha256, at most ``max_files`` files
    and ``max_bytes`` bytes in all. Returns ``(written names, problems)``."""
    written: list[str] = []
    problems: list[str] = []
    try:
        archive = zipfile.ZipFile(source)
    except zipfile.BadZipFile as e:
        return [], [f"the download is not a zip archive ({e})"]
    with archive:
        try:
            manifest = json.loads(archive.read(MANIFEST))
        except (KeyError, ValueError) as e:
            return [], [f"the download has no readable {MANIFEST} ({e})"]
        expected = _expected_hashes(manifest)
        total = 0
        root = dest.resolve()
        for info in archive.infolist():
            if info.is_dir() or info.filename == MANIFEST:
                continue
            rel = safe_rel(info.filename)
            target = dest.joinpath(*rel.parts) if rel is not None else None
            if target is None or not target.resolve().is_relative_to(root):
                problems.append(f"{info.filename[:200]!r}: unsafe name, not written")
                continue
            if len(written) >= max_files or info.file_size > MAX_FILE_BYTES or total + info.file_size > max_bytes:
                problems.append(f"{info.filename[:200]!r}: over the download's caps ({max_files} files, "
                                f"{max_bytes} bytes), not written")
                continue
            with archive.open(info) as member:
                data = member.read(MAX_FILE_BYTES + 1)
            total += len(data)
            want = expected.get(info.filename)
            if want is not None and hashlib.sha256(data).hexdigest() != want:
                problems.append(f"{info.filename[:200]!r}: sha256 differs from the manifest, not written")
                continue
            if want is None and "/files/" in f"/{info.filename}":
                problems.append(f"{info.filename[:200]!r}: not in the manifest, not written")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            written.append(info.filename)
        problems += _manifest_problems(manifest)
    return written, problems


def _jobs_of(manifest: Any) -> list[dict[str, Any]]:
    if isinstance(manifest, dict) and isinstance(manifest.get("jobs"), list):
        return [j for j in manifest["jobs"] if isinstance(j, dict)]
    return [manifest] if isinstance(manifest, dict) else []


def _expected_hashes(manifest: Any) -> dict[str, str]:
    batch = isinstance(manifest, dict) and "jobs" in manifest
    found = {}
    for job in _jobs_of(manifest):
        prefix = f"{job.get('job_id')}/" if batch else ""
        for item in job.get("files") or []:
            if isinstance(item, dict):
                found[f"{prefix}files/{item.get('path')}"] = str(item.get("sha256"))
    return found


def _manifest_problems(manifest: Any) -> list[str]:
    problems = []
    for job in _jobs_of(manifest):
        if job.get("not_ended"):
            problems.append(f"job {job.get('job_id')} has not ended ({job.get('state')}): not downloaded")
        for s in job.get("skipped") or []:
            if isinstance(s, dict):
                problems.append(f"{s.get('path')!r} not sent: {s.get('reason')}")
    return problems
