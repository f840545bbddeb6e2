"""CLI of the distributed mode: ``submit`` goals, watch them with ``jobs``, run a ``worker``."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import redis
import typer
from rich.console import Console
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from orchestrator.cli.common import emit_json, fail, plain, state
from orchestrator.config import Settings
from orchestrator.errors import ConfigError, OrchestratorError
from orchestrator.logs import mask_secrets
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.submit import submit_lines
from orchestrator.workflow.run import new_job_id

TERMINAL = ("done", "unmet", "failed")


def _ledger(settings: Settings) -> Any:
    ledger = Ledger.from_url(settings.broker_url)
    try:
        ledger.r.ping()
    except redis.RedisError as e:
        raise ConfigError(
            f"cannot reach Redis at {settings.broker_url}: {e}",
            where="broker",
            next_step="start Redis or set ORCH_BROKER_URL to a reachable one",
        ) from e
    return ledger


def submit(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="A JSONL file of goal lines, or - for stdin.")],
    wait: Annotated[bool, typer.Option("--wait", help="Wait until every queued job ends; show a summary.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="With --wait: give up after this many seconds.")] = 0,
) -> None:
    # Deferred: the Celery app is built when its module is imported (from ORCH_CONFIG), so it loads only in
    # the commands that talk to the broker, after the settings are known.
    from orchestrator.worker.celery_app import create_app
    from orchestrator.worker.dispatch import send_phase

    try:
        settings = state(ctx).settings()
        lines = _read_lines(source)
        ledger = _ledger(settings)
        producer = create_app(settings)
        report = submit_lines(
            lines,
            settings,
            ledger,
            lambda record, phase: send_phase(producer, settings, record, phase),
            new_job_id=new_job_id,
        )
    except OrchestratorError as e:
        fail(e, as_json=as_json, code=2)
    err = Console(stderr=True, soft_wrap=True)
    for r in report.rejected:
        err.print(Text(f"line {r.line} rejected", style="red") + _text(f": {r.reason}"), highlight=False)
    if not as_json:
        for a in report.accepted:
            note = " (already submitted: not queued again)" if a.duplicate else ""
            err.print(_text(f"line {a.line} → job {a.job_id}{note}"), highlight=False)
    code = report.exit_code
    payload: dict[str, Any] = report.model_dump(mode="json")
    if wait and report.accepted:
        ids = list(dict.fromkeys(a.job_id for a in report.accepted))
        records = _wait(ledger, ids, timeout, show=not as_json and sys.stderr.isatty())
        payload["jobs"] = [_summary(r) for r in records]
        if any(r.state != "done" for r in records):
            code = 1
        if not as_json:
            _summary_table(records)
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


def _wait(ledger: Any, ids: list[str], timeout: float, *, show: bool) -> list[Any]:
    deadline = time.monotonic() + timeout if timeout > 0 else None
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not show,
    )
    with progress:
        bar = progress.add_task("jobs", total=len(ids))
        while True:
            records = [ledger.get(i) for i in ids]
            ended = sum(1 for r in records if r is not None and r.state in TERMINAL)
            states: dict[str, int] = {}
            for r in records:
                if r is not None:
                    states[r.state] = states.get(r.state, 0) + 1
            progress.update(bar, completed=ended, description=" ".join(f"{k} {v}" for k, v in sorted(states.items())))
            if ended == len(ids) or (deadline is not None and time.monotonic() > deadline):
                return [r for r in records if r is not None]
            time.sleep(0.5)


def _summary(record: Any) -> dict[str, Any]:
    end = record.finished_at or time.time()
    return {
        "job_id": record.job_id,
        "state": record.state,
        "attempts": record.attempts,
        "step": record.step,
        "worker": record.worker,
        "artifacts": [a.get("path") for a in record.artifacts],
        "seconds": round(end - record.submitted_at, 2),
        "reason": record.reason,
        "goal": record.goal,
    }


def _summary_table(records: list[Any]) -> None:
    table = Table(title="jobs")
    for col in ("job", "state", "attempts", "artifacts", "time"):
        table.add_column(col)
    colours = {"done": "green", "unmet": "yellow", "failed": "red"}
    for r in records:
        s = _summary(r)
        table.add_row(
            _text(r.job_id),
            Text(r.state, style=colours.get(r.state, "white")),
            str(r.attempts),
            _text(", ".join(map(str, s["artifacts"])) or "-"),
            f"{s['seconds']:.1f} s",
        )
    console = Console(soft_wrap=True)
    console.print(table)
    counts = {k: sum(1 for r in records if r.state == k) for k in TERMINAL}
    console.print(" ".join(f"{k}: {v}" for k, v in counts.items()), highlight=False)


def jobs(
    ctx: typer.Context,
    job_id: Annotated[str | None, typer.Argument(help="One job (all recent jobs when omitted).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh every second until Ctrl-C.")] = False,
    trace: Annotated[bool, typer.Option("--trace", help="With ID: print the job's span tree.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many recent jobs to list.")] = 50,
) -> None:
    try:
        settings = state(ctx).settings()
        ledger = _ledger(settings)
        if job_id is not None and ledger.get(job_id) is None:
            raise ConfigError(f"no job {job_id!r} in the ledger", where="jobs", next_step="list jobs with `jobs`")
    except OrchestratorError as e:
        fail(e, as_json=as_json, code=2)
    if trace:
        if job_id is None:
            raise typer.BadParameter("--trace needs a job id")
        _print_trace(ledger, job_id, as_json=as_json)
        return
    if watch and not as_json:
        _watch(ledger, job_id, limit)
        return
    if job_id is not None:
        record = ledger.get(job_id)
        if as_json:
            emit_json(record)
        else:
            _print_record(record)
        return
    records = ledger.all(limit=limit)
    if as_json:
        emit_json([_summary(r) for r in records])
    else:
        Console(soft_wrap=True).print(_jobs_table(records))


def _jobs_table(records: list[Any]) -> Table:
    table = Table(title=f"{len(records)} jobs (newest first)")
    for col in ("job", "state", "step", "attempts", "worker", "heartbeat", "goal"):
        table.add_column(col, overflow="fold")
    now = time.time()
    for r in records:
        step = f"{r.step + 1}/{r.steps_total} {r.skill or ''}" if r.step is not None and r.steps_total else "-"
        beat = f"{now - r.heartbeat:.0f} s ago" if r.heartbeat and r.running else "-"
        cells = (r.job_id, r.state, step, str(r.attempts), r.worker or "-", beat, r.goal[:60])
        table.add_row(*(_text(cell) for cell in cells))
    return table


def _watch(ledger: Any, job_id: str | None, limit: int) -> None:
    def render() -> Any:
        if job_id is None:
            return _jobs_table(ledger.all(limit=limit))
        return _jobs_table([r for r in [ledger.get(job_id)] if r is not None])

    try:
        with Live(render(), console=Console(), refresh_per_second=2) as live:
            while True:
                time.sleep(1)
                live.update(render())
    except KeyboardInterrupt:
        pass


def _text(value: object) -> Text:
    """A goal, a reason or a file name as the worker stored it: shown literally (no markup, control characters
    escaped, secrets masked), on one line."""
    return Text(plain(mask_secrets(str(value))).replace("\n", "\\n"))


def _print_record(record: Any) -> None:
    console = Console(soft_wrap=True)
    console.print(Text(record.job_id, style="bold") + _text(f" {record.state} — {record.goal}"), highlight=False)
    console.print(
        _text(f"attempts {record.attempts}, worker {record.worker or '-'}, plan {' → '.join(record.plan) or '-'}"),
        highlight=False,
    )
    if record.reason:
        console.print(_text(f"reason: {record.reason}"), highlight=False)
    for a in record.artifacts:
        console.print(_text(f"  {a.get('path')}  {a.get('size')} bytes  sha256:{str(a.get('sha256'))[:12]}"),
                      highlight=False)
    for v in record.skills.loaded:
        console.print(_text(f"  skill {v.id} sha256:{v.sha256[:12]}"), highlight=False)
    for h in record.history:
        console.print(
            _text(f"  {h['phase']:<8} attempt {h['attempt']} on {h['worker']}: "
                  f"{h['end'] - h['start']:.2f} s → {h['outcome']}"),
            highlight=False,
        )
    result = record.result or {}
    if result.get("answer"):
        console.print(_text(f"answer: {result['answer']}"), highlight=False)
    for s in result.get("scores") or []:
        console.print(_text(f"  {s.get('score')}  {s.get('point')} — {s.get('reason')}"), highlight=False)
    if result.get("score") is not None:
        console.print(_text(f"score: {result['score']}"), highlight=False)
    if record.trace_id:
        console.print(f"trace {record.trace_id} (jobs {record.job_id} --trace)", highlight=False)


def _print_trace(ledger: Any, job_id: str, *, as_json: bool) -> None:
    record = ledger.get(job_id)
    spans = ledger.spans(record.trace_id) if record and record.trace_id else []
    if as_json:
        emit_json({"job_id": job_id, "trace_id": record.trace_id if record else None, "spans": spans})
        return
    children: dict[str | None, list[dict[str, Any]]] = {}
    ids = {s["span_id"] for s in spans}
    for s in sorted(spans, key=lambda s: s["start"]):
        parent = s["parent_id"] if s["parent_id"] in ids else None
        children.setdefault(parent, []).append(s)
    tree = Tree(f"trace {record.trace_id if record else '?'}")

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
    Console(soft_wrap=True).print(tree, highlight=False)


def worker(
    ctx: typer.Context,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1, help="Worker processes.")] = None,
    loglevel: Annotated[str, typer.Option("--loglevel", help="Celery's log level.")] = "INFO",
    hostname: Annotated[str | None, typer.Option("--hostname", "-n", help="Worker name (Celery's -n).")] = None,
    pool: Annotated[str | None, typer.Option("--pool", help="Celery pool (prefork by default).")] = None,
) -> None:
    """Celery's own worker on the orchestrator's queue (the same as `celery -A orchestrator.worker.celery_app:app
    worker`)."""
    cli_state = state(ctx)
    if cli_state.config_file is not None:
        os.environ["ORCH_CONFIG"] = str(cli_state.config_file)  # read by the Celery app on import
    try:
        cli_state.settings()
    except OrchestratorError as e:
        fail(e, as_json=False, code=2)
    # Deferred: the Celery app reads ORCH_CONFIG (set just above) when its module is imported.
    from orchestrator.worker.celery_app import QUEUE, app

    argv = ["worker", f"--loglevel={loglevel}", "-Q", QUEUE]
    if concurrency is not None:
        argv.append(f"--concurrency={concurrency}")
    if hostname:
        argv += ["-n", hostname]
    if pool:
        argv.append(f"--pool={pool}")
    app.worker_main(argv)
