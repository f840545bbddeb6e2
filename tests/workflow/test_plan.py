"""The planner: L1 only in, a typed plan out; common answer shapes are understood, bad ones retried once."""

from __future__ import annotations

import json

import pytest

from orchestrator.errors import WorkflowError
from orchestrator.skills.parsed import SkillSummary
from orchestrator.testing import ScriptedModel, json_response, text_response
from orchestrator.workflow.plan import make_plan

CATALOG = [
    SkillSummary(id="brand-guidelines", name="brand-guidelines", description="Brand rules.", path="/x", problems=[],
                 l1_tokens=5),
    SkillSummary(id="document-skills/pptx", name="pptx", description="Decks.", path="/y", problems=[], l1_tokens=3),
]


@pytest.mark.parametrize(
    "answer",
    [
        {"steps": [{"skill": "brand-guidelines"}, {"skill": "document-skills/pptx", "outputs": ["deck.pptx"]}]},
        {"skills": ["brand-guidelines", {"id": "document-skills/pptx", "outputs": ["deck.pptx"]}]},
        [{"skill_id": "brand-guidelines"}, {"name": "document-skills/pptx", "outputs": ["deck.pptx"]}],
    ],
    ids=["steps", "skills", "bare-list"],
)
def test_common_plan_shapes_give_the_same_plan(answer):
    model = ScriptedModel([json_response(answer)])
    plan = make_plan("a branded deck", CATALOG, model).plan
    assert [s.skill for s in plan.steps] == ["brand-guidelines", "document-skills/pptx"]
    [required] = plan.steps[1].expected_outputs().rules.required
    assert (required.path, required.kind) == ("deck.pptx", "pptx")
    assert model.calls[0].purpose == "plan" and model.calls[0].json_response


def test_the_plan_request_holds_only_the_l1_catalog():
    model = ScriptedModel([json_response({"steps": [{"skill": "brand-guidelines"}]})])
    make_plan("goal", CATALOG, model)
    sent = json.dumps([m.model_dump() for m in model.calls[0].messages], ensure_ascii=False)
    assert "brand-guidelines: brand-guidelines — Brand rules." in sent and model.calls[0].tools == ()


def test_an_unusable_plan_is_retried_once_with_the_reason_then_fails_at_the_plan():
    model = ScriptedModel([text_response("not json"), json_response({"steps": [{"skill": "nope"}]})])
    with pytest.raises(WorkflowError) as caught:
        make_plan("goal", CATALOG, model)
    assert caught.value.where == "plan" and "nope" in caught.value.message
    assert "not JSON" in (model.calls[1].messages[-1].content or "")


def test_a_fenced_json_plan_is_accepted():
    model = ScriptedModel([text_response('```json\n{"steps": [{"skill": "brand-guidelines"}]}\n```')])
    assert make_plan("goal", CATALOG, model).plan.steps[0].skill == "brand-guidelines"


@pytest.mark.parametrize(
    "answer",
    [
        'Sure! Here is the plan:\n```json\n{"steps": [{"skill": "brand-guidelines"}]}\n```\nIt uses one skill.',
        '{"steps": [{"skill": "brand-guidelines"}]}\n\nNote: this plan follows the catalog.',
        "{'steps': [{'skill': 'brand-guidelines'}], 'no_fit': None}",
    ],
    ids=["prose-around-fence", "trailing-note", "python-dict"],
)
def test_a_plan_wrapped_in_prose_is_taken_without_asking_again(answer):
    model = ScriptedModel([text_response(answer)])
    assert make_plan("goal", CATALOG, model).plan.steps[0].skill == "brand-guidelines"
    assert len(model.calls) == 1


@pytest.mark.parametrize("named", ["pptx", "PPTX", "document-skills/pptx/"])
def test_a_skill_named_as_its_catalog_line_shows_it_is_that_skill(named):
    model = ScriptedModel([json_response({"steps": [{"skill": "brand_guidelines"}, {"skill": named}]})])
    plan = make_plan("a branded deck", CATALOG, model).plan
    assert [s.skill for s in plan.steps] == ["brand-guidelines", "document-skills/pptx"]
    assert len(model.calls) == 1


def test_a_name_that_fits_two_skills_is_still_asked_again():
    catalog = [*CATALOG, CATALOG[1].model_copy(update={"id": "other/pptx", "path": "/z"})]
    model = ScriptedModel([json_response({"steps": [{"skill": "pptx"}]}),
                           json_response({"steps": [{"skill": "other/pptx"}]})])
    assert make_plan("a deck", catalog, model).plan.steps[0].skill == "other/pptx"
    assert "unknown skill ids ['pptx']" in (model.calls[1].messages[-1].content or "")
