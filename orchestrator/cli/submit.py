"""``submit``: queue goal lines as one batch, and with ``--wait`` follow them to the end, saying what goes on."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import redis
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from orchestrator.cli.common import emit_json, fail, notice, state
from orchestrator.cli.ledger_access import COLOURS, Outage, console, literal, open_ledger
from orchestrator.config import Settings
from orchestrator.errors import ConfigError, OrchestratorError
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import TERMINAL, JobRecord
from orchestrator.worker.views import no_worker_note, shown_state, state_label, summary

EXIT_TIMEOUT = 3
"""``submit --wait --timeout S`` ended before every job did."""
REDIS_OUTAGE_S = 600.0
"""``submit --wait`` rides out a Redis outage this long (a restart, a dropped connection), then stops waiting
(exit ``EXIT_TIMEOUT``; the jobs go on)."""
PROGRESS_EVERY_S = 5.0
"""Off a terminal, a progress line this often (a CI log shows the batch moving)."""


def submit(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="A JSONL file of goal lines, or - for stdin.")],
    wait: Annotated[bool, typer.Option("--wait", help="Wait until every queued job ends; show a summary.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help=f"With --wait: give up after this many seconds (exit {EXIT_TIMEOUT}; 0: wait as long as it takes).",
        ),
    ] = 0,
    batch: Annotated[
        str | None, typer.Option("--batch", help="Batch id for these jobs (default: a new one); see jobs --batch.")
    ] = None,
    rerun: Annotated[
        bool, typer.Option("--rerun", help="Run again lines whose job id ended failed, unmet or cancelled.")
    ] = False,
) -> None:
    # Deferred: the Celery app is built when its module is imported (from ORCH_CONFIG), so it loads only in
    # the commands that talk to the broker, after the settings are known.
    # Deferred: the API's client (httpx) loads only when a producer goes through the API.
    from orchestrator.cli.remote import api_client, remote_ledger
    from orchestrator.worker.celery_app import create_app
    from orchestrator.worker.dispatch import enqueue_phase

    # Deferred: checking goal lines loads the goal's request models and job ids, not needed for --help.
    from orchestrator.worker.submit import submit_lines
    from orchestrator.workflow.steps import new_job_id

    try:
        settings = state(ctx).settings()
        lines = _read_lines(source)
        client = api_client()  # a producer's path: the API, with ORCH_API_URL and ORCH_API_KEY
        if client is not None:
            report = client.submit(lines, batch=batch, rerun=rerun)
            ledger = remote_ledger(client)
        else:
            ledger = open_ledger(settings)
            producer = create_app(settings)
            report = submit_lines(
                lines,
                settings,
                ledger,
                lambda record, phase: enqueue_phase(producer, settings, ledger, record, phase),
                new_job_id=new_job_id,
                batch=batch,
                rerun=rerun,
            )
    except OrchestratorError as e:
        fail(e, as_json=as_json, code=2)
    err = Console(stderr=True, soft_wrap=True)
    for r in report.rejected:
        err.print(Text(f"line {r.line} rejected", style="red") + literal(f": {r.reason}"), highlight=False)
    if not as_json:
        for a in report.accepted:
            note = ""
            if a.rerun:
                note = " (re-run: the earlier run is kept)"
            elif a.duplicate:
                hint = " — submit --rerun to run it again" if a.state in ("failed", "unmet", "cancelled") else ""
                note = f" (already submitted, {a.state}: not queued again{hint})"
            err.print(literal(f"line {a.line} → job {a.job_id}{note}"), highlight=False)
        if report.queued:
            err.print(literal(f"batch {report.batch} (jobs --batch {report.batch})"), highlight=False)
        else:
            err.print(literal("no job queued: no batch was made" + (" (every line was rejected)" if not report.accepted
                                                                     else " (every job was submitted before)")),
                      highlight=False)
    code = report.exit_code
    payload: dict[str, Any] = report.model_dump(mode="json")
    if not report.queued:
        payload["batch"] = None  # nothing joined it: `jobs --batch` would answer "no batch"
    if wait and report.accepted:
        ids = list(dict.fromkeys(a.job_id for a in report.accepted))
        records, stopped = _wait(ledger, settings, ids, timeout, tty=not as_json and sys.stderr.isatty())
        payload["jobs"] = [summary(r, settings) for r in records]
        payload["timed_out"] = stopped is not None
        if stopped == "redis":
            payload["redis_unreachable"] = True
        if any(r.state != "done" for r in records):
            code = 1
        if stopped is not None:
            code = EXIT_TIMEOUT
            _say_timeout(records, settings, timeout if stopped == "timeout" else REDIS_OUTAGE_S, stopped)
        if not as_json:
            _summary_table(records, settings)
    if as_json:
        emit_json(payload)
    raise typer.Exit(code)


def _read_lines(source: str) -> list[str]:
    if source == "-":
        return sys.stdin.read().splitlines()
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"cannot read goals file {source}: {e}", where="cli", next_step="pass a JSONL file or -"
        ) from e


def _counts(records: list[JobRecord], settings: Settings) -> dict[str, int]:
    states: dict[str, int] = {}
    for r in records:
        shown, _ = shown_state(r, settings)
        states[shown] = states.get(shown, 0) + 1
    return states


def _wait(
    ledger: Ledger, settings: Settings, ids: list[str], timeout: float, *, tty: bool
) -> tuple[list[JobRecord], str | None]:
    """Poll the ledger until every job ended (``(records, None)``), the timeout passed (``"timeout"``) or Redis stayed
    unreachable for ``REDIS_OUTAGE_S`` (``"redis"``; the records as last read).

    On a terminal a progress bar; otherwise a line every ``PROGRESS_EVERY_S``. Either way, a line as soon as no
    live worker consumes the queue (and when one does again), and one when Redis is lost (and when it is back)."""
    started = time.monotonic()
    deadline = started + timeout if timeout > 0 else None
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), disable=not tty,
    )
    last_line = 0.0
    last_note: str | None = None
    last_note_check = -1e9
    outage = Outage(settings, "submit")
    records: list[JobRecord] = []
    with progress:
        bar = progress.add_task("jobs", total=len(ids))
        while True:
            now = time.monotonic()
            try:
                records = [r for i in ids if (r := ledger.get(i)) is not None]
                if now - last_note_check >= 5:
                    last_note_check = now
                    note = no_worker_note(ledger)
                    if note != last_note:
                        text = note or "a live worker consumes the queue again"
                        notice("submit.workers", f"{text}", level="warning" if note else "info")
                        last_note = note
                outage.back()
            except redis.RedisError as e:
                outage.lost(e)
                if deadline is not None and now > deadline:
                    return records, "timeout"
                if outage.seconds() > REDIS_OUTAGE_S:
                    return records, "redis"
                time.sleep(1.0)
                continue
            ended = sum(1 for r in records if r.state in TERMINAL)
            counts = " ".join(f"{k} {v}" for k, v in sorted(_counts(records, settings).items()))
            progress.update(bar, completed=ended, description=counts)
            if ended == len(ids):
                return records, None
            if deadline is not None and now > deadline:
                return records, "timeout"
            if not tty and now - last_line >= PROGRESS_EVERY_S:
                last_line = now
                notice("submit.progress", f"{ended}/{len(ids)} ended after {now - started:.0f} s: {counts}",
                       ended=ended, total=len(ids), elapsed_s=round(now - started, 1))
            time.sleep(0.5)


def _say_timeout(records: list[JobRecord], settings: Settings, timeout: float, why: str = "timeout") -> None:
    waiting = []
    for r in records:
        if r.state in TERMINAL:
            continue
        shown = state_label(r, settings)
        running = r.running and r.step is not None and r.steps_total
        where = f" {(r.step or 0) + 1}/{r.steps_total} on {r.worker}" if running else ""
        waiting.append(f"{r.job_id} {shown}{where}")
    notice(
        "submit.timeout",
        (f"timed out after {timeout:g} s" if why == "timeout" else f"stopped waiting: Redis unreachable for "
         f"{timeout:g} s") + f"; {len(waiting)} job(s) not ended (as last seen): {', '.join(waiting)} "
        f"(they go on: follow them with `jobs`)",
        level="warning",
        not_ended=[w.split(" ")[0] for w in waiting],
        exit_code=EXIT_TIMEOUT,
    )


def _summary_table(records: list[JobRecord], settings: Settings) -> None:
    table = Table(title="jobs")
    for col in ("job", "state", "attempts", "artifacts", "output folder", "time", "reason"):
        table.add_column(col, overflow="fold")
    folders = []
    for r in records:
        s = summary(r, settings)
        folders.append(s["out_dir"])
        table.add_row(
            literal(r.job_id),
            Text(s["state"], style=COLOURS.get(s["state"], "white")),
            str(r.attempts),
            literal(", ".join(map(str, s["artifacts"])) or "-"),
            literal(s["out_dir"]),
            f"{s['seconds']:.1f} s",
            literal(r.reason or "-"),
        )
    out = console()
    out.print(table)
    counts = _counts(records, settings)
    out.print(" ".join(f"{k}: {counts.get(k, 0)}" for k in ("done", "unmet", "failed", "cancelled")), highlight=False)
    roots = {str(Path(f).parent) for f in folders}
    where = "files: in each job's output folder" + (f" under {roots.pop()}" if len(roots) == 1 else "")
    out.print(literal(f"{where} (on another machine: jobs ID --download DIR)"), highlight=False)
