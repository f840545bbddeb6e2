"""The producer side: JSONL goal lines, validated at the edge, stored in the ledger and queued for the workers.

A line is untrusted. Its ``skills`` names a library the operator registered (never a path); its ``inputs`` are read
here, on the producer's machine, and travel with the job through Redis (:mod:`orchestrator.worker.inputs`); its
``out`` may only be the job's own folder; its ``budgets`` stay within the operator's ceilings; a ``job_id`` that
exists with a different line is rejected (the identical line is an idempotent duplicate). A scripted model's
scenario path is made absolute (a test and demo facility: workers must see the scenario at the same path).
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable, Iterable

from pydantic import BaseModel, ValidationError

from orchestrator.config import Settings
from orchestrator.errors import ConfigError, OrchestratorError
from orchestrator.tracing import new_ids
from orchestrator.worker.blobs import BlobStore
from orchestrator.worker.indexes import add_to_batch, add_to_owner
from orchestrator.worker.inputs import InputRef, gather_inputs
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import RERUNNABLE, JobRecord, JobRequest
from orchestrator.worker.tenancy import (
    DEFAULT_LIBRARY,
    check_out,
    library_root,
    scenario_file,
)
from orchestrator.workflow import phases
from orchestrator.workflow.request import (
    JOB_ID_PATTERN,
    GoalRequest,
    budgeted,
    default_inputs,
    scenario_path,
)

MAX_LINE_BYTES = 1_000_000
MB = 1024 * 1024


class Checked(BaseModel):
    """A good line: its number, the request, and the bytes of its inputs (in ``request.inputs`` order)."""

    line: int
    request: JobRequest
    blobs: list[bytes] = []


class Rejected(BaseModel):
    line: int
    reason: str


class Accepted(BaseModel):
    line: int
    job_id: str
    duplicate: bool = False
    """The job id was submitted before with this very line: nothing new was queued (a job id runs once unless
    re-run explicitly)."""
    rerun: bool = False
    """``submit --rerun``: the job had ended failed, unmet or cancelled and runs again (its earlier runs kept)."""
    state: str | None = None
    """For a duplicate: the state of the job already there."""


class SubmitReport(BaseModel):
    batch: str = ""
    accepted: list[Accepted] = []
    rejected: list[Rejected] = []

    @property
    def queued(self) -> bool:
        """A job joined the batch (a duplicate line joins none): only then does ``jobs --batch`` know it."""
        return any(not a.duplicate for a in self.accepted)

    @property
    def exit_code(self) -> int:
        return 1 if self.rejected else 0


Enqueue = Callable[[JobRecord, str], None]
"""``enqueue(record, phase)`` sends the phase's task."""
InputReader = Callable[[list[str]], tuple[list[InputRef], list[bytes]]]
"""``read(names)`` → the refs and bytes of a line's inputs (the API: from the request's parts; ``submit``: files)."""
BATCH_PATTERN = JOB_ID_PATTERN  # a batch id names Redis keys like a job id


def new_batch_id() -> str:
    return "b" + time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def parse_lines(
    lines: Iterable[str], settings: Settings, read_inputs: InputReader | None = None
) -> tuple[list[Checked], list[Rejected]]:
    """Good lines (with their numbers and input bytes) and rejected ones with the reason; blank and ``#`` lines
    are skipped."""
    good: list[Checked] = []
    bad: list[Rejected] = []
    for number, text in enumerate(lines, 1):
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            line = _parse_line(stripped)
            request, blobs = resolve_line(line, settings, read_inputs)
            good.append(Checked(line=number, request=request, blobs=blobs))
        except OrchestratorError as e:
            bad.append(Rejected(line=number, reason=e.message))
    return good, bad


def _parse_line(text: str) -> GoalRequest:
    if len(text.encode("utf-8", errors="replace")) > MAX_LINE_BYTES:
        raise ConfigError(f"line is longer than {MAX_LINE_BYTES} bytes")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"not JSON: {e.msg} at column {e.colno}") from e
    if not isinstance(data, dict):
        raise ConfigError("a goal line must be a JSON object with at least a `goal`")
    try:
        return GoalRequest.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'line'}: {err['msg']}" for err in e.errors())
        raise ConfigError(problems) from e


def resolve_line(
    line: GoalRequest, settings: Settings, read_inputs: InputReader | None = None
) -> tuple[JobRequest, list[bytes]]:
    """The checked request and its inputs' bytes: a registered library, inputs read here (or by ``read_inputs``
    for the inputs a line names), the job's own ``out``, budgets within the ceilings, a scenario path made
    absolute."""
    library = line.skills or DEFAULT_LIBRARY
    library_root(settings, library)  # a registered name (its folder is the workers' business, not the producer's)
    model = line.model or settings.model.name
    wanted = [str(p) for p in line.inputs]
    if (scenario := scenario_path(model)) is not None:
        if not scenario.is_file():
            raise ConfigError(f"model: scenario file not found: {scenario}")
        model = f"scripted:{scenario_file(settings, str(scenario))}"
        if not wanted:  # as `run` does: a scenario may name the goal's input files (relative to itself)
            wanted = [str(p) for p in default_inputs(model)]
    check_out(line.out, line.job_id or None)
    budgeted(settings, line.budgets)  # within the ceilings, so within the broker's visibility timeout (time_limits.py)
    caps = settings.job_inputs
    if line.inputs and read_inputs is not None:
        refs, blobs = read_inputs(wanted)
    else:  # a scenario's own inputs lie in a scenario folder the operator registered
        refs, blobs = gather_inputs(
            wanted, file_max_bytes=int(caps.file_max_mb * MB), job_max_bytes=int(caps.job_max_mb * MB)
        )
    request = JobRequest(
        goal=line.goal, skills=library, model=model, job_id=line.job_id or None, inputs=refs,
        constraints=line.constraints, budgets=line.budgets, response=line.response,
    )
    return request, blobs


