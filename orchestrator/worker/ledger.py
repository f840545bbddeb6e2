"""The job ledger in Redis: ours, because Flower's history lives in memory and Redis keeps no redelivery count.

Per job a hash ``orch:job:<id>`` (one JSON value per field, so writers of different fields never overwrite each
other), the saved ``GoalState`` between phases (``orch:checkpoint:<id>``), a lease (``orch:lease:<id>``, a token
with an expiry) and the finished spans of its trace (``orch:spans:<id>``). The attempt count, the lease and the
heartbeat are the ledger's, not Celery's: every decision to run, skip or take over a phase is made here, in Lua
scripts, so two workers never both decide to run the same phase.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import redis
from pydantic import BaseModel, ConfigDict, Field
from redis.backoff import ExponentialBackoff
from redis.commands.core import Script
from redis.retry import Retry
from redis.typing import EncodableT, FieldT

from orchestrator.errors import WorkflowError
from orchestrator.worker.inputs import InputRef
from orchestrator.worker.tenancy import DEFAULT_LIBRARY, STACK_PATTERN
from orchestrator.workflow import phases
from orchestrator.workflow.phases import PhaseKind
from orchestrator.workflow.request import BudgetOverrides
from orchestrator.workflow.versions import SkillsUsed

if TYPE_CHECKING:  # the saved goal state pulls in the whole Act: only the worker's phases read or write it
    from orchestrator.workflow.goal import Checkpoint

JobState = Literal["queued", "planning", "acting", "reflecting", "done", "unmet", "failed", "cancelled"]
"""What the ledger stores. ``stalled`` is never stored: it is how a running job whose heartbeat stopped is shown."""
TERMINAL: frozenset[str] = frozenset({"done", "unmet", "failed", "cancelled"})
RERUNNABLE: frozenset[str] = frozenset({"failed", "unmet", "cancelled"})
PREFIX = "orch"
RUNNING = f"{PREFIX}:running"
WORKER_PREFIX = f"{PREFIX}:worker:"


def job_key(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}"


_RUNNING_STATES: dict[PhaseKind, JobState] = {
    PhaseKind.PLAN: "planning", PhaseKind.ACT: "acting", PhaseKind.REFLECT: "reflecting"
}


def phase_state(token: str) -> JobState:
    """The ledger state of a job while the phase ``token`` names runs."""
    return _RUNNING_STATES[phases.parse(token).kind]


class Acquire(StrEnum):
    """What :meth:`Ledger.acquire` decided about running a phase."""

    OK = "ok"
    """Run it: this worker holds the lease."""
    STALE = "stale"
    """Not the job's next phase (already done, or the job ended): skip the task."""
    BUSY = "busy"
    """Another worker holds the lease: try again shortly."""
    EXHAUSTED = "exhausted"
    """The attempts cap was passed: the job just failed."""
    MISSING = "missing"
    """No such job."""


class Lease(NamedTuple):
    outcome: Acquire
    token: str
    """The lease token (renew, commit and release need it)."""
    attempts: int


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


_END_LUA = "'" + json.dumps(phases.token(phases.Done())) + "'"
"""``next`` of a job that ended, as a Lua string of its stored JSON: the scripts write ``$END`` for it, so the token
is spelt in ``workflow.phases`` only."""

_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2])
return 1
"""

# KEYS: job, lease, running set. ARGV: phase, token, lease_ms, worker, now, max_attempts, state (JSON), job id
# Returns {outcome, attempts}: outcome is ok | stale | busy | exhausted | missing. The same call sent again (its
# reply was lost to a Redis restart and the client retried it) finds its own token: ok, and no attempt counted.
_ACQUIRE = """
local job = KEYS[1]
if redis.call('EXISTS', job) == 0 then return {'missing', 0} end
local nxt = cjson.decode(redis.call('HGET', job, 'next'))
local st = cjson.decode(redis.call('HGET', job, 'state'))
if nxt ~= ARGV[1] or st == 'done' or st == 'unmet' or st == 'failed' or st == 'cancelled' then
  return {'stale', 0}
