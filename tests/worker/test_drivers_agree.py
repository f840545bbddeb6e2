"""`run` and a worker are two drivers of one goal machine: a goal that breaks at its third step reports the same
plan, artifacts and metrics through both, built from the state saved after step 2.

The worker's driver runs here phase by phase against a real (private) Redis ledger, with the phases it queues
collected in a list instead of Celery; the model and the sandbox are the in-memory fakes, the same for both.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from worker_helpers import RedisServer

from orchestrator.config import load_settings
from orchestrator.errors import ModelError, ModelErrorCode, SandboxError, SandboxErrorCode
from orchestrator.skills.loader import SkillLibrary
from orchestrator.testing import FunctionModel, ScriptedModel, json_response, tool_call_response
from orchestrator.testing.memory_sandbox import InMemorySandbox
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.phases import PhaseContext, run_phase
from orchestrator.worker.records import JobRecord, JobRequest
from orchestrator.workflow.embedded import run_goal
from orchestrator.workflow.goal import GoalResult
from orchestrator.workflow.request import BudgetOverrides, GoalRequest, budgeted
from orchestrator.workflow.runtime import Runtime, RuntimeSpec

GOAL = "three notes, one after the other"


class ToolListUnreadableAtStep3(InMemorySandbox):
    """The image's tool list cannot be read: step 3, which declares a tool it requires, breaks before any model
    call (an error of the job's image, not of the worker: the job fails rather than being handed back)."""

    def image_tools(self) -> dict[str, str]:
        raise SandboxError("the sandbox image's tool list cannot be read", code=SandboxErrorCode.NO_TOOL_LIST,
                           where="sandbox")


def _skills(root: Path) -> Path:
    for name, extra in (("notes-a", ""), ("notes-b", ""), ("notes-c", "requires-tools: [python3]\n")):
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Write {name}.md.\n{extra}---\nWrite it.\n")
    return root


def _model() -> ScriptedModel:
    return ScriptedModel(_responses(), estimate_usage=True)


def _responses() -> list[Any]:
    plan = {"steps": [{"skill": f"notes-{x}", "outputs": [f"{x}.md"]} for x in "abc"]}
    act: list[Any] = []
    for x in "ab":
        act += [
            tool_call_response("write_artifact", path=f"{x}.md", text=f"# notes {x}\n"),
            tool_call_response("finish", summary=f"{x}.md written", outputs=[f"build/{x}.md"]),
        ]
    return [json_response(plan, prompt_tokens=300, completion_tokens=40), *act]


class FakeRuntimes:
    """A runtime factory handing every phase the same fake model and sandbox (as one process would)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    @contextmanager
    def open(self, spec: RuntimeSpec) -> Iterator[Runtime]:
        yield self.rt


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


def _through_run(tmp_path: Path, skills: Path) -> GoalResult:
    settings = load_settings(cache_dir=tmp_path / "run-cache")
    rt = Runtime(settings=settings, model=_model(), library=SkillLibrary(skills), sandbox=ToolListUnreadableAtStep3({}))
    return run_goal(GoalRequest(goal=GOAL), tmp_path / "run-out", rt)


def _through_a_worker(tmp_path: Path, skills: Path, redis_server: RedisServer) -> tuple[GoalResult, JobRecord]:
    settings = load_settings(
        cache_dir=tmp_path / "worker-cache", output_root=tmp_path / "worker-out", skills_dir=skills
    )
    ledger = Ledger.from_url(redis_server.url)
    ledger.create(JobRecord(job_id="parity", goal=GOAL, submitted_at=time.time()))
    rt = Runtime(settings=settings, model=_model(), library=SkillLibrary(skills), sandbox=ToolListUnreadableAtStep3({}))
    queued = ["plan"]
    context = PhaseContext(
        settings=settings, ledger=ledger, worker="w1", enqueue=lambda record, phase, **_: queued.append(phase),
        runtimes=FakeRuntimes(rt), remove_containers=lambda settings, job_id: 0,
    )
    ran = []
    while queued:
        ran.append(queued.pop(0))
        assert run_phase(context, "parity", ran[-1]) == "ok"
    assert ran == ["plan", "act:0", "act:1", "act:2"]  # the broken step ends the job: no reflect
    record = ledger.get("parity")
    assert record is not None and record.result is not None
    return GoalResult.model_validate(record.result), record


def test_a_goal_broken_at_step_3_reports_steps_1_and_2_the_same_through_run_and_a_worker(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    skills = _skills(tmp_path / "skills")
    by_run = _through_run(tmp_path, skills)
    by_worker, record = _through_a_worker(tmp_path, skills, redis_server)

    for result in (by_run, by_worker):
        assert result.status == "failed"
        assert result.error is not None and result.error.code == "no_tool_list"
        assert result.error.message == "the sandbox image's tool list cannot be read"
        assert [s.skill for s in result.plan.steps] == ["notes-a", "notes-b", "notes-c"]
        assert [(a.path, a.partial) for a in result.artifacts] == [("a.md", True), ("b.md", True)]
        assert [(s.skill_id, s.status) for s in result.skills] == [("notes-a", "done"), ("notes-b", "done")]
        assert result.metrics.model_calls == 5 and result.metrics.tool_calls == 4
    assert by_worker.error == by_run.error
    assert by_worker.plan == by_run.plan
    assert [(a.path, a.sha256, a.version) for a in by_worker.artifacts] == [
        (a.path, a.sha256, a.version) for a in by_run.artifacts
    ]
    same = {"tokens_in", "tokens_out", "tool_calls", "model_calls", "containers", "memo_hits", "disclosure"}
    assert by_worker.metrics.model_dump(include=same) == by_run.metrics.model_dump(include=same)
    assert by_worker.validation == by_run.validation and by_worker.plan_calls == by_run.plan_calls == 1
    assert (record.state, record.reason) == ("failed", "the sandbox image's tool list cannot be read")
    assert [a["path"] for a in record.artifacts] == ["a.md", "b.md"]
    assert (tmp_path / "worker-out" / "parity" / "b.md").read_text() == "# notes b\n"


def _worker_job(tmp_path: Path, skills: Path, redis_server: RedisServer, model: Any, job_id: str) -> tuple[Any, list]:
    settings = load_settings(
        cache_dir=tmp_path / "worker-cache", output_root=tmp_path / "worker-out", skills_dir=skills,
        worker={"max_attempts": 3},
    )
    ledger = Ledger.from_url(redis_server.url)
    ledger.create(JobRecord(job_id=job_id, goal=GOAL, submitted_at=time.time()))
    rt = Runtime(settings=settings, model=model, library=SkillLibrary(skills), sandbox=ToolListUnreadableAtStep3({}))
    queued = ["plan"]
    context = PhaseContext(
        settings=settings, ledger=ledger, worker="w1", enqueue=lambda record, phase, **_: queued.append(phase),
        runtimes=FakeRuntimes(rt), remove_containers=lambda settings, job_id: 0,
    )
    outcomes = []
    while queued:
        outcomes.append((queued[0], run_phase(context, job_id, queued.pop(0))))
    return ledger.get(job_id), outcomes


def _rate_limited(*_: Any) -> Any:
    raise ModelError("the model server said: slow down", code=ModelErrorCode.RATE_LIMITED, retryable=True)


def test_a_retryable_error_sends_the_phase_back_to_the_queue_a_bounded_number_of_times(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    skills = _skills(tmp_path / "skills")
    record, outcomes = _worker_job(tmp_path, skills, redis_server, FunctionModel(_rate_limited), "retried")
    assert outcomes == [("plan", "given_back"), ("plan", "given_back"), ("plan", "exhausted")]
    assert record.state == "failed" and "slow down" in record.reason and "3 attempts" in record.reason
    assert [h["outcome"] for h in record.history] == ["given_back:queued", "given_back:queued", "given_back:exhausted"]


def test_a_retryable_error_that_passes_lets_the_job_go_on(tmp_path: Path, redis_server: RedisServer) -> None:
    skills = _skills(tmp_path / "skills")
    model = ScriptedModel([_rate_limited, *_responses()])  # the first plan call is refused, then all goes well
    record, outcomes = _worker_job(tmp_path, skills, redis_server, model, "flaky")
    assert outcomes[:2] == [("plan", "given_back"), ("plan", "ok")] and record.attempts == 2
    assert [s["skill_id"] for s in record.result["skills"]][:2] == ["notes-a", "notes-b"]


def _never_finishes(messages: list[Any], tools: list[Any], purpose: str) -> Any:
    """Plans the three notes, then writes one more page on every Act turn and never finishes."""
    if purpose == "plan":
        return _responses()[0]
    page = sum(m.role == "assistant" for m in messages)
    return tool_call_response("write_artifact", path=f"page-{page}.md", text=f"page {page}\n")


class JobSettingsRuntimes(FakeRuntimes):
    """The fake factory, but each phase's runtime has the job's settings (its goal line's budgets applied)."""

    @contextmanager
    def open(self, spec: RuntimeSpec) -> Iterator[Runtime]:
        yield dataclasses.replace(self.rt, settings=spec.settings)


def test_a_goal_out_of_its_budget_ends_unmet_the_same_through_run_and_a_worker(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    skills = _skills(tmp_path / "skills")
    budgets = {"goal_model_calls": 4}  # the plan and three turns of the first step: `run --budget`, a goal line's
    run_settings = budgeted(load_settings(cache_dir=tmp_path / "run-cache"), BudgetOverrides(**budgets))
    rt = Runtime(settings=run_settings, model=FunctionModel(_never_finishes), library=SkillLibrary(skills),
                 sandbox=InMemorySandbox({}))
    by_run = run_goal(GoalRequest(goal=GOAL), tmp_path / "run-out", rt)

    settings = load_settings(
        cache_dir=tmp_path / "worker-cache", output_root=tmp_path / "worker-out", skills_dir=skills
    )
    ledger = Ledger.from_url(redis_server.url)
    ledger.create(JobRecord(job_id="spent", goal=GOAL, submitted_at=time.time(),
                            request=JobRequest(goal=GOAL, model="scripted", budgets=budgets)))
    model = FunctionModel(_never_finishes)
    worker_rt = Runtime(settings=settings, model=model, library=SkillLibrary(skills), sandbox=InMemorySandbox({}))
    queued = ["plan"]
    context = PhaseContext(settings=settings, ledger=ledger, worker="w1", runtimes=JobSettingsRuntimes(worker_rt),
                           enqueue=lambda record, phase, **_: queued.append(phase), remove_containers=lambda s, j: 0)
    ran = []
    while queued:
        ran.append(queued.pop(0))
        assert run_phase(context, "spent", ran[-1]) == "ok"
    assert ran == ["plan", "act:0", "reflect"]  # steps 2 and 3 are not run: nothing is left for them
    record = ledger.get("spent")
    assert record is not None and record.result is not None and record.state == "unmet"
    by_worker = GoalResult.model_validate(record.result)

    for result in (by_run, by_worker):
        assert result.status == "unmet" and result.metrics.model_calls == 4
        assert [(s.skill_id, s.exit_reason) for s in result.skills] == [("notes-a", "budget_goal")]
        assert result.notes == [
            "steps 2-3 (notes-b, notes-c) not run: goal budget spent (4 of 4 model calls used)",
            "not re-planned after step 1 (notes-a) stayed unmet: goal budget spent (4 of 4 model calls used)",
            "not finished because of the model function-model: notes-a (budget_goal); a stronger model may finish it",
        ]
        assert [(a.path, a.partial) for a in result.artifacts] == [(f"page-{n}.md", True) for n in range(3)]
    assert len(model.calls) == 4
    # the ledger says why, as it says why a failed job failed: the `jobs` listing's reason column
    assert record.reason is not None and record.reason.startswith("skill notes-a — the goal's budget is spent")
    assert "steps 2-3 (notes-b, notes-c) not run: goal budget spent (4 of 4 model calls used)" in record.reason
