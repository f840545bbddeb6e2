"""How the ledger is shown to people: states that mean what they say, batches summed up.

The ledger stores what workers wrote; a running job whose worker stopped heart-beating still reads ``acting`` there
until a live worker takes it over. What ``jobs`` and ``submit --wait`` show is computed here at read time:
``stalled`` (with since when) for such a job, and a note on ``queued`` jobs when no live worker consumes the queue.
"""

from __future__ import annotations

import time
from statistics import median
from typing import Any

from orchestrator.config import Settings
from orchestrator.errors import OrchestratorError
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.names import QUEUE
from orchestrator.worker.records import JobRecord
from orchestrator.workflow import phases
from orchestrator.workflow.folders import out_folder


def consumers(ledger: Ledger) -> list[dict[str, Any]]:
    """Live workers consuming the orchestrator's queue (alive and ready)."""
    return [w for w in ledger.workers() if w.get("ready") and QUEUE in (w.get("queues") or [])]


def standing_by(ledger: Ledger) -> list[dict[str, Any]]:
    """Live workers that are not ready, each with what it lacks."""
    return [w for w in ledger.workers() if not w.get("ready")]


RUNNING_STATES = frozenset({"planning", "acting", "reflecting"})


def shown_state(record: JobRecord, settings: Settings, now: float | None = None) -> tuple[str, float | None]:
    """``(state, stalled_since)``: ``stalled`` when a phase runs but its heartbeat is older than three beats;
    ``queued`` when the ledger still says the last phase's state (``acting``) but no worker runs the next one yet."""
    now = time.time() if now is None else now
    if record.running and record.heartbeat and now - record.heartbeat > settings.worker.stalled_after_s:
        return "stalled", record.heartbeat
    if record.state in RUNNING_STATES and not record.running:
        return "queued", None
    return record.state, None


def waiting_for(record: JobRecord) -> str | None:
    """For a job not ended and not running: the phase it waits to run, as people count it (``plan``, ``act 2/4``,
    ``reflect``); None otherwise."""
    if record.running or record.state not in {"queued", *RUNNING_STATES}:
        return None
    try:
        phase = phases.parse(record.next)
    except OrchestratorError:
        return None
    if isinstance(phase, phases.Act):
        total = record.steps_total or len(record.plan) or phase.index + 1
        return f"{phase.kind.value} {phase.index + 1}/{total}"
    return None if isinstance(phase, phases.Done) else phase.kind.value


def state_label(record: JobRecord, settings: Settings, now: float | None = None) -> str:
    """The state as a table shows it: ``queued (act 2/4)`` while a phase waits for a worker."""
    state, _ = shown_state(record, settings, now)
    waiting = waiting_for(record) if state == "queued" else None
    return f"{state} ({waiting})" if waiting else state


def workers_view(ledger: Ledger) -> list[dict[str, Any]]:
    """Every live worker as people read it: ``{"name", "ready", "queues", "missing", "seen_s_ago"}`` (``missing``:
    why a worker that is up takes no work)."""
    now = time.time()
    return [
        {"name": str(w.get("name")), "ready": bool(w.get("ready")), "queues": list(w.get("queues") or []),
         "missing": [str(m) for m in w.get("missing") or []], "seen_s_ago": round(now - float(w.get("seen") or now), 1)}
        for w in ledger.workers()
    ]


def no_worker_note(ledger: Ledger) -> str | None:
    """A sentence when no live worker consumes the queue (None when one does)."""
    if consumers(ledger):
        return None
    waiting = standing_by(ledger)
    if waiting:
        lacks = "; ".join(f"{w['name']}: {', '.join(w.get('missing') or ['checking'])}" for w in waiting[:5])
        return f"no ready worker consumes queue {QUEUE!r} (not ready: {lacks})"
    return f"no live worker consumes queue {QUEUE!r}: start one (python -m orchestrator worker)"


