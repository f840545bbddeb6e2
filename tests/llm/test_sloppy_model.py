"""Goals driven by a sloppy model, the way a small real model behind a server without a tool parser answers: calls
only as text (bare JSON, fences, tags, lists, arguments as a string, trailing chatter), invented paths sent twice,
unknown tools, missing or mistyped arguments, single quotes, empty and runaway replies cut at ``max_tokens``, plans
and verdicts wrapped in prose. Through ``run --model openai:NAME`` and the real ``openai`` client: work the bundled
skills can do ends ``done``; work they cannot ends ``unmet`` within its budgets, never blamed on a skill."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import Budgets
from orchestrator.llm.textcalls import read_text_calls
from orchestrator.testing.sloppy_model import HABITS, SloppyPolicy, _attempts, _comparable, intents_in
from orchestrator.testing.sloppy_server import MODEL_NAME, SloppyServer

REPO = Path(__file__).resolve().parents[2]
INTENTS = intents_in(REPO / "ops" / "scenarios")
IMPOSSIBLE = [
    "Transcribe the attached podcast recording into subtitles",
    "Make a 3-slide deck from the figures in q4.xlsx",
    "Book a meeting room for Friday and email the team",
]
TOLD = {"invented_path": ("no such file in the skill", "no such script in the skill"),
        "unknown_tool": ("unknown tool",), "missing_argument": ("is required", "nothing to check")}
"""What the model is told after the mistake of a habit."""


@pytest.fixture(scope="module")
def server() -> Iterator[SloppyServer]:
    with SloppyServer(INTENTS) as served:
        yield served


def run(server: SloppyServer, goal: str, env: dict[str, str], tmp_path: Path, inputs: tuple[Path, ...] = (),
        *extra: str) -> dict[str, Any]:
    args = ["run", goal, "--skills", str(REPO / "skills"), "--out", str(tmp_path / "out"),
            "--model", f"openai:{MODEL_NAME}", "--json", *extra]
    for path in inputs:
        args += ["--input", str(path)]
    env = {**env, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sloppy-no-key"}
    proc = subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True,
                          timeout=900, env=env, cwd=tmp_path)
    assert proc.stdout, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout)
    assert proc.returncode == (0 if result["status"] == "done" else 1)
    return result


def model_errors(result: dict[str, Any]) -> list[str]:
    return [r["error"] for s in result["skills"] for r in s["evidence_summary"] if r.get("error")]


@pytest.mark.parametrize("salt", ["", "1"])
@pytest.mark.parametrize("goal", sorted(INTENTS), ids=lambda g: g[:40])
def test_work_the_skills_can_do_ends_done_however_sloppy_the_model(server, cli_env, tmp_path, goal, salt):
    server.policy.salt = salt
    before = len(server.exchanges)
    result = run(server, goal, cli_env, tmp_path, INTENTS[goal].inputs)
    assert result["status"] == "done", (result["unmet"], result["error"])
    planned = [o["path"] for s in json.loads(INTENTS[goal].plan)["steps"] for o in s.get("outputs", [])]
    assert all((tmp_path / "out" / path).is_file() for path in planned)
    replies = [reply for _, reply in server.exchanges[before:]]
    assert not any(r.get("tool_calls") for r in replies)  # every call the runtime ran was written as text
    errors = "\n".join(model_errors(result))
    for reply in replies:  # each mistake went back to the model as an error it could act on
        if reply["mistake"] and reply["habit"] in TOLD:
            assert any(told in errors for told in TOLD[reply["habit"]]), (reply["habit"], reply["content"][:200])
    assert not [u for u in result["unmet"] if "missing from the skill" in u["why"]]


@pytest.mark.parametrize("salt", ["", "1"])
@pytest.mark.parametrize("goal", IMPOSSIBLE, ids=lambda g: g[:30])
def test_work_the_skills_cannot_do_ends_unmet_within_budget_with_the_blame_on_the_model(server, cli_env, tmp_path,
                                                                                        goal, salt):
    server.policy.salt = salt
    result = run(server, goal, cli_env, tmp_path)
    assert result["status"] == "unmet"
    budgets = Budgets()
    assert result["metrics"]["model_calls"] <= budgets.goal_model_calls
    assert result["metrics"]["tokens_in"] + result["metrics"]["tokens_out"] <= budgets.goal_token_budget
    assert all(s["metrics"]["tool_calls"] <= budgets.max_tool_calls for s in result["skills"])
    assert not [u for u in result["unmet"] if "missing from the skill" in u["why"]]
    assert not [s for s in result["skills"] if s.get("exit_reason") == "sandbox_violation"]


def test_the_sloppy_model_ends_every_habit_with_the_right_calls_readably() -> None:
    """The fake itself: whatever a step's habit, its last attempt is the intended call(s) (or a variant the runtime
    takes as meant), readable as text."""
    offered = {"read_ref", "read_file", "write_artifact", "validate", "run_script", "template_expand", "finish",
               "list_files"}
    tried = set()
    for intent in INTENTS.values():
        for skill, steps in intent.acts.items():
            for index, calls in enumerate(steps):
                following = steps[index + 1] if index + 1 < len(steps) else None
                for habit in HABITS:
                    replies = _attempts(habit, calls, following, skill, steps[-1])
                    tried.add(replies[0].habit)
                    found = read_text_calls(replies[-1].content, offered)
                    got = [(c.name, _comparable(json.loads(c.arguments))) for c in found.calls]
                    assert got[: len(calls)] == [(c["name"], _comparable(c["arguments"])) for c in calls], habit
    assert tried == set(HABITS)


def test_the_sloppy_model_reads_what_a_request_is_for_from_the_request() -> None:
    policy = SloppyPolicy(INTENTS)
    goal = next(iter(INTENTS))
    plan = policy.answer({"messages": [{"role": "user", "content": f"Goal: {goal}\nSkills catalog (L1):\n- x: x"}],
                          "max_tokens": 64})
    assert plan.finish_reason in ("stop", "length") and plan.content
    reflect = policy.answer({"messages": [{"role": "user", "content": f"Goal: {goal}"},
                                          {"role": "user", "content": "Micro-Reflect: what is missing?"}],
                             "max_tokens": 16})
    assert reflect.habit in ("short", "runaway") and len(reflect.content) <= 16 * 4 + 4
