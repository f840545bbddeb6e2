"""The ledger of model requests records each request once, where it was charged; every figure is a sum over it."""

from __future__ import annotations

import pytest

from orchestrator.config import Budgets
from orchestrator.errors import BudgetExceeded, ModelError
from orchestrator.llm.interface import Message, ModelResponse, Usage
from orchestrator.llm.usage_ledger import LedgerModel, ModelRequest, Spending, UsageLedger, metered
from orchestrator.testing import FunctionModel, ScriptedModel, text_response

HELLO = [Message(role="user", content="hello")]


def _reply(prompt: int, completion: int, cached: int = 0, cache_hit: bool = False) -> ModelResponse:
    usage = Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)
    return ModelResponse(content="ok", usage=usage, cache_hit=cache_hit)


def test_each_request_is_recorded_once_with_what_it_was_for_and_what_it_used() -> None:
    ledger = UsageLedger()
    model = LedgerModel(ScriptedModel([_reply(100, 10, cached=40), _reply(0, 0, cache_hit=True)]), ledger,
                        charged_to="act", step=2)
    model.complete(HELLO, purpose="act")
    model.complete(HELLO, purpose="reflect")
    first, second = ledger.requests
    assert (first.purpose, first.charged_to, first.step) == ("act", "act", 2)
    assert (first.prompt_tokens, first.completion_tokens, first.cached_tokens, first.cache_hit) == (100, 10, 40, False)
    assert (second.purpose, second.cache_hit) == ("reflect", True)
    spent = ledger.spent()
    assert (spent.requests, spent.model_calls, spent.cache_hits) == (2, 1, 1)
    assert (spent.tokens_in, spent.tokens_out, spent.cached_tokens, spent.tokens) == (100, 10, 40, 110)


def test_budgets_count_cached_prompt_tokens_only_when_told_to() -> None:
    spent = Spending.of([ModelRequest(purpose="act", prompt_tokens=1_000, completion_tokens=100, cached_tokens=900)])
    assert spent.counted(Budgets()) == 1_100
    assert spent.counted(Budgets(count_cached_tokens=False)) == 200


def test_slices_read_what_was_spent_after_a_mark_and_by_what_it_was_charged_to() -> None:
    ledger = UsageLedger()
    ledger.record(ModelRequest(purpose="plan", charged_to="plan", prompt_tokens=5))
    mark = ledger.mark()
    ledger.record(ModelRequest(purpose="act", charged_to="act", step=0, prompt_tokens=7))
    ledger.record(ModelRequest(purpose="plan", charged_to="replan", prompt_tokens=11))
    assert ledger.since(mark).tokens_in == 18
    assert ledger.spent("plan", "replan").tokens_in == 16 and ledger.spent("act").tokens_in == 7


def test_a_refused_or_failed_request_records_nothing() -> None:
    ledger = UsageLedger()

    def refuse() -> None:
        raise BudgetExceeded("spent", where="budget")

    never = FunctionModel(lambda *_: text_response("never sent"))
    refused = LedgerModel(never, ledger, charged_to="plan", guard=refuse)
    with pytest.raises(BudgetExceeded):
        refused.complete(HELLO)
    def down(*_: object) -> ModelResponse:
        raise ModelError("the server is down", where="model")

    failing = LedgerModel(FunctionModel(down), ledger, charged_to="plan")
    with pytest.raises(ModelError):
        failing.complete(HELLO)
    assert ledger.requests == [] and never.calls == []


def test_a_model_that_already_records_is_not_wrapped_twice() -> None:
    ledger = UsageLedger()
    goal = LedgerModel(ScriptedModel([_reply(3, 1)]), ledger, charged_to="final_check")
    assert metered(goal, "other") is goal  # so the semantic check inside a goal records in the goal's ledger, once
    metered(goal).complete(HELLO, purpose="semantic")
    assert [r.charged_to for r in ledger.requests] == ["final_check"]
    own = metered(ScriptedModel([_reply(3, 1)]))
    own.complete(HELLO)
    assert own.ledger is not ledger and own.ledger.spent().tokens == 4


def test_the_ledger_reads_back_from_its_saved_form() -> None:
    ledger = UsageLedger()
    ledger.record(ModelRequest(purpose="act", charged_to="act", step=1, prompt_tokens=9, cache_hit=False, ms=12))
    assert UsageLedger.model_validate_json(ledger.model_dump_json()) == ledger
