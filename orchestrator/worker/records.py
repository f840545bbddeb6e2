"""A job's record in the ledger (``orch:job:<id>``, a hash of one JSON value per field, so writers of different
fields never overwrite each other) and the index of all jobs (``orch:jobs``).

Every write of a record goes through :meth:`JobRecords.write`: the plain field writes here, the producer's
transitions (create, cancel, re-run) here, and the transitions of a phase's run (leases.py), each a Lua script whose
``KEYS[1]`` is the record. Nothing else names the record's key.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from redis.commands.core import Script

from orchestrator.worker.history import History, history_key
from orchestrator.worker.inputs import InputRef
from orchestrator.worker.store import PREFIX, field_args, text
from orchestrator.worker.tenancy import DEFAULT_LIBRARY
from orchestrator.workflow import phases
from orchestrator.workflow.phases import PhaseKind
from orchestrator.workflow.request import BudgetOverrides
from orchestrator.workflow.versions import SkillsUsed

JobState = Literal["queued", "planning", "acting", "reflecting", "done", "unmet", "failed", "cancelled"]
"""What the ledger stores. ``stalled`` is never stored: it is how a running job whose heartbeat stopped is shown."""
TERMINAL: frozenset[str] = frozenset({"done", "unmet", "failed", "cancelled"})
RERUNNABLE: frozenset[str] = frozenset({"failed", "unmet", "cancelled"})
JOBS = f"{PREFIX}:jobs"
"""Every job id, scored by submission time."""

_RUNNING_STATES: dict[PhaseKind, JobState] = {
    PhaseKind.PLAN: "planning", PhaseKind.ACT: "acting", PhaseKind.REFLECT: "reflecting"
}


def phase_state(token: str) -> JobState:
    """The ledger state of a job while the phase ``token`` names runs."""
    return _RUNNING_STATES[phases.parse(token).kind]


class JobRequest(BaseModel):
    """A goal line as the ledger keeps it, once checked: a library name, inputs by hash, budgets within ceilings."""

    model_config = ConfigDict(extra="forbid")

    goal: str
    skills: str = DEFAULT_LIBRARY
    model: str
    job_id: str | None = None
    inputs: list[InputRef] = []
    constraints: list[str] = []
    budgets: BudgetOverrides = BudgetOverrides()
    out: None = None
    """Always the job's own folder (``<output root>/<job id>``); kept for the shape of a goal line."""
    response: Literal["SUMMARY", "SCORED"] | None = None


class JobRecord(BaseModel):
    """One job as the ledger holds it (``jobs ID --json``)."""

    job_id: str
    goal: str
    state: JobState = "queued"
    next: str = phases.token(phases.FIRST)
    """The phase to run next (``plan``, ``act:N``, ``reflect``, ``end``); a task of any other phase is stale."""
    step: int | None = None
    steps_total: int | None = None
    plan: list[str] = []
    """The plan's skill ids, in step order."""
    skill: str | None = None
    attempts: int = 0
    running: bool = False
    worker: str | None = None
    heartbeat: float | None = None
    phase_started: float | None = None
    """When the running (or last) phase's attempt took its lease: a lost attempt's history entry starts there."""
    submitted_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    timings: dict[str, float] = {}
    """Wall seconds per phase (``plan``, ``act:0``, …), and ``model`` / ``scripts`` seconds inside them."""
    skills: SkillsUsed = SkillsUsed()
    artifacts: list[dict[str, Any]] = []
    result: dict[str, Any] | None = None
    reason: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    """The goal span's id: every phase span is its child; the span itself is emitted when the job ends."""
    request: JobRequest | None = None
    """The checked goal line the job runs (``None`` only for a record made without one)."""
    out: str = ""
    """The job's output folder, relative to the output root."""
    history: list[dict[str, Any]] = Field(default_factory=list)
    """Phase runs in order: ``{"phase", "worker", "attempt", "start", "end", "outcome"}``."""
    batch: str | None = None
    """The ``submit`` that queued the job (``submit --batch B``, or an id made up per submit)."""
    run: int = 1
    """1 for the first run; each explicit re-run (``jobs ID --rerun``, ``submit --rerun``) adds one."""
    task_id: str | None = None
    """The Celery task id of the phase sent last (``jobs ID --cancel`` revokes it)."""
    stack: str = ""
    """The ledger's identity (``Ledger.stack_id``): evidence folders carry it, so two ledgers never share one."""
    owner: str | None = None
    """The producer whose API key submitted the job (``None``: an operator's direct ``submit``); only it and admin
    keys see the job through the API."""


def _record_key(job_id: str, run: int | None = None) -> str:
    """The record of the job's current run, or (``run``) the archived record of an earlier one."""
    return f"{PREFIX}:job:{job_id}" if run is None else f"{PREFIX}:run:{job_id}:{run}"


_SET = """
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""

_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2])
return 1
"""

