"""Plan: choose skills from the L1 catalog for a goal, order them, state expected outputs and evaluation points."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from functools import reduce
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from orchestrator.errors import ModelError, WorkflowError
from orchestrator.llm.cutjson import close_cut_json
from orchestrator.llm.interface import ChatModel, Message, ModelResponse, ToolSpec
from orchestrator.llm.jsonreply import json_in_reply
from orchestrator.llm.usage_ledger import LedgerModel, Spending, metered
from orchestrator.prompts import load_prompt, render_prompt, tool_text
from orchestrator.select.shortlist import Catalog, catalog_text
from orchestrator.skills.parsed import SkillSummary
from orchestrator.tokens import estimate_tokens
from orchestrator.validate.rules import ContractRules, ExpectedOutputs, RequiredFile, slide_counts_apply
from orchestrator.workflow.plan_input import PLAN_EXAMPLE, as_kind, normalise_plan, repeats, shape_problem
from orchestrator.workflow.triage import chat_answer


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
        """The step's outputs as contract rules. A plan read from a model was normalised (``plan_input``), so every
        output is a valid rule; one built otherwise (an old checkpoint) loses what the contract would reject."""
        required = []
        for o in self.outputs:
            path, kind = o.path.strip().removeprefix("./").removeprefix("build/"), as_kind(o.kind)
            slides = o.slides if slide_counts_apply(kind, path) else None
            try:
                required.append(RequiredFile.model_validate({"path": path, "kind": kind, "slides": slides}))
            except ValidationError:
                continue
        return ExpectedOutputs(description=self.expected, rules=ContractRules(required=required))


class NoFit(BaseModel):
    """The planner's answer when no skill on offer can serve the goal: why, and what would be needed."""

    reason: str = ""
    missing: list[str] = []

    @field_validator("missing", mode="before")
    @classmethod
    def _missing_may_be_one_text(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


#: The longest answer without skills that a result carries (a runaway reply is cut, marked).
MAX_DIRECT_ANSWER_CHARS = 20_000
TRIAGE_REASON = "asked first, the model said a chat reply answers this goal, so no skill was loaded"


class NoSkillNeeded(BaseModel):
    """The planner's answer when the goal needs no skill at all (a question, advice, a short text): why, and the
    answer itself, which the goal then returns with no artifact."""

    reason: str = ""
    answer: str = ""

    @field_validator("answer", mode="before")
    @classmethod
    def _answer_is_text(cls, value: Any) -> Any:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return text if len(text) <= MAX_DIRECT_ANSWER_CHARS else text[:MAX_DIRECT_ANSWER_CHARS] + " [… cut]"


class Plan(BaseModel):
    steps: list[PlanStep] = []
    evaluation: list[str] = []
    no_fit: NoFit | None = None
    no_skill_needed: NoSkillNeeded | None = None
    notes: list[str] = []
    """What reading the model's plan dropped or changed (a slide count on a json output, a kind the file name
    contradicts), so the plan could be used as meant."""

    @field_validator("evaluation", mode="before")
    @classmethod
    def _evaluation_may_be_one_text(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("no_fit", mode="before")
    @classmethod
    def _no_fit_may_be_one_text(cls, value: Any) -> Any:
        return {"reason": value} if isinstance(value, str) else value

    @field_validator("no_skill_needed", mode="before")
    @classmethod
    def _no_skill_needed_may_be_the_answer(cls, value: Any) -> Any:
        if value is False:
            return None
        return {"answer": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _steps_or_no_fit(self) -> Plan:
        if self.steps:  # steps win: a plan that runs skills is not also an answer without them
            self.no_fit = self.no_skill_needed = None
            return self
        if self.no_skill_needed is not None and not self.no_skill_needed.answer.strip():
            raise ValueError("no_skill_needed needs the answer to the goal in 'answer'")
        if self.no_fit is None and self.no_skill_needed is None:
            raise ValueError(
                "a plan needs at least one step, no_fit saying why no skill fits, or no_skill_needed with the answer"
            )
        if self.no_skill_needed is not None:
            self.no_fit = None  # an answer given beats a reason why none fits
        return self

    def _answers(self) -> bool:
        return self.no_fit is not None or self.no_skill_needed is not None

    @property
    def answered_without_skills(self) -> bool:
        """The planner answered the goal itself: no skill is needed."""
        return not self.steps and self.no_skill_needed is not None


class PlanOutcome(BaseModel):
    plan: Plan
    spent: Spending = Spending()
    """What this plan's requests spent (read from the ledger they were recorded in)."""
    duration_ms: int = 0
    attempts: list[str] = []
    searches: list[str] = []
    """The ``search_skills`` queries the planner made."""
    offered: list[str] = []
    """Every skill id the planner was shown (the catalog and search results)."""
    catalog_tokens: int = 0
    prompt_tokens_estimate: int = 0
    """Estimated size of the first plan request (system prompt, goal and catalog)."""


class SearchSkillsArgs(BaseModel):
    query: str = Field(min_length=1, max_length=500, description=tool_text("search_skills.query"))


SEARCH_SKILLS = ToolSpec(
    name="search_skills",
    description=tool_text("search_skills"),
    parameters=SearchSkillsArgs.model_json_schema(),
)

SearchFn = Callable[[str, Sequence[str]], list[SkillSummary]]
"""``search(query, exclude)``: skills for ``query`` best first, none of the ids in ``exclude``."""


def plan_request(
    goal: str,
    catalog: Catalog,
    *,
    inputs: Sequence[str] = (),
    constraints: Sequence[str] = (),
    feedback: Sequence[str] = (),
    explicit: Sequence[str] = (),
    searchable: bool = False,
    library_size: int = 0,
) -> list[Message]:
    """The messages of the first plan call (``library_size``: the skills a search may reach)."""
    request = render_prompt(
        "plan_request",
        goal=goal,
        inputs=inputs,
        constraints=constraints,
        explicit=explicit,
        feedback=feedback,
        searchable=searchable,
        shown=len(catalog.ids),
        library_size=max(library_size, len(catalog.ids)),
        catalog=catalog.text,
    )
    return [
        Message(role="system", content=load_prompt("plan_system")),
        Message(role="user", content=request),
    ]


def make_plan(
    goal: str,
    skills: list[SkillSummary],
    model: ChatModel,
    *,
    inputs: Sequence[str] = (),
    constraints: Sequence[str] = (),
    feedback: Sequence[str] = (),
    explicit: Sequence[str] = (),
    catalog_max_tokens: int | None = None,
    search: SearchFn | None = None,
    max_searches: int = 3,
    max_calls: int = 4,
    library_size: int = 0,
    triage: bool = False,
) -> PlanOutcome:
    """Ask the model for a plan over ``skills`` (the shortlist, best first).

    A malformed or unknown-skill answer is retried once with the reason. With ``search`` the model may call
    ``search_skills`` (at most ``max_searches`` times) and then use the ids it found. Skills in ``explicit`` are
    always in the plan: the planner is told, and any it leaves out are put first. ``max_calls`` bounds the model
    calls of this plan (searches included). With ``triage``, a goal without inputs, named skills or feedback may be
    answered in a chat reply first (:func:`_answered_first`), with no catalog sent."""
    if not skills and not explicit and search is None:
        raise WorkflowError(
            "no usable skills were found",
            where="plan",
            next_step="check --skills DIR (python -m orchestrator skills list --root DIR)",
        )
    catalog = catalog_text(skills, max_tokens=catalog_max_tokens, keep=explicit)
    known = {s.id: s for s in skills if s.id in catalog.ids}
    messages = plan_request(
        goal,
        catalog,
        inputs=inputs,
        constraints=constraints,
        feedback=feedback,
        explicit=explicit,
        searchable=search is not None,
        library_size=library_size,
    )
    outcome = PlanOutcome(
        plan=Plan(steps=[PlanStep(skill="-")]),
        offered=list(catalog.ids),
        catalog_tokens=catalog.tokens,
        prompt_tokens_estimate=sum(estimate_tokens(m.content or "") for m in messages),
    )
    tools = [SEARCH_SKILLS] if search is not None else []
    started = time.monotonic()
    problems, allowed = 0, 2
    recorded = metered(model, "plan")  # the calls this plan may make are counted from the ledger, not by hand
    mark = recorded.ledger.mark()
    if triage and not (inputs or explicit or feedback) and _answered_first(goal, constraints, recorded, outcome):
        return outcome
    asked = outcome.spent.requests  # the triage question is not one of the plan's ``max_calls``
    while recorded.ledger.since(mark).requests < max_calls + asked:
        response = _call(recorded, messages, tools if len(outcome.searches) < max_searches else [])
        outcome.spent = recorded.ledger.since(mark)
        if response.tool_calls:
            messages += [response.as_message(), *_answer_tools(response, search, known, outcome)]
            continue
        problem, plan = _parse(response.content or "", set(known))
        if plan is None and response.cut:  # what was complete before the cut, else asked again once, shorter
            plan = _salvaged(response.content or "", set(known))
            problem = load_prompt("notes/plan_cut")
            if plan is not None:
                outcome.attempts.append("the plan was cut at max_tokens; its complete part was used")
        if plan is not None and plan.no_fit is not None and not plan.steps and _echoed(plan.no_fit, outcome, known):
            # The runtime's own complaint sent back as the reason no skill fits: a format slip, not a no-fit.
            problem, plan = render_prompt("notes/plan_no_fit_echo", example=PLAN_EXAMPLE), None
            allowed = 3  # an echo is the model misreading our complaint: one more chance, at most
        if plan is not None:
            outcome.plan = _with_explicit(plan, explicit)
            outcome.duration_ms = int((time.monotonic() - started) * 1000)
            return outcome
        outcome.attempts.append(problem)
        problems += 1
        if problems >= allowed:
            break
        messages += [
            response.as_message(),
            Message(role="user", content=render_prompt("plan_retry", problem=problem)),
        ]
    last = outcome.attempts[-1] if outcome.attempts else "too many plan calls"
    raise WorkflowError(
        f"the model {model.name} gave no usable plan (its answers did not follow the plan's format): {last[:600]}",
        where="plan",
        next_step="run it with a stronger model, or again (nothing was run); the skills are not the reason",
        attempts=outcome.attempts,
    )


def _answered_first(goal: str, constraints: Sequence[str], model: LedgerModel, outcome: PlanOutcome) -> bool:
    """Triage: True when the model, asked first, answered ``goal`` in a chat reply (``outcome`` then carries that
    answer as a ``no_skill_needed`` plan); either way ``outcome.spent`` counts the calls it took."""
    started, mark = time.monotonic(), model.ledger.mark()
    answer = chat_answer(goal, model, constraints)
    outcome.spent = model.ledger.since(mark)
    if answer is None:
        return False
    outcome.plan = Plan(no_skill_needed=NoSkillNeeded(reason=TRIAGE_REASON, answer=answer))
    outcome.offered = []
    outcome.duration_ms = int((time.monotonic() - started) * 1000)
    return True


def _echoed(no_fit: NoFit, outcome: PlanOutcome, known: dict[str, SkillSummary]) -> bool:
    """True when a no-fit's words repeat a problem the runtime told the model (its reason is our error text). The
    skill ids a problem lists are left out: naming the skills it looked at is no echo."""
    said = " ".join([no_fit.reason, *no_fit.missing])
    problems = [reduce(lambda text, i: text.replace(i, " "), known, p) for p in outcome.attempts]
    return any(repeats(said, problem) for problem in problems)


def _answer_tools(
    response: ModelResponse, search: SearchFn | None, known: dict[str, SkillSummary], outcome: PlanOutcome
) -> list[Message]:
    """Tool results for a planner turn: ``search_skills`` finds skills (which then become usable ids)."""
    answers = []
    for call in response.tool_calls:
        if call.name != "search_skills" or search is None:
            error = render_prompt("errors/plan_unknown_tool", name=repr(call.name))
            result: dict[str, Any] = {"ok": False, "error": error}
        else:
            try:
                args = SearchSkillsArgs.model_validate_json(call.arguments)
            except ValidationError as e:
                problem = e.errors()[0]["msg"]
                result = {"ok": False, "error": render_prompt("errors/plan_bad_arguments", problem=problem)}
            else:
                found = search(args.query, outcome.offered)
                outcome.searches.append(args.query)
                for s in found:
                    known.setdefault(s.id, s)
                    if s.id not in outcome.offered:
                        outcome.offered.append(s.id)
                shown = catalog_text(found, max_tokens=600).text or render_prompt("notes/no_match")
                result = {"ok": True, "skills": shown}
        answers.append(Message(role="tool", tool_call_id=call.id, content=json.dumps(result, ensure_ascii=False)))
    return answers


def _with_explicit(plan: Plan, explicit: Sequence[str]) -> Plan:
    """The plan with every explicitly named skill in it: missing ones are put first (a no-fit becomes a plan)."""
    planned = {s.skill for s in plan.steps}
    missing = [PlanStep(skill=i, why="named in the goal") for i in explicit if i not in planned]
    if not missing:
        return plan
    return plan.model_copy(update={"steps": [*missing, *plan.steps], "no_fit": None, "no_skill_needed": None})


def _call(model: ChatModel, messages: list[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
    try:
        return model.complete(messages, tools=tools, purpose="plan", json_response=True)
    except ModelError as e:
        e.where = e.where or "plan"
        raise


def _parse(text: str, known: set[str]) -> tuple[str, Plan | None]:
    try:
        raw: Any = json_in_reply(text)
    except ValueError as e:
        return f"not JSON ({e}); answer with one JSON object, for example {PLAN_EXAMPLE}", None
    data, notes = normalise_plan(raw)
    try:
        plan = _with_ids(Plan.model_validate(data), known)
    except ValidationError as e:
        return shape_problem(e, sorted(known)), None
    unknown = [s.skill for s in plan.steps if s.skill not in known]
    if unknown:
        return f"unknown skill ids {unknown}; choose from {sorted(known)}", None
    return "", plan.model_copy(update={"notes": notes})


def _with_ids(plan: Plan, known: set[str]) -> Plan:
    """Skills named the way the catalog line shows them but not by their id (``pptx`` for ``document-skills/pptx``,
    ``brand_guidelines``) are the skill they name, when exactly one id ends that way."""
    steps = []
    for step in plan.steps:
        if step.skill not in known:
            wanted = _spelling(step.skill)
            matches = [k for k in known if wanted in (_spelling(k), _spelling(k.rsplit("/", 1)[-1]))]
            if len(matches) == 1:
                step = step.model_copy(update={"skill": matches[0]})
        steps.append(step)
    return plan.model_copy(update={"steps": steps})


def _spelling(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().strip("/").lower())


CUT_TEXT_CHARS = 300


def _salvaged(text: str, known: set[str]) -> Plan | None:
    """The usable part of a plan cut at ``max_tokens`` (a small model's runaway ``evaluation``), texts shortened."""
    data = close_cut_json(text)
    if data is None:
        return None
    normalised, notes = normalise_plan(data)
    try:
        plan = Plan.model_validate({**normalised, "notes": notes} if isinstance(normalised, dict) else normalised)
    except ValidationError:
        return None
    plan = _with_ids(plan, known)
    if any(s.skill not in known for s in plan.steps) or (not plan.steps and not plan._answers()):
        return None
    steps = [s.model_copy(update={"why": s.why[:CUT_TEXT_CHARS], "expected": s.expected[:CUT_TEXT_CHARS]})
             for s in plan.steps]
    return plan.model_copy(update={"steps": steps, "evaluation": [e[:CUT_TEXT_CHARS] for e in plan.evaluation]})
