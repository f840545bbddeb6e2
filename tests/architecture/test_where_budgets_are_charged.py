"""Where a budget is charged, read from the source: model usage is added up in one module only
(``orchestrator/llm/usage_ledger.py``), and "the Act's time is up" is decided in one module only
(``orchestrator/time_budget.py``). Everything else reads what they say.

The word-level rules:

- No ``+=`` (or ``-=``) on a usage counter (``tokens_in``, ``tokens_out``, ``model_calls``, ``cached_tokens``,
  ``cache_hits``, ``response_cache_hits``, ``prompt_tokens``, ``completion_tokens``) and no ``sum(…)`` over one,
  outside the ledger: a count kept beside the ledger is a second ledger.
- A model response's ``usage`` is read only in the model layer (``llm/``), which reports it, and the ledger.
- The Act's ``time_budget_ms`` is turned into time in the time rule's module only; the other readers listed below
  pass it on or widen it, they never decide whether time is up.
"""

from __future__ import annotations

import ast
from pathlib import Path

import orchestrator

PACKAGE = Path(orchestrator.__file__).parent
LEDGER = "llm/usage_ledger.py"
TIME_RULE = "time_budget.py"
COUNTERS = {"tokens_in", "tokens_out", "model_calls", "cached_tokens", "cache_hits", "response_cache_hits",
            "prompt_tokens", "completion_tokens"}
ADDS_UP: dict[str, str] = {
    "validate/stats.py": "validation statistics add up the reports' tokens, each report's read from the ledger",
}
"""Modules that may add up a usage counter, and why it is no second count of model requests."""
USAGE_READERS = ("llm/", "testing/")
"""Where a response's ``usage`` may be read: the adapters that report it, the fakes that make it up."""
TIME_BUDGET_READERS: dict[str, str] = {
    "worker/time_limits.py": "widens the budget to its ceiling for the broker's visibility timeout",
    "act/engine.py": "the remaining budget of an Act refused before it started: all of it",
}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(p.relative_to(PACKAGE)), ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(PACKAGE.rglob("*.py"))
    ]


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _counted_by_hand(name: str, tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.AugAssign) and _name(node.target) in COUNTERS:
            found.append(f"{name}:{node.lineno} adds to {_name(node.target)}")
        elif isinstance(node, ast.Call) and _name(node.func) == "sum":
            summed = {_name(n) for a in node.args for n in ast.walk(a) if isinstance(n, ast.Attribute)} & COUNTERS
            found += [f"{name}:{node.lineno} sums {s}" for s in sorted(summed)]
    return found


def _usage_read(name: str, tree: ast.Module) -> list[str]:
    return [f"{name}:{node.lineno} reads .usage" for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "usage" and isinstance(node.ctx, ast.Load)]


def _time_budget_read(name: str, tree: ast.Module) -> list[str]:
    return [f"{name}:{node.lineno} reads .time_budget_ms" for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "time_budget_ms"]


def test_model_usage_is_added_up_in_the_ledger_only() -> None:
    wrong = [f for name, tree in _modules() if name not in {LEDGER, *ADDS_UP} for f in _counted_by_hand(name, tree)]
    assert not wrong, f"usage counted beside the ledger ({LEDGER}); read a Spending instead:\n" + "\n".join(wrong)


def test_a_responses_usage_is_read_by_the_model_layer_only() -> None:
    wrong = [f for name, tree in _modules() if not name.startswith(USAGE_READERS) for f in _usage_read(name, tree)]
    assert not wrong, f"read the request's entry in the ledger ({LEDGER}) instead:\n" + "\n".join(wrong)


def test_the_acts_time_is_read_by_the_time_rule_only() -> None:
    readers = {TIME_RULE, *TIME_BUDGET_READERS}
    wrong = [f for name, tree in _modules() if name not in readers for f in _time_budget_read(name, tree)]
    assert not wrong, f"ask the time rule ({TIME_RULE}) whether time is up:\n" + "\n".join(wrong)


def test_every_exception_is_still_needed() -> None:
    modules = dict(_modules())
    assert all(_counted_by_hand(name, modules[name]) for name in ADDS_UP)
    assert all(_time_budget_read(name, modules[name]) for name in TIME_BUDGET_READERS)
    assert all(len(reason) >= 20 for reason in [*ADDS_UP.values(), *TIME_BUDGET_READERS.values()])


def test_the_checks_can_fail() -> None:
    tree = ast.parse(
        "def f(r, m):\n"
        "    m.tokens_in += r.usage.prompt_tokens\n"
        "    calls = sum(x.model_calls for x in r)\n"
        "    left = m.time_budget_ms / 1000 - 1\n"
    )
    assert _counted_by_hand("x.py", tree) == ["x.py:2 adds to tokens_in", "x.py:3 sums model_calls"]
    assert _usage_read("x.py", tree) == ["x.py:2 reads .usage"]
    assert _time_budget_read("x.py", tree) == ["x.py:4 reads .time_budget_ms"]
    fine = ast.parse("def g(m):\n    m.tool_calls += 1\n    return sum(x.ms for x in m)\n")
    assert _counted_by_hand("x.py", fine) == []