end
local attempts = tonumber(redis.call('HGET', job, 'attempts') or '0')
local holder = redis.call('GET', KEYS[2])
if holder == ARGV[2] then return {'ok', attempts} end
if holder then return {'busy', 0} end
local running = cjson.decode(redis.call('HGET', job, 'running') or 'false')
local given = cjson.decode(redis.call('HGET', job, 'given_back') or 'false')
if attempts == 0 or running or given then attempts = attempts + 1 end
redis.call('HSET', job, 'attempts', attempts, 'given_back', 'false')
if attempts > tonumber(ARGV[6]) then
  redis.call('SREM', KEYS[3], ARGV[8])
  redis.call('HSET', job, 'state', '"failed"', 'running', 'false', 'next', $END, 'finished_at', ARGV[5],
    'reason', cjson.encode('gave up after ' .. (attempts - 1) .. ' attempts: the worker running ' .. ARGV[1] ..
      ' stopped before finishing it'))
  return {'exhausted', attempts}
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('SADD', KEYS[3], ARGV[8])
redis.call('HSET', job, 'running', 'true', 'worker', cjson.encode(ARGV[4]), 'heartbeat', ARGV[5], 'state', ARGV[7],
  'phase_started', ARGV[5])
if redis.call('HGET', job, 'started_at') == 'null' then redis.call('HSET', job, 'started_at', ARGV[5]) end
return {'ok', attempts}
"""

# ARGV: token, lease_ms, now
_RENEW = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'state') == '"cancelled"' then return 0 end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[1], 'heartbeat', ARGV[3])
return 1
"""

# ARGV: token, job id. Clears the lease and the running flag, only for the lease holder.
_RELEASE = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[2])
redis.call('HSET', KEYS[1], 'running', 'false')
return 1
"""

# ARGV: now, stale_after_s, max_attempts, sweeper, job id, call id. Takes over a running job whose heartbeat is
# stale. Returns {outcome, next, attempts}: outcome is fresh | requeue | exhausted. The same call sent again (its reply
# lost to a Redis restart) answers what it did, so the phase is queued again and counted once.
_TAKEOVER = """
local job = KEYS[1]
if redis.call('EXISTS', job) == 0 then redis.call('SREM', KEYS[3], ARGV[5]) return {'fresh', '', 0} end
if redis.call('HGET', job, 'taken_by') == cjson.encode(ARGV[6]) then
  local done = cjson.decode(redis.call('HGET', job, 'state')) == 'failed'
  return {done and 'exhausted' or 'requeue', cjson.decode(redis.call('HGET', job, 'next_taken')),
    tonumber(redis.call('HGET', job, 'attempts'))}
end
local running = cjson.decode(redis.call('HGET', job, 'running') or 'false')
local hb = tonumber(redis.call('HGET', job, 'heartbeat')) or 0
if not running or tonumber(ARGV[1]) - hb < tonumber(ARGV[2]) then return {'fresh', '', 0} end
local nxt = cjson.decode(redis.call('HGET', job, 'next'))
local worker = cjson.decode(redis.call('HGET', job, 'worker') or 'null')
if type(worker) ~= 'string' then worker = '?' end
local age = math.floor(tonumber(ARGV[1]) - hb)
local attempts = tonumber(redis.call('HGET', job, 'attempts') or '0') + 1
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[5])
redis.call('HSET', job, 'attempts', attempts, 'running', 'false', 'heartbeat', ARGV[1],
  'taken_by', cjson.encode(ARGV[6]), 'next_taken', cjson.encode(nxt))
if attempts > tonumber(ARGV[3]) then
  redis.call('HSET', job, 'state', '"failed"', 'next', $END, 'finished_at', ARGV[1],
    'reason', cjson.encode('gave up after ' .. (attempts - 1) .. ' attempts: worker ' .. worker ..
      ' stopped heartbeating during ' .. nxt .. ' (last heartbeat ' .. age .. ' s before)'))
  return {'exhausted', nxt, attempts}
end
redis.call('HSET', job, 'reason', cjson.encode('taken over by ' .. ARGV[4] .. ': worker ' .. worker ..
  ' stopped heartbeating during ' .. nxt .. ' (last heartbeat ' .. age .. ' s before)'))
return {'requeue', nxt, attempts}
"""


# KEYS: lease, checkpoint, job. ARGV: token, checkpoint JSON ('' for none), then field/value pairs.
# Only the lease holder saves; saving the same thing twice (a retry after a lost reply) changes nothing.
_COMMIT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[3], 'state') == '"cancelled"' then return 0 end
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2]) end
if #ARGV > 2 then redis.call('HSET', KEYS[3], unpack(ARGV, 3)) end
return 1
"""


