"""``python -m orchestrator``: one CLI, sub-commands grouped by area.

Each area keeps its commands in a module of this package; this module only assembles them.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli import bench, cache, compose, jobs, llm, run, sandbox, skills, submit, validate
from orchestrator.cli.common import CliState
from orchestrator.logs import LEVELS, check_level

app = typer.Typer(
    name="orchestrator",
    help="Skills runtime: a model picks Claude-compatible skills for a goal and runs their scripts in a Docker "
    "sandbox.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _check_log_level(value: str) -> str:
    try:
        return check_level(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", envvar="ORCH_CONFIG", help="YAML settings file (a `skillruntime:` block is fine)."
        ),
    ] = None,
    log_level: Annotated[
        str,
        typer.Option(
            "--log-level",
            envvar="ORCH_LOG_LEVEL",
            help=f"Log level: {', '.join(LEVELS)} (any case).",
            callback=_check_log_level,
        ),
    ] = "WARNING",
) -> None:
    ctx.obj = CliState(config_file=config, log_level=log_level)


app.add_typer(skills.app, name="skills", help="List and inspect skills (L1 index, L2 body, L3 references).")
app.add_typer(
    sandbox.app, name="sandbox", help="Run scripts in the Docker sandbox; build its image; reap orphans."
)
app.add_typer(
    compose.app, name="compose", help="Prepare the compose stack: build its images, write the host settings (.env)."
)
app.add_typer(cache.app, name="cache", help="Show or clear the cache folder (job folders, evidence, memo).")
app.add_typer(bench.app, name="bench", help="Benchmarks that print JSON with side-by-side ratios.")
app.command("run", help="Run a goal end to end (Plan -> Act -> Reflect) in this process.")(run.run_goal)
app.command("validate", help="Validate an output folder: contract rules, then (with --model) semantics.")(
    validate.validate_cmd
)
app.command("submit", help="Queue goals (JSONL, one per line) for the workers; --wait for the results.")(
    submit.submit
)
app.command(
    "jobs", help="The job ledger: states, attempts, workers, artifacts, traces; cancel, re-run, download, batches."
)(jobs.jobs)
app.command("worker", help="Run a Celery worker for the Plan/Act/Reflect tasks.")(jobs.worker)
app.command("scripted-llm", help="Serve a scripted scenario (or a recording) as an OpenAI-compatible endpoint.")(
    llm.scripted_llm
)
app.command("record-llm", help="Record real model sessions: a pass-through proxy that writes what it forwards.")(
    llm.record_llm
)


def _stop(signum: int, _frame: object) -> None:
    # The first stop unwinds the stack: every sandbox job's context manager removes its containers and volumes and
    # the evidence is written. A second Ctrl-C or SIGTERM must not cut that clean-up short (it would leave the
    # job's containers running), so from here on both are ignored; SIGKILL still ends the process.
    for name in (signal.SIGINT, signal.SIGTERM):
        signal.signal(name, signal.SIG_IGN)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _stop)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # a background job started with Ctrl-C ignored
        signal.signal(signal.SIGINT, _stop)
    app()
