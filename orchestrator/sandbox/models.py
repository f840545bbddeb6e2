"""Typed results of the sandbox: one script call, one file of ``build/``, one image build, one reaper pass."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class EgressRecord(BaseModel):
    """One request a granted call sent through the job's egress proxy (its log line; header values never in it)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    host: str = Field("", max_length=300)
    port: int | None = None
    method: str = Field("", max_length=20)
    path: str = Field("", max_length=300)
    status: int | None = None
    bytes: int = Field(0, ge=0, description="response body bytes")
    request_bytes: int = Field(0, ge=0)
    allowed: bool = False
    reason: str | None = Field(None, max_length=400, description="why the proxy refused it, or the upstream error")
    client: str | None = Field(None, max_length=60, description="a connection from outside the job's network")


class ScriptResult(BaseModel):
    """What one ``run_script`` call did. Timeouts, OOM and oversized output are fields here, never exceptions."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    exit_code: int | None
    stdout_json: Any | None = None
    stdout_text: str = Field("", description="first 4 KiB of stdout, as evidence when it is not JSON")
    stderr_summary: str = ""
    stderr_lines: int = Field(0, description="lines written to stderr in total (only the last ones are kept)")
    stderr_tail: list[str] = Field(default_factory=list, description="the last stderr lines kept (≤512)")
    duration_ms: int = 0
    timed_out: bool = False
    oom_killed: bool = False
    violations: list[str] = Field(default_factory=list)
    reason: str | None = Field(None, description="why the call is not ok, in words a person or model can act on")
    limit: Literal["timeout", "memory", "pids", "tmp"] | None = Field(
        None, description="the container limit the call died of, if any"
    )
    next_step: str | None = Field(None, description="the call argument or skill declaration that lifts that limit")
    script: str = Field(..., description="script path relative to the skill root, or the program run_command ran")
    container: str | None = None
    command: list[str] = Field(default_factory=list, description="the command the container ran")
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    egress: list[EgressRecord] = Field(
        default_factory=list, description="requests through the egress proxy during this call (granted skills only)"
    )

    @classmethod
    def refused(cls, script: str, reason: str, violation: str) -> ScriptResult:
        """The result shape of a call refused before any container started (CLI and tool results)."""
        return cls(ok=False, exit_code=None, script=script, reason=reason, violations=[violation])

    def command_record(self) -> CommandRecord:
        """The ``command`` evidence step of this call (cmd, exit code, output sizes, elapsed)."""
        return CommandRecord(
            cmd=self.command,
            exit_code=self.exit_code,
            stdout_bytes=self.stdout_bytes,
            stderr_bytes=self.stderr_bytes,
            elapsed_ms=self.duration_ms,
            ok=self.ok,
            container=self.container,
            limit=self.limit,
            egress=self.egress,
        )


class CommandRecord(BaseModel):
    """One container call as a ``command`` step of the evidence (the ADR's common execution frame)."""

    model_config = ConfigDict(frozen=True)

    cmd: list[str]
    exit_code: int | None
    stdout_bytes: int
    stderr_bytes: int
    elapsed_ms: int
    ok: bool
    container: str | None = None
    limit: str | None = None
    egress: list[EgressRecord] = Field(default_factory=list)


class BuildFile(BaseModel):
    """One regular file under a job's ``build/``."""

    model_config = ConfigDict(frozen=True)

    path: str = Field(..., description="relative to build/, POSIX separators")
    size: int
    sha256: str


class ImageBuild(BaseModel):
    """Outcome of ``sandbox build-image``."""

    image: str
    image_id: str
    content_hash: str
    base: Literal["public", "debootstrap"]
    base_image: str
    built: bool = Field(..., description="False when an image with the same content hash was already present")
    duration_ms: int
    tools: dict[str, str]
    browser: ImageBuild | None = Field(None, description="the browser image built FROM this one, when built too")


class ReapReport(BaseModel):
    """What one reaper pass removed."""

    containers: list[str] = Field(default_factory=list)
    volumes: list[str] = Field(default_factory=list)
    networks: list[str] = Field(default_factory=list)
    folders: list[str] = Field(default_factory=list)

    @property
    def removed(self) -> int:
        return len(self.containers) + len(self.volumes) + len(self.networks)


class SandboxBench(BaseModel):
    """``bench sandbox``: runner calls of one job against ``docker run --rm`` of the same image."""

    runner_median_ms: float
    runner_p95_ms: float
    docker_run_median_ms: float
    docker_run_p95_ms: float
    ratio_vs_docker_run: float
    job_setup_ms: float
    pairs: int
    image: str
    skill_view: str