# KEYS: job, lease, running set. ARGV: token, now, max_attempts, why, job id. A worker whose own environment failed
# (model server, key, engine, image) hands the phase back: the next worker's attempt counts; at the cap it fails.
# The same call sent again (its reply lost to a Redis restart) answers what it did.
_GIVE_BACK = """
local job = KEYS[1]
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  if redis.call('HGET', job, 'given_by') ~= cjson.encode(ARGV[1]) then return 'lost' end
  if cjson.decode(redis.call('HGET', job, 'state')) == 'failed' then return 'exhausted' end
  return 'queued'
end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[5])
if redis.call('HGET', job, 'state') == '"cancelled"' then
  redis.call('HSET', job, 'running', 'false')
  return 'lost'
end
local attempts = tonumber(redis.call('HGET', job, 'attempts') or '0')
redis.call('HSET', job, 'given_by', cjson.encode(ARGV[1]))
if attempts >= tonumber(ARGV[3]) then
  redis.call('HSET', job, 'state', '"failed"', 'running', 'false', 'next', $END, 'finished_at', ARGV[2],
    'reason', cjson.encode('no worker could run it: ' .. ARGV[4] .. ' (' .. attempts .. ' attempts)'))
  return 'exhausted'
end
redis.call('HSET', job, 'state', '"queued"', 'running', 'false', 'given_back', 'true',
  'reason', cjson.encode('waiting for another worker: ' .. ARGV[4]))
return 'queued'
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

# KEYS: history. ARGV: entry (JSON). An entry equal to the last one is this call sent again after its reply was lost
# (every entry carries its own start and end times), so it is not added twice.
_HISTORY = """
if redis.call('LINDEX', KEYS[1], -1) == ARGV[1] then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
return 1
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


class LeaseLost(Exception):
    """The lease on a job passed to another worker: this worker's results for the phase must be dropped."""


