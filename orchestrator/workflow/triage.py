"""Triage: before a plan, one short question to the model: does this goal need a skill at all?

A small model shown a catalog loads a skill for almost any goal ("thanks!" got a personal CRM, "72 fahrenheit in
celsius?" a smart-home skill), although the planner may answer ``no_skill_needed``. Asked first, without the
catalog and with a few labelled examples, the same model tells a chat goal from a tool goal far better. When it says
CHAT, the goal is answered in a chat reply and no catalog is sent; any other reply plans as usual, so a triage that
misreads its question costs one short call, never a skill. On by ``selection.triage`` (the ``local`` model profile).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from orchestrator.llm.interface import ChatModel, Message
from orchestrator.prompts import load_prompt


@cache
def _examples() -> tuple[tuple[str, str], ...]:
    """``(request, label)`` pairs from ``prompts/triage_examples.md`` (lines ``LABEL | request``)."""
    pairs = []
    for line in load_prompt("triage_examples").splitlines():
        label, _, request = line.partition("|")
        if request.strip():
            pairs.append((request.strip(), label.strip()))
    return tuple(pairs)


def asked(goal: str, constraints: Sequence[str] = ()) -> str:
    """The goal as the triage question and the chat answer read it: its constraints ("as a PDF", "in French") too."""
    return goal if not constraints else f"{goal}\n\nConstraints: {'; '.join(constraints)}"


def triage_request(goal: str, constraints: Sequence[str] = ()) -> list[Message]:
    messages = [Message(role="system", content=load_prompt("triage_system"))]
    for request, label in _examples():
        messages += [Message(role="user", content=request), Message(role="assistant", content=label)]
    return [*messages, Message(role="user", content=asked(goal, constraints))]


def says_chat(reply: str) -> bool:
    """True only for a reply whose first word is CHAT; anything else (TOOL, a plan, prose) means plan as usual."""
    words = reply.strip().strip("*`\"'").split()
    return bool(words) and words[0].strip(".:!*`\"'").upper() == "CHAT"


def chat_answer(goal: str, model: ChatModel, constraints: Sequence[str] = ()) -> str | None:
    """The goal answered in a chat reply when the model, asked first, says it needs no skill; None otherwise (the
    goal is then planned as usual). Two calls at most: the question (purpose ``plan``) and the answer (``answer``)."""
    verdict = model.complete(triage_request(goal, constraints), purpose="plan")
    if not says_chat(verdict.content or ""):
        return None
    reply = model.complete(
        [
            Message(role="system", content=load_prompt("direct_answer")),
            Message(role="user", content=asked(goal, constraints)),
        ],
        purpose="answer",
    )
    answer = (reply.content or "").strip()
    if answer and reply.cut:  # ended at the answer's max_tokens: say so rather than pass a torso off as whole
        answer += " [… cut]"
    return answer or None
