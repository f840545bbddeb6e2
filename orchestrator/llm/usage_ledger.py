"""The one ledger of model requests: where every budget is charged.

Every request a goal sends — the plan and its re-plans, each Act's turns and Micro-Reflect, a finish's own semantic
check, the final semantic check, the SCORED scoring — goes through a :class:`LedgerModel` and is recorded here once,
as a :class:`ModelRequest`: its purpose, the part of the goal it was charged to, the usage the API reported, whether
the response cache answered it and how long it took. The ledger is plain data inside the goal's saved state, so it
survives a worker's phase boundaries.

Nothing else counts tokens or model calls. Every budget (the Act's tokens and model calls, the goal's tokens and
calls, ``max_plan_calls``, the plan's tokens) and every metric (``tokens_in``, ``tokens_out``, ``model_calls``,
``cached_tokens``, ``response_cache_hits``) is a :class:`Spending`: a sum over a slice of this record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.config import Budgets
from orchestrator.llm.interface import ChatModel, Message, ModelResponse, Purpose, ToolSpec

ChargedTo = Literal["plan", "replan", "act", "final_check", "respond", "other"]
"""The part of a goal a request was made for: the first plan, a re-plan, an Act (its turns, its Micro-Reflect and a
finish's own check), the final semantic check, the SCORED scoring; ``other`` for a caller outside a goal."""

PLANNING: tuple[ChargedTo, ...] = ("plan", "replan")
"""What ``selection.max_plan_calls`` and ``selection.plan_token_budget`` bound."""


class ModelRequest(BaseModel):
    """One model request, as it was charged."""

    model_config = ConfigDict(frozen=True)

    purpose: Purpose
    """What the request asked for, as sent (``X-Orch-Purpose``)."""
    charged_to: ChargedTo = "other"
    step: int | None = None
    """The plan step an Act request belongs to (its index), None outside an Act."""
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    cached_tokens: int = Field(0, ge=0)
    """Prompt tokens the provider served from its own prompt cache (part of ``prompt_tokens``)."""
    cache_hit: bool = False
    """Answered from the response cache: nothing was sent (no tokens, and no model call)."""
    ms: int = Field(0, ge=0)


class Spending(BaseModel):
    """What a slice of the ledger spent: the figures every budget and metric is read from."""

    model_config = ConfigDict(frozen=True)

    requests: int = 0
    """Requests made, response-cache hits included."""
    model_calls: int = 0
    """Requests sent to the model (a response-cache hit sends none)."""
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cached_tokens: int = 0
    ms: int = 0

    @classmethod
    def of(cls, requests: Iterable[ModelRequest]) -> Spending:
        done = list(requests)
        return cls(
            requests=len(done),
            model_calls=sum(not r.cache_hit for r in done),
            cache_hits=sum(r.cache_hit for r in done),
            tokens_in=sum(r.prompt_tokens for r in done),
            tokens_out=sum(r.completion_tokens for r in done),
            cached_tokens=sum(r.cached_tokens for r in done),
            ms=sum(r.ms for r in done),
        )

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def counted(self, limits: Budgets) -> int:
        """The tokens a token budget counts (a cached prompt prefix only while ``count_cached_tokens``)."""
        return limits.counted(self.tokens_in, self.tokens_out, self.cached_tokens)


class UsageLedger(BaseModel):
    """Every model request of a goal, in the order they were made. Append-only: :meth:`record` is its one writer."""

    requests: list[ModelRequest] = []

    def record(self, request: ModelRequest) -> None:
        self.requests.append(request)

    def mark(self) -> int:
        """A position to read what was spent after it (:meth:`since`)."""
        return len(self.requests)

    def since(self, mark: int) -> Spending:
        return Spending.of(self.requests[mark:])

    def spent(self, *charged_to: ChargedTo) -> Spending:
        """What the requests charged to any of ``charged_to`` spent; every request's when none is named."""
        return Spending.of(r for r in self.requests if not charged_to or r.charged_to in charged_to)


class LedgerModel:
    """A ``ChatModel`` that records each request it makes in ``ledger``, charged to ``charged_to`` (and ``step``).

    ``guard`` runs before each request and may refuse it by raising (the goal's budget: ``workflow.budget``). A
    request that raises records nothing: no usage was reported for it.
    """

    def __init__(
        self,
        model: ChatModel,
        ledger: UsageLedger,
        *,
        charged_to: ChargedTo,
        step: int | None = None,
        guard: Callable[[], None] | None = None,
    ) -> None:
        self._model = model
        self.name = model.name
        self.ledger = ledger
        self.charged_to: ChargedTo = charged_to
        self.step = step
        self._guard = guard

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        purpose: Purpose = "other",
        json_response: bool = False,
    ) -> ModelResponse:
        if self._guard is not None:
            self._guard()
        started = time.monotonic()
        response = self._model.complete(messages, tools=tools, purpose=purpose, json_response=json_response)
        usage = response.usage
        self.ledger.record(
            ModelRequest(
                purpose=purpose,
                charged_to=self.charged_to,
                step=self.step,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                cached_tokens=usage.cached_tokens,
                cache_hit=response.cache_hit,
                ms=int((time.monotonic() - started) * 1000),
            )
        )
        return response


def metered(model: ChatModel, charged_to: ChargedTo = "other") -> LedgerModel:
    """``model`` itself when it already records into a ledger (a goal's: each request is recorded once, where the
    goal charged it), else ``model`` recording into a ledger of its own (a caller outside a goal)."""
    if isinstance(model, LedgerModel):
        return model
    return LedgerModel(model, UsageLedger(), charged_to=charged_to)
