"""What a person asks for, one way for ``run`` and for ``submit``: the goal request, parsed and checked at the edge.

:class:`GoalRequest` is both a goal line (``submit``) and what ``run``'s options say, with one set of rules: the goal's
length, the job id's characters, the budgets (within the operator's ceilings), a scripted scenario's defaults (its
goal and inputs), read through the model-spec parser. ``run`` and workers apply budgets the same way
(:func:`budgeted`); the goal machine keeps the request in its state.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from orchestrator.config import Budgets, Settings
from orchestrator.errors import ConfigError, WorkflowError
from orchestrator.llm.factory import parse_model_spec
from orchestrator.llm.scenario import Scenario, load_scenario, scenario_inputs

MAX_GOAL_CHARS = 8000
"""One limit for every goal, from ``run`` or a goal line: longer material goes in as an input file."""
JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
"""Job ids name folders and Redis keys: letters, digits, ``.``, ``_`` and ``-`` only, at most 100."""
MAX_LIST_ITEMS = 100
Response = Literal["SUMMARY", "SCORED"]


def job_id_ok(job_id: object) -> bool:
    """True when ``job_id`` can name a job (its folder and its Redis keys)."""
    return isinstance(job_id, str) and re.fullmatch(JOB_ID_PATTERN, job_id) is not None


def check_job_id(job_id: str, *, where: str = "inputs") -> str:
    """``job_id`` if it can name a job, else :class:`WorkflowError` (``run``'s goal, a job record read back)."""
    if not job_id_ok(job_id):
        raise WorkflowError(
            f"job id {str(job_id)[:120]!r} cannot name a job",
            where=where,
            next_step="use letters, digits, '.', '_' and '-' only (at most 100, not starting with '.' or '-')",
        )
    return job_id


class BudgetOverrides(BaseModel):
    """Per-goal budgets (``budgets`` in a goal line, ``run --budget KEY=VALUE``); each left out keeps the setting."""

    model_config = ConfigDict(extra="forbid")

    max_tool_calls: int | None = Field(None, ge=1)
    time_budget_ms: int | None = Field(None, ge=1)
    token_budget: int | None = Field(None, ge=1)
    script_timeout_s: float | None = Field(None, gt=0)
    disk_write_limit_mb: int | None = Field(None, ge=1)
    goal_token_budget: int | None = Field(None, ge=1)
    goal_model_calls: int | None = Field(None, ge=1)

    def applied_to(self, limits: Budgets) -> Budgets:
        return limits.model_copy(update=self.model_dump(exclude_none=True))

    def over_ceilings(self, settings: Settings) -> list[str]:
        """``budget=value is over the ceiling N`` for each asked budget above the operator's ceiling."""
        ceilings = settings.ceilings
        asked = self.model_dump(exclude_none=True)
        return [
            f"{name}={asked[name]} is over the ceiling {getattr(ceilings, name)}"
            for name in type(ceilings).model_fields
            if name in asked and asked[name] > getattr(ceilings, name)
        ]


GRANT_FIELDS = frozenset({"egress", "grants", "network", "secrets", "hosts", "extra_hosts", "upstream_ca_file"})
"""Fields a goal line might use to ask for network or secrets: refused by name (any other unknown field is too)."""


class GoalRequest(BaseModel):
    """One goal: a goal line, or ``run``'s options. Only ``goal`` is required."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    goal: str
    skills: str | None = None
    """``run``: the skills folder; a goal line: a registered library's name."""
    model: str | None = None
    job_id: str = ""
    inputs: list[Path] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    constraints: list[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    budgets: BudgetOverrides = BudgetOverrides()
    out: str | None = None
    response: Response | None = None
    """How the result answers (``supervisor.response`` when not given): SUMMARY ``answer`` or SCORED ``scores``."""

    @model_validator(mode="before")
    @classmethod
    def _grants_nothing(cls, data: Any) -> Any:
        """A goal line is the producer's: network and secrets are granted only by the operator's settings."""
        if isinstance(data, dict) and (asked := sorted(GRANT_FIELDS & {str(k).lower() for k in data})):
            raise ValueError(
                f"a goal cannot grant itself network or secrets ({', '.join(asked)}): the operator grants them "
                "per library or skill in the settings' egress section (ORCH_EGRESS)"
            )
        return data

    @field_validator("goal")
    @classmethod
    def _goal_is_text_of_a_sane_length(cls, goal: str) -> str:
        if not goal.strip():
            raise ValueError("the goal is empty")
        if len(goal) > MAX_GOAL_CHARS:
            raise ValueError(f"the goal is {len(goal)} characters long; at most {MAX_GOAL_CHARS} are accepted")
        try:
            goal.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError("the goal is not valid UTF-8 text") from e
        return goal

    @field_validator("response", mode="before")
    @classmethod
    def _response_in_any_case(cls, response: object) -> object:
        return response.upper() if isinstance(response, str) else response  # as `run --response scored` takes it

    @field_validator("job_id", mode="before")
    @classmethod
    def _job_id_names_a_job(cls, job_id: object) -> object:
        if job_id is None or job_id == "":
            return ""
        if not job_id_ok(job_id):
            raise ValueError(
                f"job id {str(job_id)[:120]!r} cannot name a job: use letters, digits, '.', '_' and '-' only "
                "(at most 100, not starting with '.' or '-')"
            )
        return job_id


def scenario_path(model_spec: str) -> Path | None:
    """The scenario file a ``scripted:`` model names (None for any other model), read by the model-spec parser."""
    kind, value = parse_model_spec(model_spec)
    return Path(value) if kind == "scripted" else None


def scenario_of(model_spec: str) -> Scenario | None:
    """The scenario a ``scripted:`` model plays (None for any other model)."""
    path = scenario_path(model_spec)
    return load_scenario(path) if path is not None else None


def default_inputs(model_spec: str) -> list[Path]:
    """A scripted scenario's own ``inputs:`` (the goal's input files when none are given)."""
    scenario = scenario_of(model_spec)
    return scenario_inputs(scenario) if scenario is not None else []


def parse_budgets(pairs: list[str]) -> BudgetOverrides:
    """``KEY=VALUE`` words (``run --budget``) as budgets; :class:`ConfigError` naming the bad one."""
    values: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key.strip() not in BudgetOverrides.model_fields:
            known = ", ".join(BudgetOverrides.model_fields)
            raise ConfigError(
                f"--budget {pair!r}: expected KEY=VALUE with KEY one of {known}",
                where="cli",
                next_step="e.g. --budget max_tool_calls=12 --budget time_budget_ms=60000",
            )
        values[key.strip()] = value.strip()
    try:
        return BudgetOverrides.model_validate(values)
    except ValidationError as e:
        why = "; ".join(f"{'.'.join(map(str, err['loc']))}={err['input']!s:.40}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"--budget {why}", where="cli", next_step="give whole positive numbers") from e


def budgeted(settings: Settings, budgets: BudgetOverrides) -> Settings:
    """``settings`` with a goal's budgets applied; :class:`ConfigError` when one is over the operator's ceilings."""
    if problems := budgets.over_ceilings(settings):
        raise ConfigError(
            "budgets: " + "; ".join(problems) + " (the operator's ceilings)",
            where="budgets",
            next_step="ask within the ceilings (ORCH_CEILINGS__…)",
        )
    return settings.model_copy(update={"limits": budgets.applied_to(settings.limits)})
