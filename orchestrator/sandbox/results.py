"""Turning what a container did into a :class:`ScriptResult`, with a reason, the limit it hit and what lifts it."""

from __future__ import annotations

from typing import Protocol

from orchestrator.config import SandboxSettings
from orchestrator.sandbox.limits import PIDS_LIMIT_MARKER, TIME_LIMIT_MARKER
from orchestrator.sandbox.models import ScriptResult
from orchestrator.sandbox.profiles import LimitName, lift_hint
from orchestrator.sandbox.streams import OutputCollector, summarise_stderr


class LaunchedCommand(Protocol):
    """What a container was asked to run: a skill or ``build/`` script, or an allowed program."""

    @property
    def label(self) -> str: ...
    @property
    def argv(self) -> list[str]: ...
    @property
    def expects_json(self) -> bool: ...
    def launcher_header(self, timeout_s: float) -> bytes: ...


def script_result(
    settings: SandboxSettings,
    disk_mb: int,
    command: LaunchedCommand,
    container: str,
    out: OutputCollector,
    outcome: str,
    exit_code: int | None,
    oom: bool,
    duration_ms: int,
    timeout_s: float,
) -> ScriptResult:
    parsed, value = out.stdout_json()
    violations: list[str] = []
    reason: str | None = None
    limit: LimitName | None = None
    limit_mib = f"{settings.stdout_limit_bytes / 1048576:g} MiB"
    tail = out.stderr_tail
    text = "\n".join(tail)
    if outcome == "eof" and exit_code == 137 and TIME_LIMIT_MARKER in text:
        outcome = "timeout"  # a browser call's launcher enforced the limit itself and said so
    if outcome == "timeout":
        limit = "timeout"
        reason = f"timed out after {timeout_s:g}s"
        violations.append(f"timeout: killed after {timeout_s:g}s")
        if PIDS_LIMIT_MARKER in text:  # it hung waiting for a process or thread the kernel refused
            limit = "pids"
            reason += f", with new processes refused at the pids limit ({settings.pids_limit})"
            violations.append(f"pids_limit: at most {settings.pids_limit} processes")
    elif outcome == "stdout_limit":
        reason = f"stdout exceeded {limit_mib}"
        violations.append(f"stdout_limit: more than {limit_mib} written to stdout; killed")
    elif oom:
        limit = "memory"
        reason = f"out of memory ({settings.memory_mb} MiB)"
        violations.append(f"memory_limit: killed by the kernel at {settings.memory_mb} MiB")
    elif exit_code != 0:
        reason = f"exit code {exit_code}"
    elif command.expects_json and not parsed:
        reason = "stdout is not JSON" if out.stdout.strip() else "stdout is empty (a JSON value is expected)"
    if reason is not None and limit is None:
        if "No space left on device" in text or "ENOSPC" in text:
            violations.append(f"disk_limit: build/ ({disk_mb} MiB) or /tmp ({settings.tmp_size_mb} MiB) is full")
            limit = "tmp"
        if any(sign in text for sign in ("Resource temporarily unavailable", "BlockingIOError", "EAGAIN",
                                         PIDS_LIMIT_MARKER)):
            violations.append(f"pids_limit: at most {settings.pids_limit} processes")
            limit = "pids"
    next_step = lift_hint(settings, limit, timeout_s=timeout_s) if limit else None
    return ScriptResult(
        ok=reason is None,
        exit_code=exit_code,
        stdout_json=value if parsed else None,
        stdout_text=out.stdout_text(),
        stderr_summary=summarise_stderr(tail, out.stderr_lines),
        stderr_lines=out.stderr_lines,
        stderr_tail=tail,
        duration_ms=duration_ms,
        timed_out=outcome == "timeout",
        oom_killed=oom,
        violations=violations,
        reason=reason,
        limit=limit,
        next_step=next_step,
        script=command.label,
        container=container,
        command=command.argv,
        stdout_bytes=out.stdout_bytes,
        stderr_bytes=out.stderr_bytes,
    )