class Ledger:
    """Read and write job records. One per process; thread-safe (redis-py pools its connections)."""

    def __init__(self, client: redis.Redis) -> None:
        self.r = client

        def script(text: str) -> Script:
            return client.register_script(text.replace("$END", _END_LUA))

        self._create = script(_CREATE)
        self._acquire = script(_ACQUIRE)
        self._renew = script(_RENEW)
        self._release = script(_RELEASE)
        self._takeover = script(_TAKEOVER)
        self._commit = script(_COMMIT)
        self._cancel = script(_CANCEL)
        self._give_back = script(_GIVE_BACK)
        self._rerun = script(_RERUN)
        self._history = script(_HISTORY)

    @classmethod
    def from_url(cls, url: str, *, outage_s: float = 0) -> Ledger:
        """A ledger on ``url``. With ``outage_s``, every call keeps retrying for about that long while Redis cannot
        be reached (a restart): workers ride out a restart mid-phase; commands run by people fail fast."""
        retry = Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=max(3, int(outage_s) + 5)) if outage_s else None
        kwargs: dict[str, Any] = {"retry": retry} if retry is not None else {}
        return cls(redis.Redis.from_url(url, socket_connect_timeout=5, health_check_interval=30, **kwargs))

    # -- records ----------------------------------------------------------------------------------------------

    def create(self, record: JobRecord) -> bool:
        """Store a new job; False (and nothing written) when the job id was already submitted."""
        fields = _encode(record.model_dump(mode="json", exclude={"history"}))
        argv: list[Any] = [record.submitted_at, record.job_id]
        for k, v in fields.items():
            argv += [k, v]
        return bool(self._create(keys=[job_key(record.job_id), f"{PREFIX}:jobs"], args=argv))

    def get(self, job_id: str) -> JobRecord | None:
        raw = self.r.hgetall(job_key(job_id))
        if not raw:
            return None
        data = {_text(k): json.loads(v) for k, v in raw.items()}
        return JobRecord.model_validate({**data, "history": self.history(job_id)})

    def update(self, job_id: str, **fields: Any) -> None:
        self.r.hset(job_key(job_id), mapping=_encode(fields))

    def job_ids(self, *, limit: int = 0) -> list[str]:
        """Job ids, newest first (all, or the ``limit`` newest)."""
        ids = self.r.zrevrange(f"{PREFIX}:jobs", 0, limit - 1 if limit > 0 else -1)
        return [_text(i) for i in ids]

    def all(self, *, limit: int = 0) -> list[JobRecord]:
        return [rec for i in self.job_ids(limit=limit) if (rec := self.get(i)) is not None]

    def running_ids(self) -> list[str]:
        """Jobs a worker holds or held a lease on without finishing the phase (the sweep's candidates)."""
        return sorted(_text(i) for i in self.r.smembers(RUNNING))

    def add_history(self, job_id: str, entry: dict[str, Any]) -> None:
        self._history(keys=[f"{PREFIX}:history:{job_id}"], args=[json.dumps(entry)])

    def history(self, job_id: str) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.r.lrange(f"{PREFIX}:history:{job_id}", 0, -1)]

    # -- checkpoints: the GoalState between phases --------------------------------------------------------------

    def load_checkpoint(self, job_id: str) -> Checkpoint | None:
        """The state saved after the job's last phase (None before its first); ``WorkflowError`` when it was saved
        by another schema version or does not read back."""
        # Deferred: the goal's models load with the phases that need them, not with every reader of the ledger.
        from orchestrator.workflow.goal import Checkpoint

        raw = self.r.get(f"{PREFIX}:checkpoint:{job_id}")
        return Checkpoint.load(json.loads(raw)) if raw else None

    def commit_phase(self, job_id: str, token: str, checkpoint: Checkpoint | None, **fields: Any) -> None:
        """Save the checkpoint and the record fields of a finished phase, only while holding the lease.

        Raises :class:`LeaseLost` when another worker took the job over meanwhile (its run wins).
        """
        argv: list[Any] = [token, checkpoint.model_dump_json() if checkpoint is not None else ""]
        for k, v in _encode(fields).items():
            argv += [k, v]
        keys = [f"{PREFIX}:lease:{job_id}", f"{PREFIX}:checkpoint:{job_id}", job_key(job_id)]
        if not self._commit(keys=keys, args=argv):
            raise LeaseLost(job_id)

    # -- lease and heartbeat ------------------------------------------------------------------------------------

    def acquire(self, job_id: str, phase: str, *, worker: str, lease_s: float, max_attempts: int) -> Lease:
        """Take the lease to run the phase token ``phase`` of the job if it is its next (see :class:`Acquire`)."""
        token = secrets.token_hex(12)
        outcome, attempts = self._acquire(
            keys=[job_key(job_id), f"{PREFIX}:lease:{job_id}", RUNNING],
            args=[
                phase,
                token,
                int(lease_s * 1000),
                worker,
                time.time(),
                max_attempts,
                json.dumps(phase_state(phase)),
                job_id,
            ],
        )
        return Lease(Acquire(outcome.decode()), token, int(attempts))

    def renew(self, job_id: str, token: str, lease_s: float) -> bool:
        return bool(
            self._renew(
                keys=[job_key(job_id), f"{PREFIX}:lease:{job_id}"], args=[token, int(lease_s * 1000), time.time()]
            )
        )

    def release(self, job_id: str, token: str) -> bool:
        return bool(self._release(keys=[job_key(job_id), f"{PREFIX}:lease:{job_id}", RUNNING], args=[token, job_id]))

    def take_over_if_stale(
        self, job_id: str, *, stale_after_s: float, max_attempts: int, sweeper: str
    ) -> tuple[str, str, int]:
        """``(outcome, next_phase, attempts)``; ``requeue`` means the caller must enqueue ``next_phase``."""
        outcome, nxt, attempts = self._takeover(
            keys=[job_key(job_id), f"{PREFIX}:lease:{job_id}", RUNNING],
            args=[time.time(), stale_after_s, max_attempts, sweeper, job_id, secrets.token_hex(8)],
        )
        return outcome.decode(), nxt.decode(), int(attempts)

    def give_back(self, job_id: str, token: str, *, why: str, max_attempts: int) -> str:
        """Hand a phase back after an error of this worker's environment: ``queued`` (send it again), ``exhausted``
        (the job just failed: no worker could run it) or ``lost`` (the lease had passed on)."""
        keys = [job_key(job_id), f"{PREFIX}:lease:{job_id}", RUNNING]
        return _text(self._give_back(keys=keys, args=[token, time.time(), max_attempts, why, job_id]))

    # -- producer control ---------------------------------------------------------------------------------------

    def cancel(self, job_id: str, *, reason: str = "cancelled by the producer") -> tuple[str, str]:
        """``(outcome, previous_state)``: ``cancelled``, ``ended`` (already over: nothing changed) or ``missing``.

        A worker running a phase of it finds it cancelled at its next heartbeat and stops; its results are not
        saved (a commit of a cancelled job is refused)."""
        outcome, previous = self._cancel(keys=[job_key(job_id)], args=[time.time(), reason])
        return _text(outcome), _text(previous)

    def rerun(self, record: JobRecord) -> tuple[str, str]:
        """Start ``record`` (a fresh run of an ended job: same id, ``run`` + 1) if the stored job ended ``failed``,
        ``unmet`` or ``cancelled``; the earlier run's record and history stay readable (:meth:`earlier_runs`).
        ``(outcome, previous_state)``: ``queued``, ``refused`` or ``missing``."""
        fields = _encode(record.model_dump(mode="json", exclude={"history"}))
        argv: list[Any] = [record.submitted_at]
        for k, v in fields.items():
            argv += [k, v]
        earlier = record.run - 1
        keys = [
            job_key(record.job_id),
            f"{PREFIX}:history:{record.job_id}",
            f"{PREFIX}:run:{record.job_id}:{earlier}",
            f"{PREFIX}:history:{record.job_id}:{earlier}",
            f"{PREFIX}:jobs",
        ]
        outcome, previous = self._rerun(keys=keys, args=argv)
        return _text(outcome), _text(previous)

    def earlier_runs(self, job_id: str, current: int) -> list[JobRecord]:
        """The archived records of runs before ``current``, oldest first."""
        runs = []
        for n in range(1, current):
            raw = self.r.hgetall(f"{PREFIX}:run:{job_id}:{n}")
            if raw:
                data = {_text(k): json.loads(v) for k, v in raw.items()}
                history = [json.loads(x) for x in self.r.lrange(f"{PREFIX}:history:{job_id}:{n}", 0, -1)]
                runs.append(JobRecord.model_validate({**data, "history": history}))
        return runs

    def stack_id(self) -> str:
        """This ledger's identity, made once (first caller wins) and kept in Redis; a value this program did not
        make (it names evidence folders) is refused."""
        self.r.set(f"{PREFIX}:stack", secrets.token_hex(6), nx=True)
        stack = _text(self.r.get(f"{PREFIX}:stack"))
        if not re.fullmatch(STACK_PATTERN, stack):
            raise WorkflowError(
                f"the ledger's identity {PREFIX}:stack in Redis is {stack[:80]!r}, not one this program made",
                where="ledger",
                next_step=f"protect Redis (password, ACL users), then DEL {PREFIX}:stack",
            )
        return stack

    # -- workers present ---------------------------------------------------------------------------------------

    def announce_worker(self, name: str, info: dict[str, Any], *, ttl_s: float) -> None:
        """Say that worker ``name`` is alive (and ready or not, with what is missing) for the next ``ttl_s``."""
        self.r.set(WORKER_PREFIX + name, json.dumps({"name": name, "seen": time.time(), **info}), px=int(ttl_s * 1000))

    def withdraw_worker(self, name: str) -> None:
        self.r.delete(WORKER_PREFIX + name)

    def workers(self) -> list[dict[str, Any]]:
        """Workers announced recently (each ``{"name", "seen", "ready", "queues", "missing", …}``)."""
        keys = sorted(self.r.scan_iter(match=WORKER_PREFIX + "*", count=500))
        values = self.r.mget(keys) if keys else []
        return [json.loads(v) for v in values if v]

    # -- spans ------------------------------------------------------------------------------------------------

    def add_span(self, trace_id: str, span: dict[str, Any]) -> None:
        """Keep a finished span of a goal's trace (``jobs ID --trace`` reads them, no collector needed)."""
        self.r.rpush(f"{PREFIX}:spans:{trace_id}", json.dumps(span))

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.r.lrange(f"{PREFIX}:spans:{trace_id}", 0, -1)]


