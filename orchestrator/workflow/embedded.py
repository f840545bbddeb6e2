"""The embedded driver: a goal's whole course in this process, by looping over ``machine.advance``.

``run_goal`` is what ``python -m orchestrator run`` calls; the distributed driver is ``worker.phases.run_phase``,
which calls ``advance`` once per task. Both end a broken goal with ``judge.failed_result`` of the last saved state.
"""

from __future__ import annotations

import os
import tempfile
import time
import zipfile
from contextlib import suppress
from pathlib import Path

from orchestrator.errors import OrchestratorError, WorkflowError
from orchestrator.logs import get_logger
from orchestrator.workflow import phases
from orchestrator.workflow.goal import GoalResult, GoalState
from orchestrator.workflow.judge import error_result, failed_result
from orchestrator.workflow.machine import advance
from orchestrator.workflow.phases import Phase
from orchestrator.workflow.request import GoalRequest
from orchestrator.workflow.runtime import Runtime
from orchestrator.workflow.steps import start_goal

_log = get_logger("orchestrator.workflow")


class GoalInterrupted(WorkflowError):
    """The goal was stopped (Ctrl-C, SIGTERM); ``result`` is what it had done, its artifacts marked partial."""

    def __init__(self, message: str, *, result: GoalResult, exit_code: int) -> None:
        super().__init__(message, where="interrupted", next_step="run the goal again; kept files are marked partial")
        self.result = result
        self.exit_code = exit_code


def run_goal(request: GoalRequest, out_dir: Path, rt: Runtime) -> GoalResult:
    """Plan → Act → Reflect in this process. Failures become a ``failed``/``unmet`` result saying where and why.

    A stop (Ctrl-C, or SIGTERM raised as ``SystemExit``) raises :class:`GoalInterrupted` carrying the partial result.
    """
    started = time.monotonic()
    state = start_goal(request, out_dir, rt.settings)
    result = drive(state, phases.FIRST, rt, started=started)
    rt.emit(
        "goal.done",
        job=state.job_id,
        status=result.status,
        tokens_in=result.metrics.tokens_in,
        tokens_out=result.metrics.tokens_out,
        tool_calls=result.metrics.tool_calls,
    )
    return result


def drive(state: GoalState, phase: Phase, rt: Runtime, *, started: float | None = None) -> GoalResult:
    """Advance the goal from ``phase`` until it is done; returns its result (``duration_ms`` from ``started``)."""
    started = time.monotonic() if started is None else started
    try:
        while not isinstance(phase, phases.Done):
            state, phase = advance(state, phase, rt)
        assert phase.result is not None
        result = phase.result
    except OrchestratorError as e:
        rt.emit("goal.failed", job=state.job_id, where=e.where, error=e.message)
        result = error_result(state, e, "workflow")
    except (KeyboardInterrupt, SystemExit) as e:
        how = "Ctrl-C" if isinstance(e, KeyboardInterrupt) else f"a stop signal (exit {e.code})"
        _log.warning("goal.interrupted", job=state.job_id, how=how)
        result = failed_result(state, "interrupted", f"stopped by {how}", "run the goal again")
        result.metrics.duration_ms = int((time.monotonic() - started) * 1000)
        code = 130 if isinstance(e, KeyboardInterrupt) else (e.code if isinstance(e.code, int) else 1)
        raise GoalInterrupted(f"stopped by {how}", result=result, exit_code=code) from e
    except Exception as e:  # noqa: BLE001 - a bug of ours still ends with a result and its evidence
        _log.exception("goal.crashed", job=state.job_id)
        result = failed_result(state, "workflow", f"internal error: {type(e).__name__}: {e}", "report this as a bug")
    result.metrics.duration_ms = int((time.monotonic() - started) * 1000)
    return result


def bundle_zip(result: GoalResult, dest: Path, source: Path | None = None) -> Path:
    """Bundle the output files into one ZIP (the artifact catalog's optional bundle).

    ``source`` is where the goal's own copies are (its job folder's mirror; the output folder by default). The ZIP
    is written beside ``dest`` and renamed over it, so a link at ``dest`` is replaced, never written through.
    """
    root = source or Path(result.out_dir)
    fd, temp = tempfile.mkstemp(dir=dest.parent, prefix=".orch-", suffix=".zip.part")
    try:
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for artifact in result.artifacts:
                path = root / artifact.path
                if path.is_file() and not path.is_symlink():
                    zf.write(path, artifact.path)
        os.chmod(temp, 0o644)
        os.replace(temp, dest)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp)
        raise
    return dest