def out_dir(record: JobRecord, settings: Settings) -> str:
    """The job's output folder as its worker reported it, else where the shared output root puts it."""
    reported = (record.result or {}).get("out_dir")
    return str(reported) if reported else str(out_folder(settings.output_root, record.out or record.job_id))


def evidence_path(record: JobRecord) -> str | None:
    found = (record.result or {}).get("evidence_path")
    return str(found) if found else None


def summary(record: JobRecord, settings: Settings, *, note: str | None = None) -> dict[str, Any]:
    """One job as ``jobs --json`` and ``submit --wait --json`` list it."""
    state, stalled_since = shown_state(record, settings)
    end = record.finished_at or time.time()
    row: dict[str, Any] = {
        "job_id": record.job_id,
        "state": state,
        "attempts": record.attempts,
        "step": record.step,
        "skill": record.skill,
        "worker": record.worker,
        "artifacts": [a.get("path") for a in record.artifacts],
        "seconds": round(end - record.submitted_at, 2),
        "reason": record.reason,
        "goal": record.goal,
        "batch": record.batch,
        "run": record.run,
        "out_dir": out_dir(record, settings),
        "evidence_path": evidence_path(record),
    }
    if state == "queued":
        row["waiting_for"] = waiting_for(record)
    if stalled_since is not None:
        silent = f"worker {record.worker} stopped heart-beating {time.time() - stalled_since:.0f} s ago"
        row.update(stalled_since=stalled_since, note=silent)
    elif state == "queued" and note:
        row["note"] = note
    return row


MAX_REASON_CHARS = 1000
SHOWN_ITEMS = 3


def unmet_reason(result: dict[str, Any]) -> str:
    """Why a goal ended unmet, on one line: what stayed unmet and why, then the goal's notes (which budget left
    steps unrun or refused a retry or re-plan), else the final check's rationale. Read from the (masked) result."""
    unmet = [u for u in result.get("unmet") or [] if isinstance(u, dict)]
    parts = [f"{u.get('what')} — {u.get('why')}" for u in unmet[:SHOWN_ITEMS]]
    if len(unmet) > SHOWN_ITEMS:
        parts.append(f"{len(unmet) - SHOWN_ITEMS} more unmet")
    parts += [str(note) for note in (result.get("notes") or [])[:SHOWN_ITEMS]]
    if not parts:
        validation = result.get("validation")
        rationale = validation.get("rationale") if isinstance(validation, dict) else None
        parts = [str(rationale)] if rationale else ["the goal's outputs did not validate"]
    return " ".join("; ".join(parts).split())[:MAX_REASON_CHARS]


def reason_of(record: JobRecord) -> str:
    """Why a job did not end done: its reason, or for an unmet job recorded without one, what stayed unmet."""
    if record.reason:
        return record.reason
    return unmet_reason(record.result) if record.state == "unmet" and record.result else ""


def batch_report(records: list[JobRecord], settings: Settings) -> dict[str, Any]:
    """Counts by state, durations (of ended jobs, submission to end) and each failure's reason."""
    counts: dict[str, int] = {}
    for r in records:
        state, _ = shown_state(r, settings)
        counts[state] = counts.get(state, 0) + 1
    ended = [r.finished_at - r.submitted_at for r in records if r.finished_at]
    durations = {
        "ended": len(ended),
        "min_s": round(min(ended), 2) if ended else None,
        "median_s": round(median(ended), 2) if ended else None,
        "max_s": round(max(ended), 2) if ended else None,
    }
    if records:
        first = min(r.submitted_at for r in records)
        last = max((r.finished_at or time.time()) for r in records)
        durations["wall_s"] = round(last - first, 2)
    failures = [
        {"job_id": r.job_id, "state": r.state, "reason": reason_of(r), "attempts": r.attempts}
        for r in records
        if r.state in ("failed", "unmet", "cancelled")
    ]
    return {"counts": counts, "durations": durations, "failures": failures}
