"""The goal's answer to the user, by ``supervisor.response`` (the seed's Supervisor response strategy).

``SUMMARY`` (the default): ``answer`` is the model's short account of what was made, taken from the evidence — the
summary each skill's model gave when it finished, the files made, what stayed unmet — so it costs no model call
(``GoalResult.answer`` computes it from the result, so every driver's result carries it).
``SCORED``: ``scores`` gives each evaluation point of the plan a score from 0 to 1 and a one-line reason, from one
more semantic check of the same artifacts index (previews only, never whole files); ``score`` is their mean.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from orchestrator.errors import BudgetExceeded, ModelError
from orchestrator.llm.interface import ChatModel, Message
from orchestrator.llm.jsonreply import json_in_reply
from orchestrator.logs import get_logger
from orchestrator.prompts import render_prompt
from orchestrator.validate.semantic_stage import index_lines, system_prompt
from orchestrator.workflow.goal import GoalResult, PointScore

ResponseMode = str  # "SUMMARY" | "SCORED" (validated by the settings and the CLI)
_log = get_logger("orchestrator.workflow")


def respond(result: GoalResult, model: ChatModel, mode: ResponseMode) -> GoalResult:
    """``result`` with its answer for the user: ``answer`` (SUMMARY) or ``scores`` and ``score`` (SCORED).

    A model failure while scoring never changes the goal's status: the scores stay empty and a note says why.
    """
    result = result.model_copy(deep=True)
    result.response = "SCORED" if mode == "SCORED" else "SUMMARY"
    if result.response == "SUMMARY":
        return result  # ``answer`` is computed from the result itself
    points = list(result.plan.evaluation) if result.plan is not None else []
    if not points:
        result.notes.append("SCORED: the plan states no evaluation points, so nothing was scored")
        return result
    try:
        scores, refused = _score(result, model, points)
    except ModelError as e:
        result.notes.append(f"SCORED: the scoring call failed: {e.message}")
        return result
    if refused:
        result.notes.append(f"SCORED: not scored: {refused}")
        return result
    if scores is None:
        result.notes.append("SCORED: the model's scores stayed malformed; none are reported")
        return result
    result.scores = scores
    result.score = round(sum(s.score for s in scores) / len(scores), 3)
    return result


class _Scores(BaseModel):
    scores: list[PointScore] = Field(min_length=1)


def _score(result: GoalResult, model: ChatModel, points: list[str]) -> tuple[list[PointScore] | None, str]:
    """The scores (None: malformed) and, when a budget refused a request, why. What the requests spent is in the
    ledger the model records them in (the goal's metrics are read from it)."""
    files = result.validation.files if result.validation is not None else []
    rationale = result.validation.rationale if result.validation is not None else ""
    messages = [
        Message(role="system", content=system_prompt()),
        Message(
            role="user",
            content=render_prompt(
                "scored_request", goal=result.goal, points=points, status=result.status, rationale=rationale[:600],
                index=index_lines(files),
            ),
        ),
    ]
    started = time.monotonic()
    for _ in range(2):  # one repair round, as the semantic check has
        try:
            response = model.complete(messages, purpose="semantic", json_response=True)
        except BudgetExceeded as e:  # the goal's budget: what was used so far is in the ledger
            return None, e.message
        problem, scores = _parse(response.content or "", points)
        if scores is not None:
            _log.info("respond.scored", points=len(points), ms=int((time.monotonic() - started) * 1000))
            return scores, ""
        messages += [
            Message(role="assistant", content=response.content or ""),
            Message(role="user", content=render_prompt("scored_repair", problem=problem)),
        ]
    return None, ""


def _parse(content: str, points: list[str]) -> tuple[str, list[PointScore] | None]:
    try:
        data: Any = json_in_reply(content)
        if isinstance(data, list):
            data = {"scores": data}
        scores = _Scores.model_validate(data).scores
    except (ValueError, ValidationError) as e:
        return f"not the scores shape ({str(e)[:200]})", None
    by_point = {s.point.strip().casefold(): s for s in scores}
    if len(scores) == len(points) and not all(p.strip().casefold() in by_point for p in points):
        by_point = {p.strip().casefold(): s for p, s in zip(points, scores, strict=True)}  # numbered, reworded
    missing = [p for p in points if p.strip().casefold() not in by_point]
    if missing:
        return f"no score for {missing[:3]}", None
    return "", [by_point[p.strip().casefold()].model_copy(update={"point": p}) for p in points]
