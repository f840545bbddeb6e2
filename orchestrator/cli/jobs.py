"""The distributed mode's commands: ``jobs`` (watch and control jobs) and ``worker`` (``submit`` lives in
submit.py). Only the options live here: what ``jobs`` does is cli/jobs_view.py, loaded when it runs, so
``jobs --help`` starts fast."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.worker.names import SHOWN_STATES


def jobs(
    ctx: typer.Context,
    job_id: Annotated[str | None, typer.Argument(help="One job (all recent jobs when omitted).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh every second until Ctrl-C.")] = False,
    trace: Annotated[bool, typer.Option("--trace", help="With ID: print the job's span tree.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many recent jobs to list.")] = 50,
    state_filter: Annotated[
        str | None, typer.Option("--state", help=f"Only jobs in this state ({', '.join(SHOWN_STATES)}).")
    ] = None,
    batch: Annotated[str | None, typer.Option("--batch", help="The jobs of one submit batch, with a summary.")] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="With --batch: write a self-contained HTML report (timeline).")
    ] = None,
    cancel: Annotated[bool, typer.Option(
        "--cancel", help="With ID: cancel the job (its files are kept); with --batch B: its jobs not ended.")] = False,
    rerun: Annotated[
        bool, typer.Option("--rerun", help="With ID: run a failed, unmet or cancelled job again; with --batch B: its "
                     "failed and unmet jobs.")
    ] = False,
    download: Annotated[
        Path | None, typer.Option("--download", help="With ID (or --batch B): fetch the files and evidence into DIR.")
    ] = None,
    workers: Annotated[
        bool, typer.Option("--workers", help="The live workers: ready or not, and what one that is not ready lacks.")
    ] = False,
) -> None:
    # Deferred: the ledger, Redis and rich's tables load when the command runs, not for --help.
    from orchestrator.cli.jobs_view import run_jobs

    run_jobs(ctx, job_id, as_json=as_json, watch=watch, trace=trace, limit=limit, state_filter=state_filter,
             batch=batch, report=report, cancel=cancel, rerun=rerun, download=download, workers=workers)


def worker(
    ctx: typer.Context,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1, help="Worker processes.")] = None,
    loglevel: Annotated[str, typer.Option("--loglevel", help="Celery's log level.")] = "INFO",
    hostname: Annotated[str | None, typer.Option("--hostname", "-n", help="Worker name (Celery's -n).")] = None,
    pool: Annotated[str | None, typer.Option("--pool", help="Celery pool (prefork by default).")] = None,
) -> None:
    """Celery's own worker on the orchestrator's queue (the same as `celery -A orchestrator.worker.celery_app:app
    worker`)."""
    # Deferred: the settings machinery loads when the command runs, not for --help.
    from orchestrator.cli.common import fail, state
    from orchestrator.errors import OrchestratorError

    cli_state = state(ctx)
    if cli_state.config_file is not None:
        os.environ["ORCH_CONFIG"] = str(cli_state.config_file)  # read by the Celery app on import
    try:
        cli_state.settings()
    except OrchestratorError as e:
        fail(e, as_json=False, code=2)
    # Deferred: the Celery app reads ORCH_CONFIG (set just above) when its module is imported.
    from orchestrator.worker.celery_app import app
    from orchestrator.worker.names import STANDBY_QUEUE

    # The worker starts on a queue nobody sends to; it adds the orchestrator's queue once its checks pass
    # (Docker engine, sandbox image, model server, skills folder: orchestrator/worker/readiness.py).
    argv = ["worker", f"--loglevel={loglevel}", "-Q", STANDBY_QUEUE]
    if concurrency is not None:
        argv.append(f"--concurrency={concurrency}")
    if hostname:
        argv += ["-n", hostname]
    if pool:
        argv.append(f"--pool={pool}")
    app.worker_main(argv)
