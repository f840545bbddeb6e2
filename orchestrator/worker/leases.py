"""The lease on a job's next phase (``orch:lease:<id>``, a token with an expiry) and the transitions of a phase's
run: take the lease, renew it (the heartbeat), commit the phase's work, release it, hand the phase back, take over a
dead worker's job. The attempt count, the lease and the heartbeat are the ledger's, not Celery's: every decision to
run, skip or take over a phase is made here, in Lua scripts run on the job's record (``JobRecords.write``), so two
workers never both decide to run the same phase.
"""

from __future__ import annotations

import json
import secrets
import time
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from orchestrator.worker.checkpoints import checkpoint_key
from orchestrator.worker.records import JobRecords, phase_state
from orchestrator.worker.store import PREFIX, field_args, text

if TYPE_CHECKING:  # the saved goal state pulls in the whole Act: only the worker's phases read or write it
    from orchestrator.workflow.goal import Checkpoint

RUNNING = f"{PREFIX}:running"
"""The jobs a worker holds or held a lease on without finishing the phase (the sweep's candidates)."""


def lease_key(job_id: str) -> str:
    return f"{PREFIX}:lease:{job_id}"


class Acquire(StrEnum):
    """What :meth:`Leases.acquire` decided about running a phase."""

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


class LeaseLost(Exception):
    """The lease on a job passed to another worker: this worker's results for the phase must be dropped."""


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


# KEYS: job, lease, checkpoint. ARGV: token, checkpoint JSON ('' for none), then field/value pairs.
# Only the lease holder saves; saving the same thing twice (a retry after a lost reply) changes nothing.
_COMMIT = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'state') == '"cancelled"' then return 0 end
if ARGV[2] ~= '' then redis.call('SET', KEYS[3], ARGV[2]) end
if #ARGV > 2 then redis.call('HSET', KEYS[1], unpack(ARGV, 3)) end
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


class Leases(JobRecords):
    """A phase's run, as the ledger decides it: one worker at a time, a bounded number of attempts."""

    def acquire(self, job_id: str, phase: str, *, worker: str, lease_s: float, max_attempts: int) -> Lease:
        """Take the lease to run the phase token ``phase`` of the job if it is its next (see :class:`Acquire`)."""
        token = secrets.token_hex(12)
        args = [phase, token, int(lease_s * 1000), worker, time.time(), max_attempts, json.dumps(phase_state(phase)),
                job_id]
        outcome, attempts = self.write(job_id, _ACQUIRE, keys=[lease_key(job_id), RUNNING], args=args)
        return Lease(Acquire(outcome.decode()), token, int(attempts))

    def renew(self, job_id: str, token: str, lease_s: float) -> bool:
        args = [token, int(lease_s * 1000), time.time()]
        return bool(self.write(job_id, _RENEW, keys=[lease_key(job_id)], args=args))

    def release(self, job_id: str, token: str) -> bool:
        return bool(self.write(job_id, _RELEASE, keys=[lease_key(job_id), RUNNING], args=[token, job_id]))

    def running_ids(self) -> list[str]:
        """Jobs a worker holds or held a lease on without finishing the phase (the sweep's candidates)."""
        return sorted(text(i) for i in self.r.smembers(RUNNING))

    def commit_phase(self, job_id: str, token: str, checkpoint: Checkpoint | None, **fields: Any) -> None:
        """Save the checkpoint and the record fields of a finished phase, only while holding the lease.

        Raises :class:`LeaseLost` when another worker took the job over meanwhile (its run wins).
        """
        args = [token, checkpoint.model_dump_json() if checkpoint is not None else "", *field_args(fields)]
        if not self.write(job_id, _COMMIT, keys=[lease_key(job_id), checkpoint_key(job_id)], args=args):
            raise LeaseLost(job_id)

    def take_over_if_stale(
        self, job_id: str, *, stale_after_s: float, max_attempts: int, sweeper: str
    ) -> tuple[str, str, int]:
        """``(outcome, next_phase, attempts)``; ``requeue`` means the caller must enqueue ``next_phase``."""
        outcome, nxt, attempts = self.write(
            job_id, _TAKEOVER, keys=[lease_key(job_id), RUNNING],
            args=[time.time(), stale_after_s, max_attempts, sweeper, job_id, secrets.token_hex(8)],
        )
        return outcome.decode(), nxt.decode(), int(attempts)

    def give_back(self, job_id: str, token: str, *, why: str, max_attempts: int) -> str:
        """Hand a phase back after an error of this worker's environment: ``queued`` (send it again), ``exhausted``
        (the job just failed: no worker could run it) or ``lost`` (the lease had passed on)."""
        args = [token, time.time(), max_attempts, why, job_id]
        return text(self.write(job_id, _GIVE_BACK, keys=[lease_key(job_id), RUNNING], args=args))
