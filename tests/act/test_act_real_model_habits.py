"""What small real models do in an Act, and what the Act does about it: invented paths are the model's mistakes,
unreadable and cut calls are errors it can fix, and the same failing call a third time ends the Act as stalled."""

from __future__ import annotations

import json

from act_helpers import act, expect_files

from orchestrator.act.act_io import ActRequest
from orchestrator.act.engine import execute_skill
from orchestrator.config import Budgets
from orchestrator.llm.interface import ModelResponse, ToolCall, UnreadCall, Usage
from orchestrator.skills.loader import SkillLibrary
from orchestrator.testing import ScriptedModel, text_response, tool_call_response

BRAND_BODY = """
# Brand

Write `brand.json` following [the schema](brand.schema.json). Details are in [the rules](rules/colours.md).
"""
SCHEMA = '{"type": "object", "required": ["name"]}'


REFLECT = text_response("Next: write brand.json.")


def _tool_results(model: ScriptedModel, call: int) -> list[dict]:
    return [json.loads(m.content or "") for m in model.calls[call].messages if m.role == "tool"]


def _brand(write_skill) -> None:
    write_skill("brand", BRAND_BODY, files={"brand.schema.json": SCHEMA, "rules/colours.md": "Navy.\n"})


def test_a_path_the_model_invents_is_its_error_with_the_nearest_real_files(write_skill, skills_root, settings,
                                                                           tmp_path):
    _brand(write_skill)
    model = ScriptedModel([
        tool_call_response("read_ref", path="brand-guidelines/brand-guidelines.md"),
        tool_call_response("read_ref", path="schema.json"),
        REFLECT,
        tool_call_response("write_artifact", path="brand.json", text='{"name": "Acme"}'),
        tool_call_response("finish", summary="done", outputs=["build/brand.json"]),
    ])
    result = act("brand", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("brand.json", kind="json"))
    [invented] = _tool_results(model, 1)
    assert invented["ok"] is False and "no such file in the skill" in invented["error"]
    assert "brand-guidelines/brand-guidelines.md" in invented["error"]
    assert "missing" not in invented
    [guessed] = _tool_results(model, 3)[1:]
    assert guessed["nearest"][0] == "brand.schema.json"
    assert result.status == "done"
    assert not any("missing from the skill" in u.why for u in result.unmet)


def test_only_a_reference_the_skill_writes_is_the_skills_missing_reference(write_skill, skills_root, settings,
                                                                           tmp_path):
    write_skill("brand", "Follow [the rules](rules/missing.md).")
    model = ScriptedModel([
        tool_call_response("read_ref", path="rules/missing.md"),
        tool_call_response("read_ref", path="rules/invented.md"),
        text_response("I cannot go on."),
        text_response("Still nothing."),
    ] + [text_response("…")] * 3)
    result = act("brand", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("brand.json"))
    written, invented = _tool_results(model, 2)
    assert written["missing"] == "rules/missing.md" and "hint" in written
    assert "no such file in the skill" in invented["error"]
    assert result.exit_reason == "missing_reference"
    blamed = [u.what for u in result.unmet if u.why == "missing from the skill"]
    assert blamed == ["reference rules/missing.md"]


