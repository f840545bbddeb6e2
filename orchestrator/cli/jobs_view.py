"""What ``jobs`` does (cli/jobs.py holds its options): list, show, trace, watch, control jobs and batches.

A module of its own so ``jobs --help`` loads none of it: the ledger, Redis and rich's tables load when the command
runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import redis
import typer
from rich.live import Live
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from orchestrator.api.views import batch_view, job_view
from orchestrator.cli.common import emit_json, fail, state
from orchestrator.cli.ledger_access import COLOURS, Outage, console, literal, open_ledger
from orchestrator.cli.remote import (
    BatchDoor,
    api_client,
    batch_control,
    check_batch_exists,
    download_via_api,
    print_outcome,
    remote_ledger,
)
from orchestrator.config import Settings
from orchestrator.errors import ConfigError, OrchestratorError
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.names import SHOWN_STATES
from orchestrator.worker.records import JobRecord
from orchestrator.worker.views import (
    batch_report,
    no_worker_note,
    shown_state,
    state_label,
    summary,
    workers_view,
)


def run_jobs(
    ctx: typer.Context,
    job_id: str | None,
    *,
    as_json: bool,
    watch: bool,
    trace: bool,
    limit: int,
    state_filter: str | None,
    batch: str | None,
    report: Path | None,
    cancel: bool,
    rerun: bool,
    download: Path | None,
    workers: bool = False,
) -> None:
    try:
        _check_options(job_id, state_filter, batch, report, cancel, rerun, download, trace)  # before Redis is asked
        settings = state(ctx).settings()
        client = api_client()  # a producer's path: the API, with ORCH_API_URL and ORCH_API_KEY
        ledger = remote_ledger(client) if client is not None else open_ledger(settings)
        door = BatchDoor(settings, ledger=None if client is not None else ledger, client=client)
        if job_id is not None and ledger.get(job_id) is None:
            raise ConfigError(f"no job {job_id!r} in the ledger", where="jobs", next_step="list jobs with `jobs`")
        batch_records = check_batch_exists(door, batch) if batch is not None else []
    except OrchestratorError as e:
        fail(e, as_json=as_json, code=2)
    if job_id is not None and (cancel or rerun or download is not None):
        if client is not None and download is not None:
            raise typer.Exit(download_via_api(client, job_id, download, as_json=as_json))
        if client is not None:
            kind = "cancel" if cancel else "rerun"
            raise typer.Exit(print_outcome(kind, client.control(f"/v1/jobs/{job_id}/{kind}")[1], as_json=as_json))
        # Deferred: controlling a job sends Celery tasks; showing one needs neither Celery nor the producer's code.
        from orchestrator.cli.job_control import cancel_job, download_job, rerun_job

        if cancel:
            raise typer.Exit(cancel_job(ledger, settings, job_id, as_json=as_json))
        if rerun:
            raise typer.Exit(rerun_job(ledger, settings, job_id, as_json=as_json))
        assert download is not None
        raise typer.Exit(download_job(ledger, settings, job_id, download, as_json=as_json))
    if batch is not None and (cancel or rerun or download is not None):
        raise typer.Exit(batch_control(door, batch, cancel=cancel, rerun=rerun, download=download, as_json=as_json))
    if client is not None and as_json and not trace and not watch:  # the API's own answer, as the ledger path prints
        if batch is not None:
            _show_batch(ledger, settings, batch, batch_records, report, as_json=False, quiet=True)
            emit_json({**(client.batch(batch) or {}), "report": str(report) if report else None})
        else:
            emit_json(client.job(job_id) if job_id is not None else
                      client.jobs(limit=limit, state=state_filter, full=False))
        return
    if trace:
        assert job_id is not None
        _print_trace(ledger, job_id, as_json=as_json)
        return
    if batch is not None:
        _show_batch(ledger, settings, batch, batch_records, report, as_json=as_json)
        return
    if watch and not as_json:
        _watch(ledger, settings, job_id, limit, state_filter)
        return
    if job_id is not None:
        record = ledger.get(job_id)
        assert record is not None
        if as_json:
            emit_json(_record_json(ledger, settings, record))
        else:
            _print_record(ledger, settings, record)
        return
    if workers:
        if as_json:
            emit_json(workers_view(ledger))
        else:
            _print_workers(workers_view(ledger))
        return
    records = _listing(ledger, settings, limit, state_filter)
    note = no_worker_note(ledger)
    if as_json:
        emit_json([summary(r, settings, note=note) for r in records])
        return
    out = console()
    out.print(_jobs_table(records, settings, title=_title(records, state_filter)))
    if note and any(shown_state(r, settings)[0] == "queued" for r in records):
        out.print(literal(f"queued jobs wait: {note}"), style="yellow", highlight=False)
    _print_workers(workers_view(ledger))


def _print_workers(workers: list[dict[str, Any]]) -> None:
    """The workers section: each live worker, ready or not, and what a worker that is not ready lacks."""
    out = console()
    if not workers:
        out.print(literal("workers: none alive (python -m orchestrator worker starts one)"), style="yellow",
                  highlight=False)
        return
    table = Table(title="workers")
    for col in ("worker", "state", "why not ready", "seen"):
        table.add_column(col, overflow="fold")
    for w in workers:
        state = Text("ready", style="green") if w["ready"] else Text("not ready", style="red")
        why = literal("; ".join(w["missing"]) or "-")
        table.add_row(literal(w["name"]), state, why, f"{w['seen_s_ago']:.0f} s ago")
    out.print(table)


def _check_options(
    job_id: str | None, state_filter: str | None, batch: str | None, report: Path | None,
    cancel: bool, rerun: bool, download: Path | None, trace: bool,
) -> None:
    if state_filter is not None and state_filter not in SHOWN_STATES:
        raise ConfigError(f"--state {state_filter!r}: expected one of {', '.join(SHOWN_STATES)}", where="cli")
    needs_id = [name for name, on in (("--cancel", cancel), ("--rerun", rerun), ("--download", download is not None),
                                      ("--trace", trace)) if on]
    if needs_id and job_id is None and (batch is None or trace):
        raise ConfigError(f"{needs_id[0]} needs a job id or a batch: jobs ID {needs_id[0]} or jobs --batch B "
                          f"{needs_id[0]}", where="cli")
    if len(needs_id) > 1:
        raise ConfigError(f"one of {', '.join(needs_id)} at a time", where="cli")
    if report is not None and batch is None:
        raise ConfigError("--report needs --batch B: jobs --batch B --report FILE.html", where="cli")


def _title(records: list[JobRecord], state_filter: str | None) -> str:
    return f"{len(records)} {state_filter + ' ' if state_filter else ''}jobs (newest first)"


def _listing(ledger: Ledger, settings: Settings, limit: int, state_filter: str | None) -> list[JobRecord]:
    remote = getattr(ledger, "listing", None)  # through the API: it filters on its side, in one call
    if remote is not None:
        return list(remote(limit=limit, state=state_filter))
    if state_filter is None:
        return ledger.all(limit=limit)
    found = []
    for job_id in ledger.job_ids():
        record = ledger.get(job_id)
        if record is not None and shown_state(record, settings)[0] == state_filter:
            found.append(record)
            if len(found) >= limit:
                break
    return found


def _record_json(ledger: Ledger, settings: Settings, record: JobRecord) -> dict[str, Any]:
    return job_view(ledger, settings, record)


def _show_batch(
    ledger: Ledger, settings: Settings, batch: str, records: list[JobRecord], report: Path | None, *, as_json: bool,
    quiet: bool = False,
) -> None:
    facts = batch_report(records, settings)
    if report is not None:
        # Deferred: plotly is loaded only when a report is asked for.
        from orchestrator.cli.batch_report import write_report

        write_report(report, batch, records, facts, settings, workers=workers_view(ledger))
    if quiet:
        return
    if as_json:
        emit_json({**batch_view(settings, batch, records, str(report) if report else None),
                   "workers": workers_view(ledger)})
        return
    out = console()
    out.print(_jobs_table(records, settings, title=f"batch {batch}: {len(records)} jobs"))
    counts = facts["counts"]
    out.print(literal("states: " + ", ".join(f"{k} {v}" for k, v in counts.items())), highlight=False)
    d = facts["durations"]
    if d["ended"]:
        out.print(literal(f"durations of {d['ended']} ended jobs: min {d['min_s']} s, median {d['median_s']} s, "
                          f"max {d['max_s']} s; batch wall time {d.get('wall_s')} s"), highlight=False)
    for f in facts["failures"]:
        out.print(Text(f"{f['job_id']} {f['state']}", style=COLOURS.get(f["state"], "white"))
                  + literal(f": {f['reason'] or '-'}"), highlight=False)
    if report is not None:
        out.print(literal(f"report: {report}"), highlight=False)


def _jobs_table(records: list[JobRecord], settings: Settings, *, title: str) -> Table:
    table = Table(title=title)
    for col in ("job", "state", "step", "attempts", "worker", "heartbeat", "goal", "reason"):
        table.add_column(col, overflow="fold")
    now = time.time()
    for r in records:
        shown, since = state_label(r, settings, now), shown_state(r, settings, now)[1]
        step = f"{r.step + 1}/{r.steps_total} {r.skill or ''}" if r.step is not None and r.steps_total else "-"
        beat = f"{now - r.heartbeat:.0f} s ago" if r.heartbeat and r.running else "-"
        if since is not None:
            shown = f"stalled since {time.strftime('%H:%M:%S', time.localtime(since))}"
        cells = (r.job_id, shown, step, str(r.attempts), r.worker or "-", beat, r.goal[:60], r.reason or "-")
        row = [literal(cell) for cell in cells]
        row[1].stylize(COLOURS.get(shown.split(" ")[0], ""))
        table.add_row(*row)
    return table


def _watch(ledger: Ledger, settings: Settings, job_id: str | None, limit: int, state_filter: str | None) -> None:
    outage = Outage(settings, "jobs")
    shown: list[Table] = [Table(title="waiting for Redis")]

    def render() -> Any:
        try:
            if job_id is None:
                records = _listing(ledger, settings, limit, state_filter)
                table = _jobs_table(records, settings, title=_title(records, state_filter))
            else:
                table = _jobs_table([r for r in [ledger.get(job_id)] if r is not None], settings, title=job_id)
            outage.back()
            shown[0] = table
        except redis.RedisError as e:  # a restart or a dropped connection: say so once, keep the last table
            outage.lost(e)
            shown[0].title = f"Redis unreachable for {outage.seconds():.0f} s: the table as last read"
        return shown[0]

    try:
        with Live(render(), console=console(), refresh_per_second=2) as live:
            while True:
                time.sleep(1)
                live.update(render())
    except KeyboardInterrupt:
        pass


def _print_record(ledger: Ledger, settings: Settings, record: JobRecord) -> None:
    out = console()
    facts = summary(record, settings, note=no_worker_note(ledger) if record.state == "queued" else None)
    shown = facts["state"]
    out.print(Text(record.job_id, style="bold") + literal(f" {shown} — {record.goal}"), highlight=False)
    out.print(
        literal(f"attempts {record.attempts}, worker {record.worker or '-'}, plan {' → '.join(record.plan) or '-'}, "
                f"batch {record.batch or '-'}, run {record.run}"),
        highlight=False,
    )
    if "note" in facts:
        out.print(literal(f"note: {facts['note']}"), style="yellow", highlight=False)
    if record.reason:
        out.print(literal(f"reason: {record.reason}"), highlight=False)
    result = record.result or {}
    for note in result.get("notes") or []:  # e.g. which budget ended the goal, a retry or re-plan refused
        out.print(literal(f"note: {note}"), style="yellow", highlight=False)
    out.print(literal(f"output folder: {facts['out_dir']}"), highlight=False)
    out.print(literal(f"evidence: {facts['evidence_path'] or '- (written when the job ends)'}"), highlight=False)
    for a in record.artifacts:
        partial = "  (partial)" if a.get("partial") else ""
        out.print(literal(f"  {a.get('path')}  {a.get('size')} bytes  sha256:{str(a.get('sha256'))[:12]}{partial}"),
                  highlight=False)
    for v in record.skills.loaded:
        out.print(literal(f"  skill {v.id} sha256:{v.sha256[:12]}"), highlight=False)
    for h in record.history:
        out.print(
            literal(f"  {h['phase']:<8} attempt {h['attempt']} on {h['worker']}: "
                    f"{h['end'] - h['start']:.2f} s → {h['outcome']}"),
            highlight=False,
        )
    for n, line in enumerate(str(result.get("answer") or "").splitlines()):  # a line at a time, as run prints it
        out.print(literal(f"answer: {line}" if n == 0 else line), highlight=False)
    for s in result.get("scores") or []:
        out.print(literal(f"  {_score(s.get('score'))}  {s.get('point')} — {s.get('reason')}"), highlight=False)
    if result.get("score") is not None:
        out.print(literal(f"score: {_score(result['score'])}"), highlight=False)
    for earlier in ledger.earlier_runs(record.job_id, record.run):
        out.print(literal(f"  earlier run {earlier.run}: {earlier.state} — {earlier.reason or '-'}"), highlight=False)
    if record.trace_id:
        out.print(f"trace {record.trace_id} (jobs {record.job_id} --trace)", highlight=False)


def _score(value: Any) -> str:
    """A score as ``run`` prints it (two decimals); what else a rewritten record holds, as it is."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return f"{value:.2f}" if number else str(value)


