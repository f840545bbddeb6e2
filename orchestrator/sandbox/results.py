"""Turning what a container did into a :class:`ScriptResult`, with a reason and the limits it hit."""

from __future__ import annotations

from orchestrator.config import SandboxSettings
from orchestrator.sandbox.limits import ScriptCommand
from orchestrator.sandbox.models import ScriptResult
from orchestrator.sandbox.streams import OutputCollector, summarise_stderr


def script_result(
    settings: SandboxSettings,
    disk_mb: int,
    command: ScriptCommand,
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
    limit_mib = f"{settings.stdout_limit_bytes / 1048576:g} MiB"
    if outcome == "timeout":
        reason = f"timed out after {timeout_s:g}s"
        violations.append(f"timeout: killed after {timeout_s:g}s")
    elif outcome == "stdout_limit":
        reason = f"stdout exceeded {limit_mib}"
        violations.append(f"stdout_limit: more than {limit_mib} written to stdout; killed")
    elif oom:
        reason = f"out of memory ({settings.memory_mb} MiB)"
        violations.append(f"memory_limit: killed by the kernel at {settings.memory_mb} MiB")
    elif exit_code != 0:
        reason = f"exit code {exit_code}"
    elif not parsed:
        reason = "stdout is not JSON" if out.stdout.strip() else "stdout is empty (a JSON value is expected)"
    tail = out.stderr_tail
    if reason is not None:
        text = "\n".join(tail)
        if "No space left on device" in text or "ENOSPC" in text:
            violations.append(f"disk_limit: build/ is full ({disk_mb} MiB)")
        if "Resource temporarily unavailable" in text or "BlockingIOError" in text or "EAGAIN" in text:
            violations.append(f"pids_limit: at most {settings.pids_limit} processes")
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
        script=command.script,
        container=container,
        command=command.argv,
        stdout_bytes=out.stdout_bytes,
        stderr_bytes=out.stderr_bytes,
    )
