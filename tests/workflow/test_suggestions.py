"""When no skill fits, the closest skills are suggested ranked by the goal, whatever the library's size (issue 31:
a library of twenty or fewer skills offered its first three ids, not the skill whose description matches)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config import load_settings
from orchestrator.llm.interface import Message, ModelResponse, Purpose, ToolSpec
from orchestrator.skills.loader import SkillLibrary
from orchestrator.testing import FunctionModel, json_response, tool_call_response
from orchestrator.testing.memory_sandbox import InMemorySandbox
from orchestrator.workflow.embedded import run_goal
from orchestrator.workflow.request import GoalRequest
from orchestrator.workflow.runtime import Runtime

SKILLS = {
    "brand-guidelines": "Acme's brand rules: colours, fonts, logo use, as a machine-readable brand.json.",
    "csv-summary": "Total a CSV column per category and draw a bar chart of the totals.",
    "pptx": "Build slide decks (.pptx) from an outline.",
    "zz-meeting-notes": "Turn a meeting transcript into minutes: decisions, action items, owners and due dates.",
}


def _no_fit(messages: list[Message], tools: list[ToolSpec], purpose: Purpose) -> ModelResponse:
    return json_response({"steps": [], "no_fit": {"reason": "no skill writes minutes", "missing": ["minutes"]}})


@pytest.mark.parametrize("padding", [0, 30], ids=["small-library", "shortlisted-library"])
def test_the_suggestions_are_the_skills_closest_to_the_goal(tmp_path: Path, padding: int) -> None:
    skills = dict(SKILLS)
    skills.update({f"aa-filler-{i:02d}": f"Convert image format number {i} to another one." for i in range(padding)})
    for name, description in skills.items():
        folder = tmp_path / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{description}\n")
    settings = load_settings(cache_dir=tmp_path / "cache", selection={"semantic": False})
    rt = Runtime(settings=settings, model=FunctionModel(_no_fit), library=SkillLibrary(tmp_path / "skills"),
                 sandbox=InMemorySandbox())
    goal = "Write up the minutes of the meeting in transcript.txt, with who does what by when"
    result = run_goal(GoalRequest(goal=goal), tmp_path / "out", rt)

    assert result.status == "unmet"
    assert result.suggestions[0].id == "zz-meeting-notes"
    assert "closest skills: zz-meeting-notes" in result.unmet[0].next_step


NOTES_BODY = """# Notes

1. Read the material.
2. Write `build/notes.md` with `write_artifact`: a title, then one bullet per decision.
3. Finish with notes.md as the output.
"""


def test_a_retry_says_what_is_missing_and_the_step_the_skill_gives_for_it(tmp_path: Path) -> None:
    def model_fn(messages: list[Message], tools: list[ToolSpec], purpose: Purpose) -> ModelResponse:
        if purpose == "plan":
            return json_response({"steps": [{"skill": "notes", "outputs": ["notes.md"]}], "evaluation": ["notes"]})
        if purpose != "act":
            return json_response({"pass": True, "missing": [], "violations": [], "rationale": "ok"})
        retried = any("A previous attempt ended" in (m.content or "") for m in messages)
        if not retried:
            return tool_call_response("list_files", glob="*")
        if not any(m.role == "tool" for m in messages):
            return tool_call_response("write_artifact", path="notes.md", text="# Notes\n- A\n")
        return tool_call_response("finish", summary="written", outputs=["build/notes.md"])

    folder = tmp_path / "skills" / "notes"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: notes\ndescription: Write notes.md.\n---\n" + NOTES_BODY)
    model = FunctionModel(model_fn)
    rt = Runtime(settings=load_settings(cache_dir=tmp_path / "cache"), model=model,
                 library=SkillLibrary(tmp_path / "skills"), sandbox=InMemorySandbox())
    result = run_goal(GoalRequest(goal="write the notes"), tmp_path / "out", rt)

    assert result.status == "done" and result.skills[0].status == "done"
    retry = next(m.content or "" for c in model.calls for m in c.messages if "A previous attempt" in (m.content or ""))
    assert "Still to make: notes.md. The skill says: Write build/notes.md with write_artifact" in retry