def _encode(fields: dict[str, Any]) -> dict[FieldT, EncodableT]:
    return {k: json.dumps(v) for k, v in fields.items()}


def _text(value: object) -> str:
    """A Redis reply item as text (this client does not decode responses)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def batch_ids(ledger: Ledger, batch: str) -> list[str]:
    """The job ids of one batch, in submission order."""
    return [_text(i) for i in ledger.r.zrange(f"{PREFIX}:batch:{batch}", 0, -1)]


def add_to_batch(ledger: Ledger, batch: str, job_id: str, at: float) -> None:
    ledger.r.zadd(f"{PREFIX}:batch:{batch}", {job_id: at}, nx=True)


def owner_key(owner: str) -> str:
    return f"{PREFIX}:owner:{owner}"


def add_to_owner(ledger: Ledger, owner: str, job_id: str, at: float) -> None:
    """Index a job under its producer (``GET /v1/jobs`` lists a producer's jobs without reading everyone's)."""
    ledger.r.zadd(owner_key(owner), {job_id: at})


def owned_ids(ledger: Ledger, owner: str, *, limit: int = 0) -> list[str]:
    """The job ids of one producer, newest first (all, or the ``limit`` newest)."""
    ids = ledger.r.zrevrange(owner_key(owner), 0, limit - 1 if limit > 0 else -1)
    return [_text(i) for i in ids]
