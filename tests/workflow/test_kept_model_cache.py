"""A worker's runtime factory answers repeats from the response cache and keeps its kept scripted server in step.

A worker process keeps one scripted model (client and scenario server) per thread for goal after goal, and opens a
runtime per phase from the cursor saved with the goal. The only thing a phase hands on is that cursor: turns the
cache answered are counted into it, and nothing of one job's phase is left in the kept client for the next job.
Each step of the script checks what it is asked, so a conversation out of step fails with a mismatch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config import Settings
from orchestrator.errors import ModelError
from orchestrator.llm.headers import split_cursor
from orchestrator.llm.interface import Message, Purpose
from orchestrator.workflow.runtime import Runtimes, RuntimeSpec

SCRIPT = """
goal: count
steps:
  - {purpose: plan, expect: {contains: [count]}, reply: {content: one}}
  - {purpose: act, expect: {contains: [first]}, reply: {content: two}}
  - {purpose: act, expect: {contains: [second]}, reply: {content: three}}
"""


class Worker:
    """Phases of jobs on one worker thread: ``Runtimes(keep_models=True)``, a runtime per phase."""

    def __init__(self, root: Path) -> None:
        self.settings = Settings(cache_dir=root / "cache")
        self.skills = root / "skills"
        self.skills.mkdir()
        self.scenario = root / "count.yaml"
        self.scenario.write_text(SCRIPT)
        self.runtimes = Runtimes(keep_models=True)
        self.saved: dict[str, str | None] = {}
        """Each job's cursor, as its checkpoint keeps it."""

    def phase(self, job: str, purpose: Purpose, text: str, *, use_memo: bool = True) -> tuple[str | None, bool]:
        spec = RuntimeSpec(
            self.settings, self.skills, f"scripted:{self.scenario}", job_id=job, cursor=self.saved.get(job),
            use_memo=use_memo,
        )
        with self.runtimes.open(spec) as rt:
            reply = rt.model.complete([Message(role="user", content=text)], purpose=purpose)
            self.saved[job] = rt.cursor("0")
        return reply.content, reply.cache_hit


@pytest.fixture
def worker(tmp_path: Path):  # type: ignore[no-untyped-def]
    w = Worker(tmp_path)
    yield w
    w.runtimes.close()


def test_a_repeated_goal_on_a_worker_is_answered_from_the_cache_phase_after_phase(worker: Worker) -> None:
    first = [worker.phase("job-a", "plan", "count"), worker.phase("job-a", "act", "first"),
             worker.phase("job-a", "act", "second")]
    assert first == [("one", False), ("two", False), ("three", False)]
    assert worker.phase("job-b", "plan", "count") == ("one", True)
    assert worker.phase("job-b", "act", "first") == ("two", True)
    assert worker.phase("job-b", "act", "second") == ("three", True)
    assert split_cursor(worker.saved["job-b"] or "") == ("0", {"plan": 1, "act": 2})


def test_turns_one_job_took_from_the_cache_never_move_another_jobs_script(worker: Worker) -> None:
    for purpose, text in (("plan", "count"), ("act", "first"), ("act", "second")):
        worker.phase("job-a", purpose, text)  # type: ignore[arg-type]
    assert worker.phase("job-b", "plan", "count") == ("one", True)  # its phase ends on a cached turn
    assert worker.phase("job-c", "plan", "count, for c") == ("one", False)  # the same kept client, from the start
    assert worker.phase("job-b", "act", "first") == ("two", True)
    assert worker.phase("job-c", "act", "first, for c") == ("two", False)
    assert worker.phase("job-b", "act", "second, said otherwise") == ("three", False)  # passed over plan and act
    assert worker.saved["job-b"] == "3"


def test_no_memo_asks_the_model_every_time(worker: Worker) -> None:
    assert worker.phase("job-a", "plan", "count") == ("one", False)
    assert worker.phase("job-b", "plan", "count", use_memo=False) == ("one", False)
    with pytest.raises(ModelError, match="scenario_mismatch|step 2"):
        worker.phase("job-b", "act", "second", use_memo=False)  # step 2 wants "first": the script is really played
