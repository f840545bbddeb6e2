"""Plan: choose skills from the L1 catalog for a goal, order them, state expected outputs and evaluation points."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any, get_args

from pydantic import BaseModel, Field, ValidationError, field_validator

from orchestrator.errors import ModelError, WorkflowError
from orchestrator.llm.interface import ChatModel, Message, ModelResponse
from orchestrator.prompts import load_prompt
from orchestrator.skills.models import SkillSummary
from orchestrator.validate.rules import ContractRules, ExpectedOutputs, Kind, RequiredFile


class PlannedOutput(BaseModel):
    path: str
    kind: str = "any"
    slides: int | None = Field(None, ge=1)


class PlanStep(BaseModel):
    skill: str
    why: str = ""
    expected: str = ""
    outputs: list[PlannedOutput] = []

    @field_validator("outputs", mode="before")
    @classmethod
    def _outputs_may_be_file_names(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"path": v, "kind": PurePosixPath(v).suffix or "any"} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("expected", "why", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return "; ".join(map(str, value)) if isinstance(value, list) else value

    def expected_outputs(self) -> ExpectedOutputs:
        required = [
            RequiredFile.model_validate(
                {
                    "path": o.path.strip().removeprefix("./").removeprefix("build/"),
                    "kind": _kind(o.kind),
                    "slides": o.slides,
                }
            )
            for o in self.outputs
        ]
        return ExpectedOutputs(description=self.expected, rules=ContractRules(required=required))


class Plan(BaseModel):
    steps: list[PlanStep] = Field(min_length=1)
    evaluation: list[str] = []

    @field_validator("evaluation", mode="before")
    @classmethod
    def _evaluation_may_be_one_text(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class PlanOutcome(BaseModel):
    plan: Plan
    tokens_in: int = 0
    tokens_out: int = 0
    model_calls: int = 0
    duration_ms: int = 0
    attempts: list[str] = []


def _kind(kind: str) -> str:
    """A planner's free-form kind as a rules ``Kind`` (unknown kinds are not checked: ``any``)."""
    kind = kind.lower().strip(".")
    kind = {"md": "markdown", "txt": "text", "yml": "yaml", "jpg": "jpeg"}.get(kind, kind)
    return kind if kind in get_args(Kind) else "any"


def catalog_text(skills: list[SkillSummary]) -> str:
    return "\n".join(f"- {s.id}: {s.name} — {s.description}" for s in skills)


def make_plan(
    goal: str,
    skills: list[SkillSummary],
    model: ChatModel,
    *,
    inputs: Sequence[str] = (),
    constraints: Sequence[str] = (),
) -> PlanOutcome:  # type: ignore[assignment]
    """Ask the model for a plan; a malformed or unknown-skill answer is retried once with the reason."""
    if not skills:
        raise WorkflowError(
            "no usable skills were found",
            where="plan",
            next_step="check --skills DIR (python -m orchestrator skills list --root DIR)",
        )
    known = {s.id for s in skills}
    lines = [f"Goal: {goal}"]
    if inputs:
        lines.append("Input files: " + ", ".join(inputs))
    if constraints:
        lines.append("Constraints: " + "; ".join(constraints))
    lines.append("Skills catalog (L1):\n" + catalog_text(skills))
    messages = [
        Message(role="system", content=load_prompt("plan_system")),
        Message(role="user", content="\n".join(lines)),
    ]
    outcome = PlanOutcome(plan=Plan(steps=[PlanStep(skill="-")]))
    started = time.monotonic()
    for attempt in range(2):
        response = _call(model, messages)
        outcome.tokens_in += response.usage.prompt_tokens
        outcome.tokens_out += response.usage.completion_tokens
        outcome.model_calls += 1
        problem, plan = _parse(response.content or "", known)
        if plan is not None:
            outcome.plan = plan
            outcome.duration_ms = int((time.monotonic() - started) * 1000)
            return outcome
        outcome.attempts.append(problem)
        if attempt == 0:
            messages += [
                response.as_message(),
                Message(
                    role="user",
                    content=f"That plan cannot be used: {problem}. Answer again with the JSON object only.",
                ),
            ]
    raise WorkflowError(
        f"the model gave no usable plan: {outcome.attempts[-1]}",
        where="plan",
        next_step="check that the skills' descriptions match the goal, or use a stronger model",
        attempts=outcome.attempts,
    )


def _call(model: ChatModel, messages: list[Message]) -> ModelResponse:
    try:
        return model.complete(messages, purpose="plan", json_response=True)
    except ModelError as e:
        e.where = e.where or "plan"
        raise


def _parse(text: str, known: set[str]) -> tuple[str, Plan | None]:
    try:
        data: Any = _normalise(json.loads(_strip_fence(text)))
        plan = Plan.model_validate(data)
    except json.JSONDecodeError as e:
        return f"not JSON ({e})", None
    except ValidationError as e:
        return f"not the plan shape ({e.errors()[0]['loc']}: {e.errors()[0]['msg']})", None
    unknown = [s.skill for s in plan.steps if s.skill not in known]
    if unknown:
        return f"unknown skill ids {unknown}; choose from {sorted(known)}", None
    return "", plan


def _normalise(data: Any) -> Any:
    """Accept the plan shapes models commonly give: a bare list of steps, ``{"skills": [...]}``, ids as strings,
    and ``id``/``skill_id`` for ``skill``; anything else is left for validation to reject with its reason."""
    if isinstance(data, list):
        data = {"steps": data}
    if isinstance(data, dict) and "steps" not in data and isinstance(data.get("skills"), list):
        data = {**{k: v for k, v in data.items() if k != "skills"}, "steps": data["skills"]}
    if isinstance(data, dict) and isinstance(data.get("steps"), list):
        steps = []
        for step in data["steps"]:
            if isinstance(step, str):
                step = {"skill": step}
            elif isinstance(step, dict) and "skill" not in step:
                for key in ("id", "skill_id", "name"):
                    if key in step:
                        step = {**{k: v for k, v in step.items() if k != key}, "skill": step[key]}
                        break
            steps.append(step)
        data = {**data, "steps": steps}
    return data


def _strip_fence(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text
