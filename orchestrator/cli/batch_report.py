"""``jobs --batch B --report FILE.html``: one self-contained page per batch — a timeline (Gantt chart) of every
job's phases on their workers, then each job's state, duration and reason. Drawn with plotly; its JavaScript is
inlined, so the file opens offline and can be mailed or archived as it is."""

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
from orchestrator.worker.ledger import JobRecord
from orchestrator.worker.views import reason_of, shown_state

STATE_COLOURS = {"done": "#2e7d32", "unmet": "#f9a825", "failed": "#c62828", "cancelled": "#6a1b9a"}
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


def _safe(value: object) -> str:
    """Ledger text (goals, reasons, worker names came from goal lines and models): masked, escaped for HTML."""
    return html.escape(plain(mask_secrets(str(value))))


def _when(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def timeline(records: list[JobRecord]) -> go.Figure:
    """One row per job, one bar per phase run, coloured by the worker that ran it."""
    workers = sorted({str(h.get("worker")) for r in records for h in r.history})
    colour = {w: PALETTE[i % len(PALETTE)] for i, w in enumerate(workers)}
    fig = go.Figure()
    shown: set[str] = set()
    for r in records:
        for h in r.history:
            worker = str(h.get("worker"))
            start, end = float(h["start"]), float(h.get("end") or h["start"])
            text = (f"{_safe(r.job_id)} {_safe(h['phase'])} (attempt {h.get('attempt')})<br>worker {_safe(worker)}"
                    f"<br>{end - start:.2f} s → {_safe(h.get('outcome'))}")
            fig.add_trace(go.Bar(
                x=[max((end - start) * 1000, 1)], base=[_when(start)], y=[_safe(r.job_id)], orientation="h",
                marker_color=colour[worker], name=_safe(worker), legendgroup=worker,
                showlegend=worker not in shown, hovertext=[text], hoverinfo="text",
                text=[_safe(h["phase"])], textposition="inside", insidetextanchor="middle",
            ))
            shown.add(worker)
        if r.state in ("failed", "unmet", "cancelled") and r.finished_at:
            fig.add_trace(go.Scatter(
                x=[_when(r.finished_at)], y=[_safe(r.job_id)], mode="markers", marker_symbol="x", marker_size=12,
                marker_color=STATE_COLOURS[r.state], name=r.state, legendgroup=r.state, showlegend=r.state not in shown,
                hovertext=[f"{_safe(r.job_id)} {_safe(r.state)}: {_safe(reason_of(r) or '-')}"], hoverinfo="text",
            ))
            shown.add(r.state)
    fig.update_layout(
        barmode="overlay", xaxis={"type": "date", "title": "time (UTC)"},
        yaxis={"autorange": "reversed", "title": "job", "type": "category"},
        height=max(300, 60 + 28 * len(records)), margin={"l": 10, "r": 10, "t": 40, "b": 40},
        title="phases of each job on their workers", legend={"title": "worker / outcome"},
    )
    return fig


def write_report(
    path: Path, batch: str, records: list[JobRecord], facts: dict[str, Any], settings: Settings
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
<p>written {_when(time.time()).strftime('%Y-%m-%d %H:%M:%S')} UTC from the job ledger</p>
</body></html>
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
