"""Retries and Micro-Reflects that help (issue 31): the message says what is still missing and the step the skill's
SKILL.md gives for it; a Micro-Reflect that only echoes the runtime's prompt is no re-plan; re-reads answered
"already sent" are not turns without progress."""

from __future__ import annotations

from pathlib import Path

from act_helpers import act, expect_files

from orchestrator.act.hints import next_actions
from orchestrator.prompts import load_prompt
from orchestrator.testing import ScriptedModel, text_response, tool_call_response

REPO = Path(__file__).resolve().parents[2]
NOTES_BODY = """
# Notes

Some background on notes. The result is `build/notes.md`.

## Workflow

1. Read the material with `read_file`.
2. Write `build/notes.md` with `write_artifact`: a title line, then one bullet
   per decision.
3. Finish with notes.md as the output.
"""


def test_the_step_the_skill_gives_for_a_missing_output_is_found():
    body = (REPO / "skills" / "meeting-notes" / "SKILL.md").read_text(encoding="utf-8")
    [actions] = next_actions(body, ["actions.json"])
    assert actions.startswith("Write build/actions.json with write_artifact")
    [minutes] = next_actions(body, ["build/meeting-notes.md"])
    assert minutes.startswith("Write the minutes with template_expand")
    assert next_actions(body, ["video.mp4"]) == []
    [notes] = next_actions(NOTES_BODY, ["notes.md"])
    assert notes == ("Write build/notes.md with write_artifact: a title line, then one bullet per decision.")


def test_a_micro_reflect_names_what_is_missing_and_the_skills_step_and_ignores_an_echo(
        write_skill, skills_root, settings, tmp_path):
    write_skill("notes", NOTES_BODY)
    echo = text_response(load_prompt("micro_reflect"))
    model = ScriptedModel([
        tool_call_response("list_files", glob="*.md"),
        tool_call_response("list_files", glob="**/*"),
        echo,
        tool_call_response("write_artifact", path="notes.md", text="# Notes\n- we chose A\n"),
        tool_call_response("finish", summary="notes written", outputs=["build/notes.md"]),
    ])
    result = act("notes", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("notes.md", kind="markdown"))
    assert model.calls[2].purpose == "reflect"
    note = model.calls[3].messages[-1].content or ""
    assert "no re-plan of your own" in note and "two turns produced no new" not in note
    assert "Still missing: notes.md" in note and "Write build/notes.md with write_artifact" in note
    assert result.status == "done"


def test_re_reads_of_what_was_already_sent_are_not_turns_without_progress(write_skill, skills_root, settings,
                                                                          tmp_path):
    write_skill("notes", NOTES_BODY)
    model = ScriptedModel([
        tool_call_response("read_skill_md"),
        tool_call_response("read_skill_md"),
        tool_call_response("write_artifact", path="notes.md", text="# Notes\n- we chose A\n"),
        tool_call_response("finish", summary="notes written", outputs=["build/notes.md"]),
    ])
    result = act("notes", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("notes.md", kind="markdown"))
    assert [c.purpose for c in model.calls] == ["act"] * 4  # no Micro-Reflect spent on two "unchanged" answers
    assert result.status == "done" and result.metrics.micro_reflects == 0
