"""SUMMARY's ``answer`` lists what the goal made for the user, not what the runtime rendered to look at it."""

from __future__ import annotations

from orchestrator.act.act_io import Artifact
from orchestrator.workflow.goal import GoalResult


def test_the_answer_lists_made_files_and_leaves_out_the_renders_of_the_output_check() -> None:
    result = GoalResult(
        job_id="j", goal="a deck", status="done",
        artifacts=[
            Artifact(path=".thumbnails/deck.pptx/deck.pdf", size=45575, mime="application/pdf"),
            Artifact(path=".thumbnails/deck.pptx/contact.png", size=35177, type="thumbnail"),
            Artifact(path="deck.pptx", size=34323),
            Artifact(path="notes/.thumbnails.md", size=9),
        ],
    )
    assert result.answer == "Made deck.pptx (34323 bytes), notes/.thumbnails.md (9 bytes)."
