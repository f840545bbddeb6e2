"""A raised error ends the goal ``failed``; its code (an enum on the error, not the text) reaches the result."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config import load_settings
from orchestrator.errors import ModelError, ModelErrorCode
from orchestrator.skills.loader import SkillLibrary
from orchestrator.testing import FunctionModel
from orchestrator.workflow.embedded import run_goal
from orchestrator.workflow.request import GoalRequest
from orchestrator.workflow.runtime import Runtime


def test_a_model_timeout_at_the_plan_fails_the_goal_with_its_code(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: notes\ndescription: Write notes.\n---\nWrite notes.\n")

    def times_out(messages, tools, purpose):  # noqa: ANN001, ANN202
        raise ModelError("the model server did not answer", code=ModelErrorCode.TIMEOUT, retryable=True)

    rt = Runtime(
        settings=load_settings(cache_dir=tmp_path / "cache"),
        model=FunctionModel(times_out),
        library=SkillLibrary(tmp_path / "skills"),
    )
    result = run_goal(GoalRequest(goal="write notes"), tmp_path / "out", rt)
    assert result.status == "failed" and result.error is not None
    assert result.error.where == "plan" and result.error.code == "timeout"
    assert result.model_dump(mode="json")["error"]["code"] == ModelErrorCode.TIMEOUT.value
