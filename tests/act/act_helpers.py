"""Helpers for the Act specifications."""

from __future__ import annotations

from pathlib import Path

from orchestrator.act.act_io import ActRequest, ActResult
from orchestrator.act.blackboard import Blackboard
from orchestrator.act.engine import execute_skill
from orchestrator.act.memo import MemoStore
from orchestrator.config import Budgets, Settings
from orchestrator.skills.loader import SkillLibrary
from orchestrator.validate.rules import ContractRules, ExpectedOutputs, RequiredFile


def expect_files(*paths: str, description: str = "", **extra: object) -> ExpectedOutputs:
    required = [RequiredFile.model_validate({"path": p, **extra}) for p in paths]
    return ExpectedOutputs(description=description, rules=ContractRules(required=required))


def act(
    skill_id: str,
    model: object,
    *,
    skills_root: Path,
    settings: Settings,
    out_dir: Path,
    expected: ExpectedOutputs | None = None,
    budgets: Budgets | None = None,
    sandbox: object | None = None,
    store: MemoStore | None = None,
    inputs_dir: Path | None = None,
    qa_mode: str = "final",
) -> ActResult:
    request = ActRequest(
        goal="test goal",
        skill_id=skill_id,
        expected=expected or ExpectedOutputs(),
        budgets=budgets or Budgets(),
        qa_mode=qa_mode,
        job_id="orchtest-act",  # type: ignore[arg-type]
        inputs_dir=inputs_dir,
    )
    return execute_skill(
        request,
        model=model,
        library=SkillLibrary(skills_root),
        settings=settings,  # type: ignore[arg-type]
        out_dir=out_dir,
        sandbox=sandbox,
        blackboard=Blackboard(),
        store=store,
    )
