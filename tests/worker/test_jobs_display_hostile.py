"""What a goal, a model or a script left in the ledger is shown literally by `jobs`: no markup interpreted (a stray
closing tag must not crash the listing), no terminal control sequence, no secret, one line per field."""

from __future__ import annotations

from worker_helpers import Cluster

from orchestrator.worker.records import JobRecord

HOSTILE_GOAL = "[/x] close \x1b]0;pwned\x07 \x1b[2J [bold]loud[/bold] \x9b31m key sk-abcdefghijklmnopqrst"


def _plant(cluster: Cluster) -> None:
    cluster.ledger().create(
        JobRecord(
            job_id="hostile-1",
            goal=HOSTILE_GOAL,
            state="failed",
            reason="[/] broken at http://alice:s3cretpass@model.example/v1",
            plan=["[red]skill[/red]"],
            artifacts=[{"path": "two\nlines.txt", "size": 1, "sha256": "0" * 64}],
            result={
                "notes": ["not re-planned: goal budget spent (5 of 5 model calls used) [bold]x[/bold] \x1b[2J"],
                # a rewritten record's scores need not be numbers: shown as they are, never a crash
                "scores": [{"point": "p [b]x[/b]", "score": "[/] high \x1b[2J", "reason": "r"}],
                "score": {"not": "a number"},
            },
        )
    )


def test_the_jobs_listing_and_one_job_show_hostile_text_literally(cluster: Cluster) -> None:
    _plant(cluster)
    for args in (("jobs",), ("jobs", "hostile-1")):
        done = cluster.cli(*args)
        assert done.returncode == 0, done.stderr
        shown = done.stdout
        assert "Traceback" not in done.stderr
        assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown
        assert "sk-abcdefghijklmnopqrst" not in shown and "s3cretpass" not in shown
        assert "[/x]" in shown.replace("\n", "")  # shown as written, not taken for markup
    one = cluster.cli("jobs", "hostile-1").stdout
    assert "[bold]loud[/bold]" in one and "[red]skill[/red]" in one
    assert "two\\nlines.txt" in one
    assert "note: not re-planned: goal budget spent (5 of 5 model calls used) [bold]x[/bold]" in one
    assert "[/] high" in one and "p [b]x[/b] — r" in one and "score: {'not': 'a number'}" in one
