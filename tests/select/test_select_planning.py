"""Choosing skills for a plan: the shortlist, explicit invocation, search_skills, no fit, and re-planning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from select_corpus import write_skill

from orchestrator.act.act_io import ActResult, RemainingBudgets, Unmet
from orchestrator.config import load_settings
from orchestrator.errors import WorkflowError
from orchestrator.llm.usage_ledger import ModelRequest
from orchestrator.select.explicit import explicit_skills, named_in
from orchestrator.select.shortlist import catalog_text, make_shortlist
from orchestrator.skills.loader import SkillLibrary
from orchestrator.skills.parsed import SkillSummary
from orchestrator.testing import FunctionModel, ScriptedModel, json_response, tool_call_response
from orchestrator.tokens import estimate_tokens
from orchestrator.workflow import phases
from orchestrator.workflow.embedded import drive, run_goal
from orchestrator.workflow.plan import Plan, PlanStep, make_plan
from orchestrator.workflow.request import GoalRequest
from orchestrator.workflow.runtime import Runtime
from orchestrator.workflow.steps import start_goal


def _summary(skill_id: str, name: str | None = None, description: str = "Does things.", **extra) -> SkillSummary:
    return SkillSummary(id=skill_id, name=name or skill_id, description=description, path="/x", **extra)


# --- explicit invocation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("goal", "names"),
    [
        ("$slide-deck make it pop", ["slide-deck"]),
        ("with $brand-voice, then $seo-meta.", ["brand-voice", "seo-meta"]),
        ("Use the Slide-Deck skill for Q3", ["Slide-Deck"]),
        ("using the `csv-summary` skill on sales.csv", ["csv-summary"]),
        ("$document-skills/pptx please", ["document-skills/pptx"]),
        ("it costs $50 and a$b is not a name", []),  # $50 is a price
        ("no names here", []),
    ],
)
def test_goals_name_skills_with_a_dollar_or_use_the_x_skill(goal, names):
    assert named_in(goal) == names


def test_a_name_shared_by_several_skills_invokes_all_of_them_and_ids_work_too():
    skills = [_summary("shared/notes-a", "note-taker"), _summary("shared/notes-b", "note-taker"), _summary("x")]
    assert explicit_skills("$note-taker for the lecture", skills) == ["shared/notes-a", "shared/notes-b"]
    assert explicit_skills("use the shared/notes-b skill", skills) == ["shared/notes-b"]
    assert explicit_skills("$unknown-skill", skills) == []


def test_a_disable_model_invocation_skill_is_offered_only_when_named(skills_root):
    l1 = SkillLibrary(skills_root).l1_index()
    [deploy] = [s for s in l1 if s.id == "danger-deploy"]
    assert deploy.disable_model_invocation
    assert "danger-deploy" not in make_shortlist("deploy the build to production", l1, None, threshold=100).ids
    named = make_shortlist("$danger-deploy now", l1, None, threshold=100)
    assert named.ids[0] == "danger-deploy" and named.explicit == ["danger-deploy"]


def test_a_named_skill_heads_the_shortlist_even_when_retrieval_would_not_find_it(skills_root):
    from orchestrator.select.index import SkillIndex, skill_docs
    from orchestrator.select.shortlist import model_invocable

    library = SkillLibrary(skills_root)
    l1 = library.l1_index()
    index = SkillIndex.build(skill_docs(library, model_invocable(l1)), None)
    shortlist = make_shortlist("$recipe-scaler plan a trip to Kyoto", l1, index, threshold=3, size=3)
    assert shortlist.retrieved and shortlist.ids[0] == "recipe-scaler" and len(shortlist.ids) <= 4
    assert "travel-itinerary" in shortlist.ids


def test_the_planner_cannot_leave_out_a_named_skill():
    model = ScriptedModel([json_response({"steps": [{"skill": "b"}]})])
    plan = make_plan("$a then b", [_summary("a"), _summary("b")], model, explicit=["a"]).plan
    assert [s.skill for s in plan.steps] == ["a", "b"]
    assert "must be in the plan: a" in (model.calls[0].messages[-1].content or "")


def test_a_no_fit_answer_with_a_named_skill_still_runs_the_named_skill():
    model = ScriptedModel([json_response({"steps": [], "no_fit": {"reason": "nothing fits"}})])
    plan = make_plan("$a", [_summary("a")], model, explicit=["a"]).plan
    assert [s.skill for s in plan.steps] == ["a"] and plan.no_fit is None


# --- the catalog and the prompt size --------------------------------------------------------------------------


def test_descriptions_are_shortened_before_any_skill_is_dropped():
    skills = [_summary(f"skill-{i}", description="word " * 200) for i in range(20)]
    catalog = catalog_text(skills, max_tokens=1200)
    assert catalog.ids == [s.id for s in skills] and catalog.shortened and not catalog.dropped
    assert catalog.tokens <= 1200


def test_skills_are_dropped_from_the_end_but_never_a_named_one():
    skills = [_summary(f"skill-{i:03d}-" + "x" * 80) for i in range(40)]
    catalog = catalog_text(skills, max_tokens=300, keep=[skills[-1].id])
    assert catalog.tokens <= 300 and skills[-1].id in catalog.ids and catalog.dropped
    assert catalog.ids[0] == skills[0].id


def test_the_plan_prompt_stays_under_4k_tokens_with_a_thousand_skills(tmp_path):
    root = tmp_path / "skills"
    for i in range(1000):
        write_skill(root, f"lib/s{i:04d}", name=f"s{i:04d}", description=f"Handles topic {i} " + "detail " * 120,
                    body=f"Body of skill {i}.")
    write_skill(root, "lib/zebra-census", name="zebra-census", description="Count zebras in aerial photos.",
                body="Stripes.")
    # The prompt's size does not depend on how the shortlist was ranked; lexical ranking keeps this test fast
    # (embedding a thousand skills is measured by `bench selection`, not here).
    settings = load_settings(selection={"semantic": False})
    model = ScriptedModel([json_response({"steps": [], "no_fit": {"reason": "test"}})])
    rt = Runtime(settings=settings, model=model, library=SkillLibrary(root))
    result = run_goal(GoalRequest(goal="count the zebras in these aerial photos"), tmp_path / "out", rt)
    [call] = model.calls
    prompt = "".join(m.content or "" for m in call.messages) + json.dumps([t.to_openai() for t in call.tools])
    assert estimate_tokens(prompt) < 4000
    assert "lib/zebra-census" in prompt and [t.name for t in call.tools] == ["search_skills"]
    assert "out of 1001" in prompt and "call search_skills" in prompt
    assert result.suggestions[0].id == "lib/zebra-census"


# --- search_skills ------------------------------------------------------------------------------------------------


def _search(query: str, exclude=()) -> list[SkillSummary]:
    return [_summary("hidden/geo", description="Maps and coordinates.")] if "map" in query else []


def test_the_planner_may_search_past_the_shortlist_and_use_what_it_found():
    model = ScriptedModel(
        [
            tool_call_response("search_skills", query="draw a map"),
            json_response({"steps": [{"skill": "hidden/geo"}]}),
        ]
    )
    outcome = make_plan("a map of our stores", [_summary("a")], model, search=_search)
    assert [s.skill for s in outcome.plan.steps] == ["hidden/geo"]
    assert outcome.searches == ["draw a map"] and "hidden/geo" in outcome.offered
    assert "hidden/geo" in (model.calls[1].messages[-1].content or "")


def test_each_search_shows_skills_not_shown_before_so_the_planner_can_ask_for_more():
    library = [_summary(f"hidden/map-{i}", description="Maps.") for i in range(3)]
    seen_excludes: list[list[str]] = []

    def search(query: str, exclude=()) -> list[SkillSummary]:
        seen_excludes.append(list(exclude))
        return [s for s in library if s.id not in exclude][:1]

    model = ScriptedModel(
        [
            tool_call_response("search_skills", query="maps"),
            tool_call_response("search_skills", query="maps again"),
            json_response({"steps": [{"skill": "hidden/map-1"}]}),
        ]
    )
    outcome = make_plan("a map", [_summary("a")], model, search=search, library_size=4)
    assert seen_excludes == [["a"], ["a", "hidden/map-0"]]
    assert outcome.offered == ["a", "hidden/map-0", "hidden/map-1"]
    assert [s.skill for s in outcome.plan.steps] == ["hidden/map-1"]
    first_request = model.calls[0].messages[-1].content or ""
    assert "the 1 skills that match the goal best, out of 4" in first_request


def test_a_skill_neither_shown_nor_found_is_refused():
    model = ScriptedModel(
        [
            tool_call_response("search_skills", query="nothing like it"),
            json_response({"steps": [{"skill": "hidden/geo"}]}),
            json_response({"steps": [{"skill": "hidden/geo"}]}),
        ]
    )
    with pytest.raises(WorkflowError) as caught:
        make_plan("a map", [_summary("a")], model, search=_search)
    assert "hidden/geo" in caught.value.message


def test_searches_and_plan_calls_are_bounded():
    model = ScriptedModel([tool_call_response("search_skills", query=f"map {i}") for i in range(3)])
    with pytest.raises(WorkflowError):
        make_plan("a map", [_summary("a")], model, search=_search, max_searches=5, max_calls=3)
    assert len(model.calls) == 3


def test_no_search_tool_is_offered_for_a_small_library():
    model = ScriptedModel([json_response({"steps": [{"skill": "a"}]})])
    make_plan("goal", [_summary("a")], model)
    assert model.calls[0].tools == ()


# --- no fit --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        {"steps": [], "no_fit": {"reason": "no phone skill", "missing": ["place a phone call"]}},
        {"steps": [], "no_fit": "no phone skill"},
        {"steps": [], "reason": "no phone skill", "missing": "place a phone call"},
    ],
)
def test_the_no_fit_answer_shapes(answer):
    plan = make_plan("sing to grandma on the phone", [_summary("a")], ScriptedModel([json_response(answer)])).plan
    assert plan.steps == [] and plan.no_fit is not None and plan.no_fit.reason == "no phone skill"


def test_an_empty_plan_without_a_reason_is_not_a_plan():
    with pytest.raises(Exception, match="no_fit"):
        Plan.model_validate({"steps": []})


# --- no skill needed -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        {"steps": [], "no_skill_needed": {"reason": "a question", "answer": "Paris."}},
        {"steps": [], "no_skill_needed": "Paris."},
        {"steps": [], "answer": "Paris."},
        {"steps": [], "no_skill_needed": {"answer": "Paris."}, "no_fit": "nothing fits"},
    ],
)
def test_the_no_skill_needed_answer_shapes(answer):
    plan = make_plan("capital of France?", [_summary("a")], ScriptedModel([json_response(answer)])).plan
    assert plan.answered_without_skills and plan.no_skill_needed is not None
    assert plan.no_skill_needed.answer == "Paris." and plan.no_fit is None


def test_no_skill_needed_without_an_answer_is_asked_again_and_steps_win_over_it():
    model = ScriptedModel(
        [
            json_response({"steps": [], "no_skill_needed": {"reason": "easy"}}),
            json_response({"steps": [{"skill": "a"}], "no_skill_needed": {"answer": "never mind"}}),
        ]
    )
    outcome = make_plan("capital of France?", [_summary("a")], model)
    assert "answer" in outcome.attempts[0]
    assert [s.skill for s in outcome.plan.steps] == ["a"] and not outcome.plan.answered_without_skills


def test_a_runaway_answer_is_cut_and_marked():
    plan = Plan.model_validate({"steps": [], "no_skill_needed": {"answer": "x" * 50_000}})
    assert plan.no_skill_needed is not None
    assert len(plan.no_skill_needed.answer) < 20_100 and plan.no_skill_needed.answer.endswith("[… cut]")


def test_a_named_skill_runs_even_when_the_planner_says_no_skill_is_needed():
    model = ScriptedModel([json_response({"steps": [], "no_skill_needed": {"answer": "done already"}})])
    plan = make_plan("use the a skill to say hi", [_summary("a")], model, explicit=["a"]).plan
    assert [s.skill for s in plan.steps] == ["a"] and not plan.answered_without_skills


def test_a_goal_that_needs_no_skill_is_done_with_the_answer_and_no_artifact(skills_root, tmp_path):
    answer = {"steps": [], "no_skill_needed": {"reason": "a question", "answer": "Divide by the count."}}
    rt = Runtime(settings=load_settings(), model=ScriptedModel([json_response(answer)]),
                 library=SkillLibrary(skills_root))
    out = tmp_path / "out"
    result = run_goal(GoalRequest(goal="How do I compute an average?"), out, rt)
    assert result.status == "done" and result.answer == "Divide by the count."
    assert result.artifacts == [] and result.skills == [] and list(out.iterdir()) == []
    assert result.validation is not None and result.validation.pass_


def test_a_goal_no_skill_serves_ends_unmet_with_suggestions_and_no_artifact(skills_root, tmp_path):
    answer = {"steps": [], "no_fit": {"reason": "no skill sings", "missing": ["sing a song on a phone call"]}}
    model = ScriptedModel([json_response(answer)])
    rt = Runtime(settings=load_settings(selection={"shortlist_threshold": 5}), model=model,
                 library=SkillLibrary(skills_root))
    out = tmp_path / "out"
    goal = "Translate a birthday song into Klingon and sing it to my grandmother over the phone"
    result = run_goal(GoalRequest(goal=goal), out, rt)
    assert result.status == "unmet" and result.artifacts == [] and list(out.iterdir()) == []
    assert [u.what for u in result.unmet] == ["sing a song on a phone call"]
    assert result.unmet[0].why == "no skill sings"
    assert result.suggestions[0].id == "translation-glossary"
    assert all(s.id in result.unmet[0].next_step for s in result.suggestions)
    assert result.validation is not None and not result.validation.pass_
    assert len(model.calls) == 1  # no Act, no semantic check of nothing


def test_a_goal_matching_no_skill_word_still_reaches_the_planner_with_search(skills_root, tmp_path):
    model = ScriptedModel([json_response({"steps": [], "no_fit": "nothing"})])
    # Words only: by meaning every goal has a closest skill (test_select_semantic covers that ranking).
    rt = Runtime(settings=load_settings(selection={"shortlist_threshold": 5, "semantic": False}), model=model,
                 library=SkillLibrary(skills_root))
    result = run_goal(GoalRequest(goal="zzqx wvvk"), tmp_path / "out", rt)
    assert result.status == "unmet" and result.suggestions == []
    assert [t.name for t in model.calls[0].tools] == ["search_skills"]


# --- re-planning ----------------------------------------------------------------------------------------------


def _unmet(skill_id: str) -> ActResult:
    return ActResult(
        skill_id=skill_id,
        status="unmet",
        exit_reason="validation_failed",
        remaining_budgets=RemainingBudgets(tool_calls=0, time_ms=0, tokens=0, disk_mb=0),
        unmet=[Unmet(what="minutes.md", why="required file is missing")],
    )


def _replanning_model() -> FunctionModel:
    def answer(messages, tools, purpose):
        if purpose == "plan":
            return json_response({"steps": [{"skill": "podcast-shownotes", "outputs": []}]})
        if purpose == "semantic":
            return json_response({"pass": True, "missing": [], "violations": [], "rationale": "ok"})
        return tool_call_response("finish", summary="done", outputs=[])

    return FunctionModel(answer)


def _stuck_state(skills_root: Path, tmp_path: Path, settings):
    state = start_goal(GoalRequest(goal="minutes of the call"), tmp_path / "out", settings)
    state.plan = Plan(steps=[PlanStep(skill="meeting-notes", outputs=["minutes.md"])])
    state.results = [_unmet("meeting-notes")]
    state.retried = [0]
    return state


def test_a_step_still_unmet_after_its_retry_gets_a_second_plan_told_what_failed(skills_root, tmp_path):
    settings = load_settings()
    model = _replanning_model()
    rt = Runtime(settings=settings, model=model, library=SkillLibrary(skills_root))
    state = _stuck_state(skills_root, tmp_path, settings)
    result = drive(state, phases.Reflect(), rt)
    plans = [c for c in model.calls if c.purpose == "plan"]
    assert len(plans) == 1
    prompt = plans[0].messages[-1].content or ""
    assert "meeting-notes" in prompt and "stayed unmet" in prompt and "minutes.md" in prompt
    assert [s.skill for s in result.plan.steps] == ["podcast-shownotes"]
    assert [r.skill_id for r in result.skills] == ["podcast-shownotes"]
    [replan] = result.replans
    assert (replan.step, replan.skill, replan.steps, replan.outcome) == (0, "meeting-notes", ["podcast-shownotes"],
                                                                         "re-planned")
    assert replan.reason == "validation_failed: minutes.md: required file is missing" and result.plan_calls == 1


def test_no_second_plan_when_the_goal_has_no_plan_budget_left(skills_root, tmp_path):
    settings = load_settings(selection={"replans": 0})
    model = _replanning_model()
    rt = Runtime(settings=settings, model=model, library=SkillLibrary(skills_root))
    state = _stuck_state(skills_root, tmp_path, settings)
    result = drive(state, phases.Reflect(), rt)
    assert [c.purpose for c in model.calls if c.purpose == "plan"] == []
    assert result.status == "unmet"  # re-planning is switched off, not refused: the one note names the model
    assert result.notes == ["not finished because of the model function-model: meeting-notes (validation_failed); "
                            "a stronger model may finish it"]
    settings = load_settings(selection={"plan_token_budget": 1000})
    state = _stuck_state(skills_root, tmp_path, settings)
    state.ledger.record(ModelRequest(purpose="plan", charged_to="plan", prompt_tokens=1000))
    result = drive(state, phases.Reflect(), Runtime(settings=settings, model=model, library=SkillLibrary(skills_root)))
    assert [c.purpose for c in model.calls if c.purpose == "plan"] == [] and result.status == "unmet"
    assert result.notes[0] == (
        "not re-planned after step 1 (meeting-notes) stayed unmet: plan budget spent (1000 of 1000 plan tokens used)"
    )
    assert result.notes[1:] == ["not finished because of the model function-model: meeting-notes "
                                "(validation_failed); a stronger model may finish it"]
    assert result.replans == [] and result.plan_calls == 1  # the one request of the state's plan, none since


def test_disable_model_invocation_is_read_from_the_frontmatter_and_a_bad_value_is_reported(tmp_path):
    write_skill(tmp_path, "on", name="on", description="Named only.", body="b", disable=True)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: bad\ndescription: Odd flag.\ndisable-model-invocation: maybe\n---\nb\n")
    by_id = {s.id: s for s in SkillLibrary(tmp_path).list()}
    assert by_id["on"].disable_model_invocation and not any(p.code == "unknown_key" for p in by_id["on"].problems)
    assert not by_id["bad"].disable_model_invocation
    assert [p.code for p in by_id["bad"].problems if p.field == "disable-model-invocation"] == ["field_invalid"]