# KEYS: job. ARGV: now, reason. Returns {outcome, previous state}. Only the job's record changes (a producer's
# Redis user reaches no lease): the worker running a phase sees the state at its next heartbeat and stops.
_CANCEL = """
local job = KEYS[1]
if redis.call('EXISTS', job) == 0 then return {'missing', ''} end
local st = cjson.decode(redis.call('HGET', job, 'state'))
if st == 'done' or st == 'unmet' or st == 'failed' or st == 'cancelled' then return {'ended', st} end
redis.call('HSET', job, 'state', '"cancelled"', 'next', $END, 'running', 'false', 'finished_at', ARGV[1],
  'reason', cjson.encode(ARGV[2]))
return {'cancelled', st}
"""

# KEYS: job, history, archive hash, archive history, jobs index. ARGV: now, then field/value pairs of the fresh
# record. The finished run's record and history are kept under the archive keys. The checkpoint is left alone: the
# plan phase starts without one and its commit replaces it.
_RERUN = """
local job = KEYS[1]
if redis.call('EXISTS', job) == 0 then return {'missing', ''} end
local st = cjson.decode(redis.call('HGET', job, 'state'))
if st ~= 'failed' and st ~= 'unmet' and st ~= 'cancelled' then return {'refused', st} end
local old = redis.call('HGETALL', job)
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], unpack(old))
redis.call('DEL', KEYS[4])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('RENAME', KEYS[2], KEYS[4]) end
redis.call('HSET', job, unpack(ARGV, 2))
redis.call('ZADD', KEYS[5], ARGV[1], cjson.decode(redis.call('HGET', job, 'job_id')))
return {'queued', st}
"""


class JobRecords(History):
    """Read and write job records: the one writer of a record is :meth:`write`."""

    def write(self, job_id: str, lua: str, *, keys: Sequence[str] = (), args: Sequence[Any] = ()) -> Any:
        """Run the Lua transition ``lua`` on the job's record (its ``KEYS[1]``; ``keys`` follow it)."""
        script: Script = self.script(lua)
        return script(keys=[_record_key(job_id), *keys], args=list(args))

    def read(self, job_id: str, run: int | None = None) -> JobRecord | None:
        """The record of the job's current run (or of the earlier ``run``), with its history."""
        raw = self.r.hgetall(_record_key(job_id, run))
        if not raw:
            return None
        data = {text(k): json.loads(v) for k, v in raw.items()}
        return JobRecord.model_validate({**data, "history": self.history(job_id, run)})

    def create(self, record: JobRecord) -> bool:
        """Store a new job; False (and nothing written) when the job id was already submitted."""
        args = [record.submitted_at, record.job_id, *field_args(record.model_dump(mode="json", exclude={"history"}))]
        return bool(self.write(record.job_id, _CREATE, keys=[JOBS], args=args))

    def get(self, job_id: str) -> JobRecord | None:
        return self.read(job_id)

    def update(self, job_id: str, **fields: Any) -> None:
        """Set record fields as they are (the worker's bookkeeping: the task sent, the step running, the result)."""
        if fields:
            self.write(job_id, _SET, args=field_args(fields))

    def job_ids(self, *, limit: int = 0) -> list[str]:
        """Job ids, newest first (all, or the ``limit`` newest)."""
        return [text(i) for i in self.r.zrevrange(JOBS, 0, limit - 1 if limit > 0 else -1)]

    def all(self, *, limit: int = 0) -> list[JobRecord]:
        return [rec for i in self.job_ids(limit=limit) if (rec := self.get(i)) is not None]

    def cancel(self, job_id: str, *, reason: str = "cancelled by the producer") -> tuple[str, str]:
        """``(outcome, previous_state)``: ``cancelled``, ``ended`` (already over: nothing changed) or ``missing``.

        A worker running a phase of it finds it cancelled at its next heartbeat and stops; its results are not
        saved (a commit of a cancelled job is refused)."""
        outcome, previous = self.write(job_id, _CANCEL, args=[time.time(), reason])
        return text(outcome), text(previous)

    def rerun(self, record: JobRecord) -> tuple[str, str]:
        """Start ``record`` (a fresh run of an ended job: same id, ``run`` + 1) if the stored job ended ``failed``,
        ``unmet`` or ``cancelled``; the earlier run's record and history stay readable (:meth:`earlier_runs`).
        ``(outcome, previous_state)``: ``queued``, ``refused`` or ``missing``."""
        args = [record.submitted_at, *field_args(record.model_dump(mode="json", exclude={"history"}))]
        earlier = record.run - 1
        keys = [
            history_key(record.job_id),
            _record_key(record.job_id, earlier),
            history_key(record.job_id, earlier),
            JOBS,
        ]
        outcome, previous = self.write(record.job_id, _RERUN, keys=keys, args=args)
        return text(outcome), text(previous)

    def earlier_runs(self, job_id: str, current: int) -> list[JobRecord]:
        """The archived records of runs before ``current``, oldest first."""
        return [rec for n in range(1, current) if (rec := self.read(job_id, n)) is not None]