def test_the_skill_id_or_the_sandbox_mount_in_front_of_a_real_file_still_reads_it(write_skill, skills_root,
                                                                                   settings, tmp_path):
    _brand(write_skill)
    model = ScriptedModel([
        tool_call_response("read_ref", path="brand/brand.schema.json"),
        tool_call_response("read_file", path="/skill/rules/colours.md"),
        tool_call_response("finish", summary="read"),
    ])
    act("brand", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    schema, rules = _tool_results(model, 2)
    assert schema["ok"] and schema["path"] == "brand.schema.json" and schema["text"] == SCHEMA
    assert rules["ok"] and rules["text"] == "Navy.\n"


def _unread(name: str, detail: str, *, cut: bool = False) -> ModelResponse:
    text = f'{{"name": "{name}", "arguments": {{"path": "brand.json", "text": "{{\\"na'
    return ModelResponse(content=text, unread_calls=(UnreadCall(name=name, detail=detail, cut=cut, text=text),),
                         finish_reason="length" if cut else "stop")


def test_an_unreadable_or_cut_call_is_an_error_the_model_fixes(write_skill, skills_root, settings, tmp_path):
    _brand(write_skill)
    model = ScriptedModel([
        _unread("write_artifact", "cut off at max_tokens", cut=True),
        _unread("write_artifact", "Expecting ',' delimiter at line 1 column 40"),
        REFLECT,
        tool_call_response("write_artifact", path="brand.json", text='{"name": "Acme"}'),
        tool_call_response("finish", summary="done", outputs=["build/brand.json"]),
    ])
    result = act("brand", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("brand.json", kind="json"))
    cut_error = model.calls[1].messages[-1]
    assert cut_error.role == "user"
    assert "cut off at 4096 tokens inside a call of write_artifact" in (cut_error.content or "")
    assert '{"name": "<tool>", "arguments": {...}}' in (cut_error.content or "")
    assert model.calls[2].purpose == "reflect"  # two turns without a new artifact: the one Micro-Reflect
    assert "could not be read (Expecting ',' delimiter" in (model.calls[2].messages[-2].content or "")
    assert model.calls[1].messages[-2].role == "assistant"  # what it wrote stays in the history
    assert result.status == "done"
    failed = [r for r in result.evidence_summary if not r.ok]
    assert [r.tool for r in failed] == ["write_artifact", "write_artifact"]


def test_the_same_failing_call_a_third_time_ends_the_act_as_stalled(write_skill, skills_root, settings, tmp_path):
    _brand(write_skill)
    again = tool_call_response("read_ref", path="brand-guidelines.md")
    model = ScriptedModel([again, again, REFLECT, again])
    result = act("brand", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("brand.json"))
    model.assert_all_used()
    assert result.status == "unmet" and result.exit_reason == "stalled"
    assert result.metrics.tool_calls == 3
    first = result.unmet[0]
    assert "the same failing call 3 times" in first.why and "brand-guidelines.md" in first.why
    assert "no such file in the skill" in first.why
    assert "model" in first.next_step
    assert not any("missing from the skill" in u.why for u in result.unmet)


def test_a_failing_call_repeated_after_progress_is_not_a_stall(write_skill, skills_root, settings, tmp_path):
    _brand(write_skill)
    validate = tool_call_response("validate", path="build/brand.json", schema="brand.schema.json")
    model = ScriptedModel([
        tool_call_response("write_artifact", path="brand.json", text="{}"),
        validate,
        tool_call_response("write_artifact", path="brand.json", text='{"x": 1}'),
        validate,
        tool_call_response("write_artifact", path="brand.json", text='{"y": 2}'),
        validate,
        tool_call_response("write_artifact", path="brand.json", text='{"name": "Acme"}'),
        tool_call_response("finish", summary="done", outputs=["build/brand.json"]),
    ])
    result = act("brand", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("brand.json", kind="json"))
    assert sum(not r.ok for r in result.evidence_summary) == 3
    assert result.status == "done"


def test_repeated_unreadable_calls_end_the_act_within_its_budget(write_skill, skills_root, settings, tmp_path):
    _brand(write_skill)
    unreadable = _unread("read_ref", "Expecting value")
    model = ScriptedModel([unreadable, unreadable, REFLECT, unreadable])
    result = act("brand", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("brand.json"), budgets=Budgets(max_tool_calls=24))
    assert result.exit_reason == "stalled" and result.metrics.tool_calls == 3



def test_an_act_stops_where_the_goals_budget_ends(write_skill, skills_root, settings, tmp_path):
    _brand(write_skill)
    reading = [tool_call_response("read_ref", path=p) for p in ("brand.schema.json", "rules/colours.md", "SKILL.md")]
    model = ScriptedModel([*reading[:2]])
    request = ActRequest(goal="g", skill_id="brand", expected=expect_files("brand.json"), goal_calls_left=2,
                         goal_tokens_left=10_000, job_id="orchtest-goal-budget")
    result = execute_skill(request, model=model, library=SkillLibrary(skills_root), settings=settings,
                           out_dir=tmp_path / "out")
    assert result.status == "unmet" and result.exit_reason == "budget_goal"
    assert "the goal's budget is spent" in result.unmet[0].why or "the goal's budget is spent" in result.final_message
    assert result.metrics.model_calls == 2
    cheap = ScriptedModel([tool_call_response("read_ref", path="brand.schema.json", _usage=Usage(prompt_tokens=900))])
    request = request.model_copy(update={"goal_calls_left": None, "goal_tokens_left": 500})
    result = execute_skill(request, model=cheap, library=SkillLibrary(skills_root), settings=settings,
                           out_dir=tmp_path / "out2")
    assert result.exit_reason == "budget_goal" and result.metrics.tokens_in == 900


def test_how_small_models_misspell_calls_still_works(write_skill, skills_root, settings, tmp_path):
    """A JSON file given as a JSON value, arguments encoded twice, a `functions.` prefix, `file` for `path`."""
    _brand(write_skill)
    twice = json.dumps(json.dumps({"file": "brand.schema.json"}))
    model = ScriptedModel([
        ModelResponse(tool_calls=(ToolCall(id="", name="functions.read_ref", arguments=twice),)),
        tool_call_response("write_artifact", file_path="brand.json", content={"name": "Acme", "rules": ["short"]}),
        tool_call_response("finish", summary="done", outputs=["build/brand.json"]),
    ])
    result = act("brand", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("brand.json", kind="json"))
    [schema] = _tool_results(model, 1)
    assert schema["ok"] and schema["text"] == SCHEMA
    assert result.status == "done"
    assert json.loads((tmp_path / "out" / "brand.json").read_text()) == {"name": "Acme", "rules": ["short"]}


def test_a_retry_writing_what_the_first_attempt_wrote_is_progress(write_skill, skills_root, settings, tmp_path):
    """The Act's retry starts over in the same goal: writing brand.json again, byte for byte what the first attempt
    left, is this Act's progress (no Micro-Reflect after it and a mistake)."""
    from orchestrator.act.blackboard import Blackboard

    _brand(write_skill)
    board, out = Blackboard(), tmp_path / "out"
    write = tool_call_response("write_artifact", path="brand.json", text='{"name": "Acme"}')

    def attempt(model: ScriptedModel):
        request = ActRequest(goal="test goal", skill_id="brand", expected=expect_files("notes.md", "brand.json"),
                             budgets=Budgets(), job_id="orchtest-act")  # type: ignore[arg-type]
        return execute_skill(request, model=model, library=SkillLibrary(skills_root), settings=settings,
                             out_dir=out, blackboard=board)

    first = ScriptedModel([write, tool_call_response("finish", summary="only brand.json", outputs=["build/brand.json"]),
                           text_response("I cannot write the notes."), REFLECT] + [text_response("…")] * 4)
    assert attempt(first).status == "unmet"
    retry = ScriptedModel([
        write,
        tool_call_response("write_file", path="notes.md", text="Notes."),
        tool_call_response("write_artifact", path="notes.md", text="Notes."),
        tool_call_response("finish", summary="both", outputs=["build/brand.json", "build/notes.md"]),
    ])
    result = attempt(retry)
    retry.assert_all_used()
    assert [c.purpose for c in retry.calls] == ["act"] * 4
    assert result.status == "done"


def test_build_named_as_the_sandbox_mounts_it_is_build_and_other_absolute_paths_still_escape(
        write_skill, skills_root, settings, tmp_path):
    _brand(write_skill)
    model = ScriptedModel([
        tool_call_response("write_artifact", path="/skill/build/brand.json", text='{"name": "Acme"}'),
        tool_call_response("write_artifact", path="/build/notes.md", text="Notes."),
        tool_call_response("finish", summary="done", outputs=["/build/brand.json", "build/notes.md"]),
    ])
    result = act("brand", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("brand.json", "notes.md"))
    assert result.status == "done"
    assert (tmp_path / "out" / "brand.json").read_text() == '{"name": "Acme"}'
    escape = ScriptedModel([tool_call_response("write_artifact", path="/build/../../etc/x", text="x")])
    result = act("brand", escape, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out2")
    assert result.exit_reason == "sandbox_violation"


def test_finishing_before_making_the_outputs_is_told_and_blamed_on_the_model(write_skill, skills_root, settings,
                                                                            tmp_path):
    _brand(write_skill)
    finish = tool_call_response("finish", summary="brand.json written", outputs=["build/brand.json"])
    model = ScriptedModel([finish, finish])
    result = act("brand", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("brand.json", kind="json"))
    told = model.calls[1].messages[-1].content or ""
    assert "Nothing in this run has made brand.json yet: produce it with the skill's tools" in told
    assert result.status == "unmet" and result.exit_reason == "validation_failed"
    [first] = [u for u in result.unmet if u.what == "brand.json"]
    assert "the model stopped before making the outputs" in first.next_step
    assert "the skill" not in first.next_step


def test_a_budget_spent_on_failing_calls_is_blamed_on_the_model(write_skill, skills_root, settings, tmp_path):
    _brand(write_skill)
    wandering = [tool_call_response("read_ref", path=f"docs/part-{i}.md") for i in range(5)]
    model = ScriptedModel([*wandering[:2], REFLECT, *wandering[2:],
                           tool_call_response("write_artifact", path="draft.txt", text="Draft.")])
    result = act("brand", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("brand.json"), budgets=Budgets(max_tool_calls=6))
    assert result.exit_reason == "budget_tool_calls"
    assert "the model spent the budget on calls that failed" in result.next_step
    assert "max_tool_calls" not in result.next_step
    assert all(u.next_step == result.next_step for u in result.unmet)
