"""What a shared job service checks about a job, at ``submit`` and again on the worker (the ledger is input too).

A job's work is its own: its output folder is ``<output root>/<job id>`` and nothing else, its skills come from a
library the operator registered, its budgets stay within the operator's ceilings, and the state a phase reads back
from Redis (a checkpoint) must still point at the job's own folders. Each check raises a :class:`ConfigError` at
``submit`` (the line is rejected with its number) or a :class:`WorkflowError` on a worker (the job fails with the
reason, nothing is written outside).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from orchestrator.config import Settings
from orchestrator.errors import WorkflowError
from orchestrator.workflow.folders import out_folder, work_folder
from orchestrator.workflow.request import JOB_ID_PATTERN, check_job_id

LIBRARY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
DEFAULT_LIBRARY = "default"
OWNER_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
"""A producer's name (its API key's): names Redis keys and is shown to people. Matched as a whole string only."""
STACK_PATTERN = r"[0-9a-f]{1,64}"
"""A ledger's identity (``Ledger.stack_id``): it names the evidence folder ``<cache>/jobs/<stack>/``."""


class Refused(WorkflowError):
    """A job record or checkpoint that breaks a rule of the shared service."""


def registered_libraries(settings: Settings) -> dict[str, Path]:
    """Library name → folder: those the operator registered, and ``default`` (``skills_dir``) unless renamed."""
    return {DEFAULT_LIBRARY: settings.skills_dir, **settings.libraries}


def library_root(settings: Settings, name: str | None) -> Path:
    """The folder of the registered library ``name`` (``None``: the default one); refused for anything else."""
    name = name or DEFAULT_LIBRARY
    libraries = registered_libraries(settings)
    if not re.fullmatch(LIBRARY_PATTERN, name) or name not in libraries:
        raise Refused(
            f"skills: {name[:200]!r} is not a registered library (registered: {', '.join(sorted(libraries))})",
            where="skills",
            next_step="name a library the operator registered (ORCH_LIBRARIES); paths are never accepted",
        )
    return libraries[name]


def scenario_file(settings: Settings, value: str) -> Path:
    """A ``scripted:`` model's scenario: a regular YAML file inside one of ``scenario_dirs``, or refused.

    A worker reads this file and reports what is wrong with it, so an unchecked path would read any file the worker
    can (``/proc/1/environ``, another job's evidence) into a job's reason.
    """
    path = Path(value).resolve()
    inside = any(path.is_relative_to(Path(d).resolve()) for d in settings.scenario_dirs)
    if not inside or path.suffix.lower() not in (".yaml", ".yml") or not path.is_file():
        dirs = ", ".join(str(d) for d in settings.scenario_dirs) or "none"
        raise Refused(
            f"model: scenario {value[:200]!r} is not a .yaml file in a scenario folder ({dirs})",
            where="model",
            next_step="put the scenario in a folder of the setting scenario_dirs (ORCH_SCENARIO_DIRS)",
        )
    return path


def check_out(out: str | None, job_id: str | None) -> None:
    """The one rule for ``out`` (a goal line's, a job record's): nothing, or the job's own id."""
    if out is not None and out != job_id:
        raise Refused(
            f"out: output folder {str(out)[:200]!r} is not the job's own ({job_id}): a job writes only its own "
            "folder <output root>/<job id>",
            where="output",
            next_step="leave out `out`, or give the job_id you want as the folder's name",
        )


def own_out_dir(settings: Settings, job_id: str, out: str | None) -> Path:
    """``<output root>/<job id>``: the only folder a job may write; a record naming another one is refused."""
    check_job_id(job_id, where="ledger")
    check_out(out or None, job_id)  # a record without one writes the job's own folder
    root = settings.output_root.resolve()
    target = out_folder(root, job_id).resolve()
    if target.parent != root:
        raise Refused(f"output folder of {job_id} resolves outside the output root {root}", where="output")
    return target


def record_problems(record: Any) -> list[str]:
    """What is wrong with a job record read back from Redis: every field that names a folder, a key or a person
    must match its pattern as a whole string (a value ending in a newline, a path or ``..`` does not). The library
    and the scenario are checked where they are opened (:func:`library_root`, :func:`scenario_file`)."""
    checks = [
        ("job_id", record.job_id, JOB_ID_PATTERN),
        ("stack", record.stack or "0", STACK_PATTERN),
        ("owner", record.owner if record.owner is not None else "0", OWNER_PATTERN),
        ("batch", record.batch if record.batch is not None else "0", JOB_ID_PATTERN),
        ("out", record.out or record.job_id, JOB_ID_PATTERN),
    ]
    problems = [f"{name} {str(value)[:120]!r} is not a valid {name}" for name, value, pattern in checks
                if not isinstance(value, str) or not re.fullmatch(pattern, value)]
    if record.run < 1:
        problems.append(f"run {record.run} is not a run number")
    return problems


def check_record(record: Any) -> None:
    """Refuse a job record whose identifying or path-bearing fields were altered in Redis."""
    if problems := record_problems(record):
        raise Refused(
            "the job's record in Redis was altered: " + "; ".join(problems),
            where="ledger",
            next_step="protect Redis (password, ACL users) and submit the goal again",
        )


def job_work_dir(settings: Settings, job_id: str) -> Path:
    return work_folder(settings.cache_dir, check_job_id(job_id, where="ledger"))


def check_checkpoint(state: Any, job_id: str, settings: Settings) -> None:
    """A phase's saved state, read back from Redis, must still be this job's: its id, output folder, work folder
    and every input inside that work folder; its published names relative and inside."""
    problems = []
    if state.job_id != job_id:
        problems.append(f"it belongs to job {str(state.job_id)[:100]!r}")
    if Path(state.out_dir).resolve() != own_out_dir(settings, job_id, None):
        problems.append(f"its output folder {str(state.out_dir)[:200]!r} is not the job's own")
    work = job_work_dir(settings, job_id).resolve()
    if Path(state.work_dir).resolve() != work:
        problems.append(f"its work folder {str(state.work_dir)[:200]!r} is not the job's own")
    for path in state.request.inputs:
        if not Path(path).resolve().is_relative_to(work):
            problems.append(f"input {str(path)[:200]!r} lies outside the job's folder")
    for rel in state.published:
        parts = Path(rel).parts
        if Path(rel).is_absolute() or ".." in parts or not parts:
            problems.append(f"published name {str(rel)[:200]!r} leaves the output folder")
    if problems:
        raise Refused(
            "the job's saved state in Redis was altered: " + "; ".join(problems),
            where="checkpoint",
            next_step="protect Redis (password, ACL users) and submit the goal again",
        )
