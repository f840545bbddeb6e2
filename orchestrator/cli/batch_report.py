"""``jobs --batch B --report FILE.html``: one self-contained page per batch — a timeline read at a glance (one row
per job, its phase runs coloured by how they ended, attempts on the bars, waits and lost workers with their cause,
a one-line summary per job, the workers as a filter), then each job's state, duration and reason, and the live
workers. Drawn with plotly; its JavaScript is inlined, so the file opens offline and can be mailed as it is. Every
label comes from the ledger (goal lines, models, workers): masked and escaped."""

from __future__ import annotations

import html
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from orchestrator.cli.common import plain
from orchestrator.config import Settings
from orchestrator.logs import mask_secrets
from orchestrator.worker.records import JobRecord
from orchestrator.worker.views import reason_of, shown_state

STATE_COLOURS = {"done": "#2e7d32", "unmet": "#f9a825", "failed": "#c62828", "cancelled": "#6a1b9a"}


def _safe(value: object) -> str:
    """Ledger text (goals, reasons, worker names came from goal lines and models): masked, escaped for HTML."""
    return html.escape(plain(mask_secrets(str(value))))


def _when(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


RETRIED = "retried"
OUTCOME_COLOURS = {**STATE_COLOURS, RETRIED: "#ef6c00", "running": "#1565c0", "queued": "#90a4ae"}
"""A bar's colour says how its attempt ended: the job's outcome, or ``retried`` for an attempt run again."""
MIN_BAR_SHARE = 0.006
"""A phase shorter than this share of the batch's span is drawn this wide (hover says its real duration)."""
WAIT_SHOWN_S = 1.0
"""A gap between a job's phases longer than this is drawn as waiting, with its cause."""


def _category(record: JobRecord, entry: dict[str, Any]) -> str:
    """How a phase run ended, for its colour: ``retried`` when its attempt was run again (lost, handed back,
    cancelled under it), else the job's state."""
    outcome = str(entry.get("outcome"))
    if outcome in ("lost", "lease_lost") or outcome.startswith("given_back"):
        return RETRIED
    return record.state if record.state in STATE_COLOURS else ("running" if record.running else "queued")


def _wait_cause(previous: dict[str, Any]) -> str:
    """Why a job waited after ``previous``: its cause, said from the history entry that ended before the wait."""
    outcome = str(previous.get("outcome"))
    if outcome == "lost":
        return (f"worker {previous.get('worker')} was lost (stopped heart-beating); taken over by "
                f"{previous.get('taken_over_by', '?')}")
    if outcome.startswith("given_back"):
        return f"handed back: {previous.get('reason') or outcome}"
    return "queued: waiting for a free worker"


def _job_line(record: JobRecord) -> str:
    """One line per job: state, attempts, phases run, and the reason or what it made."""
    made = ", ".join(str(a.get("path")) for a in record.artifacts[:3]) or "no files"
    why = reason_of(record) if record.state in ("failed", "unmet", "cancelled") else made
    return f"{record.state}, {record.attempts} attempt(s), {len(record.history)} phase run(s): {why}"[:200]


def timeline(records: list[JobRecord]) -> go.Figure:
    """One row per job, one bar per phase run coloured by how it ended (done, unmet, failed, cancelled, retried),
    the attempt on the bar past the first, the waits between phases drawn with their cause (a lost worker, a
    hand-back, a queue), a ✕ where a worker was lost; the workers are a filter (the menu), never the colour."""
    fig = go.Figure()
    starts = [float(h["start"]) for r in records for h in r.history] or [time.time()]
    ends = [float(h.get("end") or h["start"]) for r in records for h in r.history] or [time.time()]
    floor_ms = max(1.0, (max(ends) - min(starts)) * 1000 * MIN_BAR_SHARE)
    shown: set[str] = set()
    workers_of: list[str | None] = []  # per trace: the worker it belongs to (None: always shown)
    for r in records:
        row = _safe(r.job_id)
        previous: dict[str, Any] | None = None
        for h in sorted(r.history, key=lambda e: float(e["start"])):
            start, end = float(h["start"]), float(h.get("end") or h["start"])
            if previous is not None and start - float(previous.get("end") or previous["start"]) > WAIT_SHOWN_S:
                gap_from = float(previous.get("end") or previous["start"])
                fig.add_trace(go.Scatter(
                    x=[_when(gap_from), _when(start)], y=[row, row], mode="lines",
                    line={"color": "#b0bec5", "dash": "dot", "width": 2}, showlegend=False, hoverinfo="text",
                    hovertext=[_safe(f"waited {start - gap_from:.1f} s: {_wait_cause(previous)}")] * 2,
                ))
                workers_of.append(None)
            category = _category(r, h)
            attempt = int(h.get("attempt") or 1)
            label = f"{h['phase']} #{attempt}" if attempt > 1 else str(h["phase"])
            worker = str(h.get("worker"))
            text = (f"{row} {_safe(h['phase'])} (attempt {attempt})<br>worker {_safe(worker)}<br>{end - start:.2f} s "
                    f"→ {_safe(h.get('outcome'))}" + (f"<br>{_safe(h.get('reason'))}" if h.get("reason") else ""))
            fig.add_trace(go.Bar(
                x=[max((end - start) * 1000, floor_ms)], base=[_when(start)], y=[row], orientation="h",
                marker_color=OUTCOME_COLOURS.get(category, "#607d8b"), name=category, legendgroup=category,
                showlegend=category not in shown, hovertext=[text], hoverinfo="text",
                text=[_safe(label)], textposition="inside", insidetextanchor="middle",
            ))
            shown.add(category)
            workers_of.append(worker)
            if h.get("outcome") == "lost":
                fig.add_trace(go.Scatter(
                    x=[_when(end)], y=[row], mode="markers", marker_symbol="x", marker_size=12,
                    marker_color=OUTCOME_COLOURS[RETRIED], name="worker lost", showlegend="lost" not in shown,
                    hovertext=[_safe(f"worker {worker} lost during {h['phase']}: {h.get('reason') or ''}")],
                    hoverinfo="text",
                ))
                shown.add("lost")
                workers_of.append(None)
            previous = h
        fig.add_annotation(x=1.0, xref="paper", xanchor="left", y=row, text=_safe(_job_line(r)), showarrow=False,
                           font={"size": 10}, align="left")
    names = sorted({w for w in workers_of if w is not None})
    menu = [{"label": "all workers", "method": "restyle", "args": [{"visible": [True] * len(workers_of)}]}]
    menu += [{"label": _safe(n), "method": "restyle",
              "args": [{"visible": [w is None or w == n for w in workers_of]}]} for n in names]
    fig.update_layout(
        barmode="overlay", xaxis={"type": "date", "title": "time (UTC)"},
        yaxis={"autorange": "reversed", "title": "job", "type": "category"},
        height=max(300, 80 + 30 * len(records)), margin={"l": 10, "r": 380, "t": 60, "b": 40},
        title="each job's phases, coloured by how they ended", legend={"title": "outcome"},
        updatemenus=[{"buttons": menu, "direction": "down", "x": 0, "y": 1.12, "xanchor": "left",
                      "showactive": True}],
    )
    return fig


def write_report(
    path: Path, batch: str, records: list[JobRecord], facts: dict[str, Any], settings: Settings,
    *, workers: list[dict[str, Any]] | None = None,
) -> None:
    chart = timeline(records).to_html(full_html=False, include_plotlyjs=True, div_id="timeline")
    rows = []
    for r in records:
        state, _ = shown_state(r, settings)
        seconds = (r.finished_at or time.time()) - r.submitted_at
        rows.append(
            f'<tr class="job" data-job="{_safe(r.job_id)}" data-state="{state}"><td>{_safe(r.job_id)}</td>'
            f'<td style="color:{STATE_COLOURS.get(state, "#333")}">{state}</td><td>{r.attempts}</td>'
            f"<td>{seconds:.1f} s</td><td>{_safe(r.worker or '-')}</td><td>{_safe(r.goal[:200])}</td>"
            f'<td class="reason">{_safe(reason_of(r))}</td></tr>'
        )
    counts = ", ".join(f"{_safe(k)} {v}" for k, v in facts["counts"].items())
    d = facts["durations"]
    durations = (f"{d['ended']} ended: min {d['min_s']} s, median {d['median_s']} s, max {d['max_s']} s; "
                 f"batch wall time {d.get('wall_s')} s") if d["ended"] else "no job ended yet"
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>batch {_safe(batch)}</title>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}} .reason{{max-width:50em}}</style>
</head><body>
<h1>batch {_safe(batch)}</h1>
<p id="counts">{len(records)} jobs — {counts}</p>
<p id="durations">{durations}</p>
{chart}
<h2>jobs</h2>
<table id="jobs"><tr><th>job</th><th>state</th><th>attempts</th><th>duration</th><th>worker</th><th>goal</th>
<th>reason</th></tr>
{chr(10).join(rows)}
</table>
<h2>workers</h2>
<ul id="workers">{_workers_list(workers or [])}</ul>
<p>written {_when(time.time()).strftime('%Y-%m-%d %H:%M:%S')} UTC from the job ledger</p>
</body></html>
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")


def _workers_list(workers: list[dict[str, Any]]) -> str:
    """The live workers when the report was written; one that is not ready says what it lacks."""
    if not workers:
        return "<li>none alive</li>"
    items = []
    for w in workers:
        state = "ready" if w["ready"] else "not ready: " + "; ".join(w["missing"] or ["checking"])
        items.append(f'<li class="worker" data-ready="{str(w["ready"]).lower()}">{_safe(w["name"])} — '
                     f"{_safe(state)}</li>")
    return "".join(items)
