"""``jobs`` through the producers' API (``ORCH_API_URL`` + ``ORCH_API_KEY``), and batch control on either path.

The API answers with the same views the ledger path prints (:mod:`orchestrator.api.views`), so the output and the
exit codes are the same; only the caller's own jobs exist for it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from orchestrator.api.views import batch_view
from orchestrator.cli.common import emit_json, notice
from orchestrator.cli.ledger_access import console, literal
from orchestrator.config import Settings
from orchestrator.errors import ConfigError
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import TERMINAL, JobRecord

if TYPE_CHECKING:
    from orchestrator.api.client import ApiClient

EXIT_REFUSED = 1
URL_ENV = "ORCH_API_URL"
KEY_ENV = "ORCH_API_KEY"


def api_client() -> ApiClient | None:
    """The API client when ``ORCH_API_URL`` and ``ORCH_API_KEY`` are set (the producer's path), else None."""
    if not (os.environ.get(URL_ENV, "").strip() and os.environ.get(KEY_ENV, "").strip()):
        return None
    # Deferred: httpx loads only when a producer's command goes through the API.
    from orchestrator.api.client import from_environment

    return from_environment()


def remote_ledger(client: ApiClient) -> Ledger:
    """The API as the ledger reads of ``jobs`` and ``submit --wait`` see it (duck-typed: those reads only)."""
    # Deferred: httpx loads only when a producer's command goes through the API.
    from orchestrator.api.client import RemoteLedger

    return cast(Ledger, RemoteLedger(client))


def print_outcome(kind: str, outcome: dict[str, Any], *, as_json: bool) -> int:
    """A cancel's or re-run's answer, as ``jobs ID --cancel|--rerun`` prints it on either path."""
    job_id, previous = outcome.get("job_id"), outcome.get("previous_state")
    if as_json:
        emit_json({k: v for k, v in outcome.items() if v is not None})
    elif kind == "cancel" and outcome.get("outcome") == "cancelled":
        notice("jobs.cancelled", f"job {job_id} cancelled (it was {previous}); its files are kept and marked "
               f"partial; jobs {job_id} --rerun runs it again")
    elif kind == "cancel":
        notice("jobs.cancel_refused", f"job {job_id} already ended {previous}: nothing to cancel", level="warning")
    elif outcome.get("outcome") == "queued":
        notice("jobs.rerun", f"job {job_id} queued again (run {outcome.get('run')}; the run before ended {previous} "
               "and is kept)")
    else:
        notice("jobs.rerun_refused", str(outcome.get("reason") or f"job {job_id} not re-run: {previous}"),
               level="warning")
    return 0 if outcome.get("outcome") in ("cancelled", "queued") else EXIT_REFUSED


def print_download(job_id: str, dest: Path, written: list[str], problems: list[str], *, as_json: bool) -> int:
    names = [n.removeprefix("files/") for n in written if n.startswith("files/")]
    evidence = dest / "evidence"
    report = {"job_id": job_id, "dest": str(dest), "files": names, "evidence": str(evidence), "problems": problems}
    if as_json:
        emit_json(report)
    else:
        notice("jobs.download", f"job {job_id}: {len(names)} file(s) in {dest / 'files'}, evidence in {evidence}"
               + (f"; problems: {'; '.join(problems)}" if problems else ""), level="warning" if problems else "info")
    return EXIT_REFUSED if problems else 0


def download_via_api(client: ApiClient, job_id: str, dest: Path, *, as_json: bool) -> int:
    """``jobs ID --download DIR`` through the API: the zip checked and unpacked here, within the caps."""
    # Deferred: httpx loads only when a producer's command goes through the API.
    from orchestrator.api.client import ApiAnswer

    try:
        written, problems = client.download(f"/v1/jobs/{job_id}/files", dest)
    except ApiAnswer as e:
        written, problems = [], [e.message]
    return print_download(job_id, dest, written, problems, as_json=as_json)


class BatchDoor:
    """Batch control on one path: the ledger (an operator) or the API (a producer)."""

    def __init__(self, settings: Settings, *, ledger: Ledger | None = None, client: ApiClient | None = None) -> None:
        self.settings, self.ledger, self.client = settings, ledger, client

    def records(self, batch: str) -> list[JobRecord]:
        if self.client is not None:
            return [JobRecord.model_validate({**v, "state": v.get("ledger_state", v.get("state"))})
                    for v in self.client.jobs(limit=self.settings.api.list_max, batch=batch)]
        assert self.ledger is not None
        # Deferred: the batch index is read only for a batch.
        from orchestrator.worker.indexes import batch_ids

        return [r for i in batch_ids(self.ledger, batch) if (r := self.ledger.get(i)) is not None]

    def act(self, kind: str, batch: str) -> list[dict[str, Any]]:
        """Cancel the batch's jobs that have not ended, or run its failed and unmet ones again."""
        if self.client is not None:
            return [dict(o) for o in self.client.control(f"/v1/batches/{batch}/{kind}")[1].get("jobs", [])]
        assert self.ledger is not None
        # Deferred: the Celery app reads its settings when built; only the commands that send need it.
        from orchestrator.worker import control
        from orchestrator.worker.celery_app import create_app

        app = create_app(self.settings)
        records = self.records(batch)
        if kind == "cancel":
            done = [control.cancel(self.ledger, app, r.job_id) for r in records if r.state not in TERMINAL]
        else:
            done = [control.rerun(self.ledger, self.settings, app, r) for r in records
                    if r.state in control.BATCH_RERUNNABLE]
        return [o.model_dump(mode="json") for o in done]

    def download(self, batch: str, dest: Path) -> tuple[list[str], list[str]]:
        if self.client is not None:
            return self.client.download(f"/v1/batches/{batch}/files", dest)
        assert self.ledger is not None
        # Deferred: reading job folders loads the evidence writer's imports; only a download needs them.
        from orchestrator.api import files
        from orchestrator.worker.export import MAX_FILES, MAX_TOTAL_BYTES

        with tempfile.TemporaryFile() as spool:
            archive = files.batch_archive(self.ledger, self.settings, batch, self.records(batch))
            with archive:
                while chunk := archive.read(1 << 20):
                    spool.write(chunk)
            spool.seek(0)
            dest.mkdir(parents=True, exist_ok=True)
            return files.unpack_checked(spool, dest, max_files=MAX_FILES * 10, max_bytes=MAX_TOTAL_BYTES * 10)

    def view(self, batch: str, records: list[JobRecord], report: str | None) -> dict[str, Any]:
        return batch_view(self.settings, batch, records, report)


def batch_control(door: BatchDoor, batch: str, *, cancel: bool, rerun: bool, download: Path | None,
                  as_json: bool) -> int:
    """``jobs --batch B --cancel|--rerun|--download DIR`` (the same on both paths)."""
    if download is not None:
        written, problems = door.download(batch, download)
        if as_json:
            emit_json({"batch": batch, "dest": str(download), "files": written, "problems": problems})
        else:
            notice("jobs.batch_download", f"batch {batch}: {len(written)} file(s) in {download}"
                   + (f"; problems: {'; '.join(problems)}" if problems else ""),
                   level="warning" if problems else "info")
        return EXIT_REFUSED if problems else 0
    kind = "cancel" if cancel else "rerun"
    outcomes = door.act(kind, batch)
    if as_json:
        emit_json({"batch": batch, "jobs": outcomes})
        return 0
    out = console(stderr=True)
    for o in outcomes:
        out.print(literal(f"job {o.get('job_id')}: {o.get('outcome')} (was {o.get('previous_state')})"),
                  highlight=False)
    what = "cancelled (its jobs that had not ended)" if cancel else "queued again (its failed and unmet jobs)"
    changed = sum(1 for o in outcomes if o.get("outcome") in ("cancelled", "queued"))
    notice(f"jobs.batch_{kind}", f"batch {batch}: {changed} job(s) {what}")
    return 0


def check_batch_exists(door: BatchDoor, batch: str) -> list[JobRecord]:
    records = door.records(batch)
    if not records:
        raise ConfigError(f"no batch {batch!r} in the ledger", where="jobs",
                          next_step="submit prints its batch id; or list jobs with `jobs`")
    return records
