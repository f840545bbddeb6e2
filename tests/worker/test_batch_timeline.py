"""The batch timeline is read at a glance: one row per job, each phase run coloured by how it ended (done, unmet,
failed, cancelled, retried), its attempt on the bar, the waits between phases drawn with their cause, a lost worker
marked, a one-line summary per job, the workers a filter (never the colour), every label escaped."""

from __future__ import annotations

import json
import time

from orchestrator.cli.batch_report import OUTCOME_COLOURS, STATE_COLOURS, timeline
from orchestrator.worker.records import JobRecord

HOSTILE = '<img src=x onerror=alert(1)>'


def _record(job_id: str, state: str, history: list[dict], **fields: object) -> JobRecord:
    t0 = time.time() - 100
    return JobRecord.model_validate({
        "job_id": job_id, "goal": "g", "state": state, "submitted_at": t0, "finished_at": t0 + 90,
        "history": [{"start": t0 + h["at"], "end": t0 + h["at"] + h.get("for", 2), **h} for h in history],
        **fields,
    })


def _figure() -> dict:
    records = [
        _record("ok-job", "done", [{"phase": "plan", "worker": "w1@h:1", "attempt": 1, "at": 0, "outcome": "act:0"},
                                   {"phase": "act:0", "worker": "w1@h:1", "attempt": 1, "at": 2, "for": 0.01,
                                    "outcome": "reflect"}],
                artifacts=[{"path": "brand.json"}], attempts=1),
        _record("lost-job", "failed", [
            {"phase": "act:1", "worker": f"w2@{HOSTILE}", "attempt": 1, "at": 5, "for": 10, "outcome": "lost",
             "taken_over_by": "w1@h:9", "reason": f"taken over: worker w2@{HOSTILE} stopped heart-beating"},
            {"phase": "act:1", "worker": "w1@h:1", "attempt": 2, "at": 40, "outcome": "end"},
        ], attempts=2, reason=f"script said {HOSTILE}"),
    ]
    return json.loads(timeline(records).to_json())


def test_bars_are_coloured_by_outcome_and_a_retried_attempt_apart() -> None:
    bars = [t for t in _figure()["data"] if t["type"] == "bar"]
    colours = [(t["y"][0], t["text"][0], t["marker"]["color"]) for t in bars]
    assert colours == [
        ("ok-job", "plan", STATE_COLOURS["done"]),
        ("ok-job", "act:0", STATE_COLOURS["done"]),
        ("lost-job", "act:1", OUTCOME_COLOURS["retried"]),
        ("lost-job", "act:1 #2", STATE_COLOURS["failed"]),  # the attempt is on the bar
    ]
    shortest = min(t["x"][0] for t in bars)
    assert shortest > 10  # a 10 ms phase is drawn wide enough to see (hover says its real duration)


def test_waits_and_lost_workers_are_drawn_with_their_cause_and_workers_are_a_filter() -> None:
    figure = _figure()
    lines = [t for t in figure["data"] if t["type"] == "scatter" and t.get("mode") == "lines"]
    assert any("was lost" in t["hovertext"][0] and "taken over by w1@h:9" in t["hovertext"][0] for t in lines)
    marks = [t for t in figure["data"] if t["type"] == "scatter" and t.get("mode") == "markers"]
    assert len(marks) == 1 and "lost during act:1" in marks[0]["hovertext"][0]
    menu = figure["layout"]["updatemenus"][0]["buttons"]
    assert [b["label"] for b in menu][0] == "all workers" and len(menu) == 3  # w1@h:1 and the hostile one
    summaries = [a["text"] for a in figure["layout"]["annotations"]]
    assert summaries[0].startswith("done, 1 attempt(s), 2 phase run(s): brand.json")
    assert summaries[1].startswith("failed, 2 attempt(s)")


def test_every_label_from_the_ledger_is_escaped() -> None:
    text = json.dumps(_figure())
    assert HOSTILE not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