def submit_lines(
    lines: Iterable[str],
    settings: Settings,
    ledger: Ledger,
    enqueue: Enqueue,
    *,
    new_job_id: Callable[[], str],
    batch: str | None = None,
    rerun: bool = False,
    owner: str | None = None,
    read_inputs: InputReader | None = None,
    parsed: tuple[list[Checked], list[Rejected]] | None = None,
) -> SubmitReport:
    """Queue every good line under one batch id; rejected lines are reported with their numbers and reasons.

    A line's inputs are stored in Redis (by sha256, with an expiry) before its job exists. A job id that exists
    already is a duplicate when the stored request is this very one, and rejected otherwise; with ``rerun``, a
    job that ended ``failed``, ``unmet`` or ``cancelled`` runs again as the line now says, its earlier run kept.
    With ``owner`` (the API key's producer), each job records it, and a job id another producer holds is refused
    without a word about that job.
    """
    check_batch_id(batch)
    good, rejected = parsed if parsed is not None else parse_lines(lines, settings, read_inputs)
    report = SubmitReport(batch=batch or new_batch_id(), rejected=rejected)
    caps = settings.job_inputs
    blobs = BlobStore(ledger.r, max_bytes=int(caps.file_max_mb * MB), ttl_s=caps.ttl_s)
    stack = ledger.stack_id()
    for checked in good:
        job_id = checked.request.job_id or new_job_id()
        request = checked.request.model_copy(update={"job_id": job_id})
        for data in checked.blobs:
            blobs.put(data)
        record = new_record(job_id, request, batch=report.batch, stack=stack, owner=owner)
        if ledger.create(record):
            add_to_batch(ledger, report.batch, job_id, record.submitted_at)
            if owner is not None:
                add_to_owner(ledger, owner, job_id, record.submitted_at)
            enqueue(record, phases.token(phases.FIRST))
            report.accepted.append(Accepted(line=checked.line, job_id=job_id))
            continue
        existing = ledger.get(job_id)
        if existing is not None and owner is not None and existing.owner != owner:
            report.rejected.append(Rejected(line=checked.line, reason=f"job_id: {job_id} is taken: choose another id"))
            continue
        state: str | None = existing.state if existing else None
        if rerun and existing is not None and existing.state in RERUNNABLE:
            fresh = next_run(existing, request=record.request, batch=report.batch)
            outcome, state = ledger.rerun(fresh)
            if outcome == "queued":
                add_to_batch(ledger, report.batch, job_id, fresh.submitted_at)
                enqueue(fresh, phases.token(phases.FIRST))
                report.accepted.append(Accepted(line=checked.line, job_id=job_id, rerun=True))
                continue
        if existing is not None and existing.request == record.request:
            report.accepted.append(Accepted(line=checked.line, job_id=job_id, duplicate=True, state=state))
        else:
            hint = " or submit --rerun once it ended failed, unmet or cancelled" if not rerun else ""
            report.rejected.append(Rejected(
                line=checked.line,
                reason=f"job_id: {job_id} exists with a different goal line (a job id runs one goal line once; "
                f"choose another id{hint})",
            ))
    report.rejected.sort(key=lambda r: r.line)
    return report


def check_batch_id(batch: str | None) -> None:
    if batch is not None and not re.fullmatch(BATCH_PATTERN, batch):
        raise ConfigError(f"batch id {batch[:120]!r}: letters, digits, '.', '_' and '-' only, at most 100")


def new_record(
    job_id: str, request: JobRequest, *, batch: str | None, stack: str, owner: str | None = None
) -> JobRecord:
    trace_id, span_id = new_ids()
    return JobRecord(
        job_id=job_id,
        goal=request.goal,
        submitted_at=time.time(),
        trace_id=trace_id,
        span_id=span_id,
        request=request,
        out=job_id,
        batch=batch,
        stack=stack,
        owner=owner,
    )


def next_run(record: JobRecord, *, request: JobRequest | None = None, batch: str | None = None) -> JobRecord:
    """A fresh record for running an ended job again: same id, ``run`` + 1, nothing of the earlier run's state."""
    request = request if request is not None else record.request
    trace_id, span_id = new_ids()
    return JobRecord(
        job_id=record.job_id,
        goal=request.goal if request is not None else record.goal,
        submitted_at=time.time(),
        trace_id=trace_id,
        span_id=span_id,
        request=request,
        out=record.out,
        batch=batch or record.batch,
        stack=record.stack,
        owner=record.owner,
        run=record.run + 1,
    )
