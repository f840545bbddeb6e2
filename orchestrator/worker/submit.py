"""The producer side: JSONL goal lines, validated at the edge, stored in the ledger and queued for the workers.

Every path in a line (skills, inputs, a scripted model's scenario) is made absolute here, because workers on other
hosts see the same shared folders at the same paths, not the producer's working directory.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.config import Budgets, Settings
from orchestrator.errors import ConfigError
from orchestrator.llm.factory import parse_model_spec
from orchestrator.llm.scenario import load_scenario, scenario_inputs
from orchestrator.tracing import new_ids
from orchestrator.worker.ledger import JobRecord, Ledger
from orchestrator.worker.limits import hard_limit_s, visibility_timeout_s

JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
"""Job ids name folders and Redis keys: letters, digits, ``.``, ``_`` and ``-`` only, at most 100."""
MAX_LINE_BYTES = 1_000_000


class BudgetOverrides(BaseModel):
    """Per-goal budgets; each one left out keeps the deployment's setting."""

    model_config = ConfigDict(extra="forbid")

    max_tool_calls: int | None = Field(None, ge=1)
    time_budget_ms: int | None = Field(None, ge=1)
    token_budget: int | None = Field(None, ge=1)
    script_timeout_s: float | None = Field(None, gt=0)
    disk_write_limit_mb: int | None = Field(None, ge=1)

    def applied_to(self, limits: Budgets) -> Budgets:
        return limits.model_copy(update=self.model_dump(exclude_none=True))


class GoalLine(BaseModel):
    """One line of a goals file. Only ``goal`` is required."""

    model_config = ConfigDict(extra="forbid")

    goal: str = Field(min_length=1, max_length=20_000)
    skills: str | None = None
    model: str | None = None
    job_id: str | None = Field(None, pattern=JOB_ID_PATTERN)
    inputs: list[str] = Field(default_factory=list, max_length=100)
    constraints: list[str] = Field(default_factory=list, max_length=100)
    budgets: BudgetOverrides = BudgetOverrides()
    out: str | None = None


class Rejected(BaseModel):
    line: int
    reason: str


class Accepted(BaseModel):
    line: int
    job_id: str
    duplicate: bool = False
    """The job id was submitted before: nothing new was queued (a job id runs once)."""


class SubmitReport(BaseModel):
    accepted: list[Accepted] = []
    rejected: list[Rejected] = []

    @property
    def exit_code(self) -> int:
        return 1 if self.rejected else 0


Enqueue = Callable[[JobRecord, str], None]
"""``enqueue(record, phase)`` sends the phase's task."""


def parse_lines(lines: Iterable[str], settings: Settings) -> tuple[list[tuple[int, GoalLine]], list[Rejected]]:
    """Good lines (with their numbers) and rejected ones with the reason; blank and ``#`` lines are skipped."""
    good: list[tuple[int, GoalLine]] = []
    bad: list[Rejected] = []
    for number, text in enumerate(lines, 1):
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            line = _parse_line(stripped)
            good.append((number, resolve_line(line, settings)))
        except ConfigError as e:
            bad.append(Rejected(line=number, reason=e.message))
    return good, bad


def _parse_line(text: str) -> GoalLine:
    if len(text.encode("utf-8", errors="replace")) > MAX_LINE_BYTES:
        raise ConfigError(f"line is longer than {MAX_LINE_BYTES} bytes")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"not JSON: {e.msg} at column {e.colno}") from e
    if not isinstance(data, dict):
        raise ConfigError("a goal line must be a JSON object with at least a `goal`")
    try:
        return GoalLine.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'line'}: {err['msg']}" for err in e.errors())
        raise ConfigError(problems) from e


def resolve_line(line: GoalLine, settings: Settings) -> GoalLine:
    """The line with absolute paths, checked: skills folder, inputs, scenario, ``out`` inside the output root."""
    skills = Path(line.skills) if line.skills else settings.skills_dir
    if not skills.is_dir():
        raise ConfigError(f"skills: folder not found: {skills}")
    model = line.model or settings.model.name
    kind, value = parse_model_spec(model)
    wanted = list(line.inputs)
    if kind == "scripted":
        scenario = Path(value)
        if not scenario.is_file():
            raise ConfigError(f"model: scenario file not found: {scenario}")
        model = f"scripted:{scenario.resolve()}"
        if not wanted:  # as `run` does: a scenario may name the goal's input files (relative to itself)
            wanted = [str(p) for p in scenario_inputs(load_scenario(scenario))]
    inputs = []
    for item in wanted:
        path = Path(item)
        if not path.is_file():
            raise ConfigError(f"inputs: file not found: {item}")
        inputs.append(str(path.resolve()))
    out = relative_out(line.out, settings.output_root) if line.out is not None else None
    limits = line.budgets.applied_to(settings.limits)
    longest = hard_limit_s(settings.model_copy(update={"limits": limits}), "reflect")
    if longest > visibility_timeout_s(settings):
        raise ConfigError(
            f"budgets: a phase could run {longest:.0f} s, longer than the broker's visibility timeout "
            f"({visibility_timeout_s(settings):.0f} s); lower time_budget_ms"
        )
    return line.model_copy(
        update={"skills": str(skills.resolve()), "model": model, "inputs": inputs, "out": out}
    )


def relative_out(out: str, output_root: Path) -> str:
    """``out`` as a path relative to the output root; refused when it would land outside it (or on it)."""
    root = output_root.resolve()
    candidate = Path(out)
    target = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if target == root or not target.is_relative_to(root):
        raise ConfigError(f"out: {out} is outside the output root {root}")
    return target.relative_to(root).as_posix()


def submit_lines(
    lines: Iterable[str],
    settings: Settings,
    ledger: Ledger,
    enqueue: Enqueue,
    *,
    new_job_id: Callable[[], str],
) -> SubmitReport:
    """Queue every good line; rejected lines are reported with their numbers and reasons."""
    good, rejected = parse_lines(lines, settings)
    report = SubmitReport(rejected=rejected)
    for number, line in good:
        job_id = line.job_id or new_job_id()
        trace_id, span_id = new_ids()
        record = JobRecord(
            job_id=job_id,
            goal=line.goal,
            submitted_at=time.time(),
            trace_id=trace_id,
            span_id=span_id,
            request=line.model_dump(mode="json"),
            out=line.out or job_id,
        )
        created = ledger.create(record)
        if created:
            enqueue(record, "plan")
        report.accepted.append(Accepted(line=number, job_id=job_id, duplicate=not created))
    return report


def request_of(record: JobRecord) -> dict[str, Any]:
    return dict(record.request)
