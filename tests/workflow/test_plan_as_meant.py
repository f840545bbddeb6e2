"""A model's plan is read as it was meant: a constraint that cannot apply is dropped and noted, never fatal; what the
planner keeps, the contract accepts; a rejected plan is answered with the field, the values allowed and an example;
a no-fit that only repeats the runtime's complaint is not a no-fit (issue 31)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.errors import WorkflowError
from orchestrator.llm.interface import ModelResponse
from orchestrator.skills.parsed import SkillSummary
from orchestrator.testing import FunctionModel, ScriptedModel, json_response, text_response
from orchestrator.validate.contract import check_contract
from orchestrator.workflow.plan import make_plan

CATALOG = [
    SkillSummary(id="brand-guidelines", name="brand-guidelines", description="Brand rules.", path="/x", problems=[],
                 l1_tokens=5),
    SkillSummary(id="document-skills/pptx", name="pptx", description="Decks.", path="/y", problems=[], l1_tokens=3),
    SkillSummary(id="meeting-notes", name="meeting-notes", description="Minutes.", path="/z", problems=[],
                 l1_tokens=3),
]


def _one_step(**output: object) -> dict[str, object]:
    return {"steps": [{"skill": "meeting-notes", "outputs": [output]}], "evaluation": ["complete"]}


@pytest.mark.parametrize(
    ("output", "kind"),
    [
        ({"path": "minutes.md", "kind": "markdown", "slides": 0}, "markdown"),
        ({"path": "actions.json", "kind": "json", "slides": []}, "json"),
        ({"path": "report.pdf", "kind": "pdf", "slides": 1}, "pdf"),
        ({"path": "brand.json", "kind": "json", "slides": 3}, "json"),
        ({"path": "deck.pptx", "kind": "pptx", "slides": -2}, "pptx"),
        ({"path": "deck.pptx", "kind": "pptx", "slides": "many"}, "pptx"),
        ({"path": "deck.pptx", "kind": "pptx", "slides": True}, "pptx"),
    ],
)
def test_a_slide_count_that_cannot_apply_is_dropped_and_noted_not_fatal(output, kind):
    model = ScriptedModel([json_response(_one_step(**output))])
    plan = make_plan("minutes", CATALOG, model).plan
    assert len(model.calls) == 1
    [planned] = plan.steps[0].outputs
    assert (planned.kind, planned.slides) == (kind, None)
    assert any("slides" in note and "dropped" in note for note in plan.notes)
    [required] = plan.steps[0].expected_outputs().rules.required
    assert required.slides is None


@pytest.mark.parametrize("slides", [5, "5", 5.0])
def test_a_deck_keeps_the_slide_count_the_goal_gave(slides):
    model = ScriptedModel([json_response(_one_step(path="deck.pptx", kind="pptx", slides=slides))])
    [required] = make_plan("deck", CATALOG, model).plan.steps[0].expected_outputs().rules.required
    assert (required.kind, required.slides) == ("pptx", 5)


def test_a_kind_the_file_name_contradicts_is_taken_from_the_name(tmp_path: Path):
    model = ScriptedModel([json_response(_one_step(path="minutes.txt", kind="markdown"))])
    plan = make_plan("minutes", CATALOG, model).plan
    [required] = plan.steps[0].expected_outputs().rules.required
    assert required.kind == "text" and any("taken as text" in n for n in plan.notes)
    (tmp_path / "minutes.txt").write_text("# Minutes\n", encoding="utf-8")
    assert check_contract(tmp_path, plan.steps[0].expected_outputs().rules).passed


@pytest.mark.parametrize(
    ("given", "kept"),
    [("./build/actions.json", "actions.json"), ("/build/actions.json", "actions.json"), ("build\\a.json", "a.json"),
     ("/actions.json", "actions.json")],
)
def test_output_paths_are_read_relative_to_the_output_folder(given, kept):
    model = ScriptedModel([json_response(_one_step(path=given, kind="json"))])
    [required] = make_plan("minutes", CATALOG, model).plan.steps[0].expected_outputs().rules.required
    assert required.path == kept


@pytest.mark.parametrize("given", ["../../etc/passwd", "a/../../b.json", "", "x\x00.json", "a" * 500, 7, None])
def test_an_output_path_that_cannot_name_a_file_inside_the_folder_is_dropped_and_noted(given):
    answer = {"steps": [{"skill": "meeting-notes", "outputs": [{"path": given, "kind": "json"}, "ok.json"]}]}
    plan = make_plan("minutes", CATALOG, ScriptedModel([json_response(answer)])).plan
    assert [o.path for o in plan.steps[0].outputs] == ["ok.json"]
    assert any("output dropped" in n for n in plan.notes)


def test_a_rejected_plan_is_answered_with_the_field_the_values_allowed_and_an_example():
    model = ScriptedModel([
        json_response({"steps": [{"why": "it writes minutes", "outputs": ["minutes.md"]}]}),
        json_response({"steps": [{"skill": "meeting-notes"}]}),
    ])
    assert make_plan("minutes", CATALOG, model).plan.steps[0].skill == "meeting-notes"
    retry = model.calls[1].messages[-1].content or ""
    assert '"skill"' in retry and "meeting-notes" in retry and "document-skills/pptx" in retry
    assert "for example {" in retry and "loc" not in retry and "('steps'" not in retry


def test_an_empty_plan_is_told_what_a_plan_and_a_no_fit_look_like():
    model = ScriptedModel([json_response({"steps": []}), json_response({"steps": ["meeting-notes"]})])
    make_plan("minutes", CATALOG, model)
    retry = model.calls[1].messages[-1].content or ""
    assert '"no_fit"' in retry and '"steps": [{"skill"' in retry


def test_a_no_fit_that_repeats_the_runtimes_complaint_is_not_a_no_fit():
    bad = json_response({"steps": [{"why": "minutes"}]})
    echo = json_response({"steps": [], "no_fit": {
        "reason": "step 0 has no skill: every step needs skill set to one of the catalog's ids"}})
    model = ScriptedModel([bad, echo, echo], name="small-local-model")
    with pytest.raises(WorkflowError) as caught:
        make_plan("minutes", CATALOG, model)
    assert caught.value.where == "plan" and "small-local-model" in caught.value.message
    assert "skill" not in caught.value.next_step.replace("the skills are not the reason", "")
    assert "repeats the runtime's complaint" in caught.value.data["attempts"][-1]
    told = model.calls[2].messages[-1].content or ""
    assert "repeats the runtime's complaint" in told and '"steps": [{"skill"' in told

    fixed = ScriptedModel([bad, echo, json_response({"steps": [{"skill": "meeting-notes"}]})])
    assert make_plan("minutes", CATALOG, fixed).plan.steps[0].skill == "meeting-notes"


def test_a_real_no_fit_after_a_retry_is_still_a_no_fit():
    bad = json_response({"steps": [{"why": "a video"}]})
    no_fit = json_response({"steps": [], "no_fit": {"reason": "none of the skills can edit a video",
                                                     "missing": ["cut and render video files"]}})
    plan = make_plan("edit my video", CATALOG, ScriptedModel([bad, no_fit])).plan
    assert plan.no_fit is not None and plan.no_fit.reason == "none of the skills can edit a video"


def test_a_plan_cut_at_the_cap_is_salvaged_through_the_same_normalisation():
    text = json.dumps({"steps": [{"skill": "meeting-notes", "outputs": [
        {"path": "actions.json", "kind": "json", "slides": 0}]}], "evaluation": ["x" * 50]})[:-30]
    model = ScriptedModel([text_response(text, finish_reason="length")])
    plan = make_plan("minutes", CATALOG, model).plan
    assert plan.steps[0].outputs[0].slides is None and len(model.calls) == 1
    assert any("slides" in n for n in plan.notes)


# --- property: no plan-shaped JSON a model can send ends in an internal error -----------------------------------

_leaf = st.none() | st.booleans() | st.integers(-5, 10**12) | st.floats(allow_nan=False) | st.text(max_size=12)
_json = st.recursive(_leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                     max_leaves=12)
_paths = st.sampled_from(["deck.pptx", "a.json", "./build/m.md", "/abs.pdf", "../up.txt", "x/*.csv", "", " ",
                          "build/", "n\x00.json", "dir/", ".", "a/./b.yaml"]) | st.text(max_size=30)
_kinds = st.sampled_from(["json", "pptx", "md", "pdf", "any", "binary", "text", "PNG", ".docx", ""]) | _json
_output = _json | _paths | st.fixed_dictionaries(
    {"path": _paths | _json}, optional={"kind": _kinds, "slides": st.integers(-3, 800) | _json, "name": _paths})
_step = _json | st.sampled_from([c.id for c in CATALOG]) | st.fixed_dictionaries(
    {"skill": st.sampled_from([*(c.id for c in CATALOG), "pptx", "nope"]) | _json},
    optional={"outputs": st.lists(_output, max_size=4) | _output, "why": _json, "expected": _json, "id": _json},
)
_good_output = st.fixed_dictionaries(
    {"path": st.sampled_from(["deck.pptx", "a.json", "m.md", "r.pdf", "build/c.csv", "x.png", "notes"])},
    optional={"kind": _kinds, "slides": st.integers(-3, 800) | _leaf})
_good_step = st.fixed_dictionaries({"skill": st.sampled_from([c.id for c in CATALOG])},
                                   optional={"outputs": st.lists(_good_output | _output, max_size=4)})
_plan = st.fixed_dictionaries({"steps": st.lists(_good_step, min_size=1, max_size=3)}) | _json | st.lists(
    _step, max_size=3) | st.fixed_dictionaries(
    {"steps": st.lists(_step, max_size=4) | _json},
    optional={"evaluation": _json, "no_fit": _json, "skills": _json, "reason": _json},
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answer=_plan, cut=st.booleans())
def test_no_plan_shaped_answer_ends_in_an_internal_error(tmp_path: Path, answer, cut):
    text = json.dumps(answer)
    text = text[: max(1, len(text) * 2 // 3)] if cut else text

    def reply(messages, tools, purpose) -> ModelResponse:
        return text_response(text, finish_reason="length" if cut else "stop")

    try:
        plan = make_plan("a goal", CATALOG, FunctionModel(reply)).plan
    except WorkflowError:
        return
    for step in plan.steps:
        assert step.skill in {c.id for c in CATALOG}
        rules = step.expected_outputs().rules
        assert len(rules.required) == len(step.outputs)
        outcome = check_contract(tmp_path, rules)
        assert set(outcome.missing) <= {r.path for r in rules.required}
        assert not [v for v in outcome.violations if v.category == "boundary"]