def _print_trace(ledger: Any, job_id: str, *, as_json: bool) -> None:
    record = ledger.get(job_id)
    spans = ledger.spans(record.trace_id) if record and record.trace_id else []
    if as_json:
        emit_json({"job_id": job_id, "trace_id": record.trace_id if record else None, "spans": spans})
        return
    children: dict[str | None, list[dict[str, Any]]] = {}
    ids = {s["span_id"] for s in spans}
    goal_span = record.span_id if record else None
    lost_parents: dict[str, float] = {}  # a phase span that never ended (its worker was lost): its children's start
    for s in sorted(spans, key=lambda s: s["start"]):
        parent = s["parent_id"] if s["parent_id"] in ids else None
        if parent is None and s["parent_id"] and s["parent_id"] != goal_span:
            parent = s["parent_id"]
            lost_parents.setdefault(parent, s["start"])
        children.setdefault(parent, []).append(s)
    tree = Tree(f"trace {record.trace_id if record else '?'}")
    lost_runs = [h for h in (record.history if record else []) if h.get("outcome") == "lost"]

    def add(node: Tree, span: dict[str, Any]) -> None:
        attrs = {k.removeprefix("orch."): v for k, v in span["attributes"].items() if k != "orch.job_id"}
        text = f"{span['name']}  {(span['end'] - span['start']) * 1000:.0f} ms"
        if attrs:
            text += "  " + " ".join(f"{k}={v}" for k, v in attrs.items())
        branch = node.add(Text(text))  # names and errors may come from the model or a script: never markup
        for child in children.get(span["span_id"], []):
            add(branch, child)

    for root in children.get(None, []):
        add(tree, root)
    for parent, started in lost_parents.items():
        run = next((h for h in lost_runs if float(h["start"]) - 1 <= started <= float(h["end"]) + 1), None)
        said = (f"{run['phase']} attempt {run['attempt']} on {run['worker']}: lost (taken over by "
                f"{run.get('taken_over_by', '?')})" if run else "a phase whose worker was lost before it ended")
        branch = tree.add(literal(said))
        for child in children.get(parent, []):
            add(branch, child)
    console().print(tree, highlight=False)
