"""Tools that work in the orchestrator process stop at size caps and at the Act's time budget.

Attack: two 100 KB files of unlike lines made ``diff`` run 60 s in the orchestrator against an 8 s Act budget.
"""

from __future__ import annotations

import random
import time

from act_helpers import act

from orchestrator.act.tools.reading import DIFF_MAX_CHARS, SUMMARY_MAX_CHARS
from orchestrator.config import Budgets
from orchestrator.testing.scripted_model import (
    FunctionModel,
    ScriptedModel,
    tool_call,
    tool_call_response,
    tool_calls_response,
)


def _unlike(seed: int, lines: int = 30_000, values: int = 200) -> str:
    """About 100 KB of short lines drawn from a few hundred values: difflib's slow case (seconds, growing
    quadratically), each value too rare to be dropped as junk."""
    rng = random.Random(seed)
    return "\n".join(f"v{rng.randrange(values)}" for _ in range(lines))


def test_a_diff_of_two_unlike_files_stops_at_the_acts_time_budget(write_skill, skills_root, settings, tmp_path):
    write_skill("d", "Compare.", files={"a.txt": _unlike(1), "b.txt": _unlike(2)})
    model = ScriptedModel([tool_call_response("diff", a_path="a.txt", b_path="b.txt")])
    started = time.monotonic()
    result = act("d", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
                 budgets=Budgets(time_budget_ms=1500))
    assert time.monotonic() - started < 12
    assert result.exit_reason == "budget_time"
    [step] = [r for r in result.evidence_summary if r.tool == "diff"]
    assert step.ok is False and "took longer" in (step.error or "")


def test_texts_over_the_diff_cap_are_only_compared_whole(write_skill, skills_root, settings, tmp_path):
    big = "x\n" * (DIFF_MAX_CHARS // 2 + 10)
    write_skill("d", "Compare.", files={"a.txt": big, "b.txt": big + "y\n"})
    model = ScriptedModel([
        tool_call_response("diff", a_path="a.txt", b_path="b.txt"),
        tool_call_response("finish", summary="compared"),
    ])
    started = time.monotonic()
    act("d", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    assert time.monotonic() - started < 10
    reply = model.calls[1].messages[-1].content or ""
    assert '"too_large": true' in reply and '"identical": false' in reply


def test_summarize_reads_at_most_its_cap(write_skill, skills_root, settings, tmp_path):
    write_skill("s", "Summaries.")
    model = ScriptedModel([
        tool_calls_response(tool_call("summarize", text="# Title\n\n" + "word " * (SUMMARY_MAX_CHARS // 4))),
        tool_call_response("finish", summary="done"),
    ])
    act("s", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    reply = model.calls[1].messages[-1].content or ""
    assert "cut to its first" in reply and "# Title" in reply


def test_thumbnails_are_not_started_once_the_acts_time_budget_is_spent(write_skill, skills_root, settings, tmp_path,
                                                                         sandbox_runner):
    """Thumbnails (LibreOffice in the sandbox, seconds each) count against the Act's budget like any tool.

    The budget is wide enough for the job's set-up and the write even on a loaded machine (both count against it);
    the model's last turn then ends past the budget, whenever the Act's clock started (at or before the first turn).
    """
    import base64
    import io

    from pptx import Presentation

    from orchestrator.testing import FunctionModel

    deck = io.BytesIO()
    Presentation().save(deck)
    write_skill("deck", "Write a deck.")
    budget_s = 8.0
    first_turn: list[float] = []

    def answer(messages, tools, purpose):  # noqa: ANN001, ANN202 - a function of the turn, not of the prompt
        if not first_turn:
            first_turn.append(time.monotonic())
            return tool_call_response("write_artifact", path="deck.pptx",
                                      base64=base64.b64encode(deck.getvalue()).decode())
        time.sleep(max(0.0, first_turn[0] + budget_s + 0.2 - time.monotonic()))  # the last turn ends past the budget
        return tool_call_response("finish", summary="done", outputs=["build/deck.pptx"])

    result = act("deck", FunctionModel(answer), skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 qa_mode="off", sandbox=sandbox_runner, budgets=Budgets(time_budget_ms=int(budget_s * 1000)))
    assert result.status == "done", (result.exit_reason, result.final_message, result.evidence_summary)
    assert [r.tool for r in result.evidence_summary if r.tool == "thumbnail"] == []
    assert not any(a.type == "thumbnail" for a in result.artifacts)
    assert result.metrics.containers == 0  # no rendering container was started


def test_a_render_for_view_image_gets_only_what_is_left_of_the_acts_time_budget(
    write_skill, skills_root, settings, tmp_path, sandbox_runner
):
    """LibreOffice takes seconds: a render started near the end of the budget is stopped with it."""
    import base64
    import io

    from pptx import Presentation

    deck = io.BytesIO()
    Presentation().save(deck)
    write_skill("deck", "Write a deck and look at it.")
    budget_s, left_for_render_s = 4.0, 0.6
    started = time.monotonic()

    def answer(messages, tools, purpose):
        if not any(m.role == "tool" for m in messages):
            return tool_call_response(
                "write_artifact", path="deck.pptx", base64=base64.b64encode(deck.getvalue()).decode()
            )
        # the render starts with at most `left_for_render_s` of the budget left, however fast the machine is
        time.sleep(max(0.0, started + budget_s - left_for_render_s - time.monotonic()))
        return tool_call_response("view_image", path="build/deck.pptx")

    result = act("deck", FunctionModel(answer), skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 qa_mode="off", sandbox=sandbox_runner, budgets=Budgets(time_budget_ms=int(budget_s * 1000)))
    elapsed = time.monotonic() - started
    views = [r for r in result.evidence_summary if r.tool == "view_image"]
    assert result.exit_reason == "budget_time"
    assert len(views) == 1, "the budget ended the Act during the first render"
    assert "timed out" in (views[0].error or ""), f"the render was not stopped with the budget: {views[0]}"
    assert elapsed < budget_s + 6
