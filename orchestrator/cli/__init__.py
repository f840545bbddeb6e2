"""``python -m orchestrator``: one CLI, sub-commands grouped by area.

Each area keeps its commands in a module of this package; this module only assembles them.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli import api, bench, cache, compose, jobs, keys, llm, run, sandbox, skills, submit, validate
from orchestrator.cli.common import CliState
from orchestrator.logs import LEVELS, check_level

# Exit codes and prerequisites, shown under each command's --help (and so in the generated CLI reference).
RUN_EPILOG = (
    "Exit codes: 0 the goal is done; 1 it ended unmet or failed (the result says where and why); 2 bad usage, "
    "refused before anything is created; 130 Ctrl-C, 143 SIGTERM (containers removed, evidence kept).\n\n"
    "Needs: the Docker engine and the sandbox image (bash ops/setup.sh, or sandbox build-image); a model: "
    "openai:NAME with OPENAI_API_KEY (and OPENAI_BASE_URL for another server), or scripted:PATH, offline."
)
SUBMIT_EPILOG = (
    "Exit codes: 0 every line was queued (with --wait: and every job ended done); 1 a line was rejected (its line "
    "number and reason are printed) or, with --wait, a job did not end done; 2 nothing could be submitted (bad "
    "usage, Redis unreachable); 3 --wait --timeout ran out before every job ended (the jobs go on).\n\n"
    "Needs: Redis at ORCH_BROKER_URL (default redis://localhost:6379/0) and, for the jobs to run, a ready worker "
    "(--wait says within 5 s when no worker consumes the queue, and what the ones not ready lack)."
)
JOBS_EPILOG = (
    "Exit codes: 0 shown (or cancelled, queued again, downloaded); 1 --cancel of a job that had already ended, a "
    "--rerun refused (only a failed, unmet or cancelled job runs again), a --download that could not fetch "
    "everything; 2 bad usage, an unknown job or batch, Redis unreachable.\n\n"
    "Needs: Redis at ORCH_BROKER_URL; --download needs a live worker to export the files (120 s at most)."
)
WORKER_EPILOG = (
    "Readiness: the worker first listens on a queue nobody sends to and checks the Docker engine, the sandbox "
    "image, its model (model.name: one GET /models on its server; worker.check_model=false skips it) and its "
    "skills folder. Only then does it take work; until then it says what is missing every worker.ready_check_s "
    "seconds, in its log and in the ledger (jobs, submit --wait show it).\n\n"
    "Needs: Redis at ORCH_BROKER_URL; the Docker engine and the sandbox image (bash ops/setup.sh); the model's "
    "server and key (OPENAI_BASE_URL, OPENAI_API_KEY) or a scripted:PATH model.name.\n\n"
    "Exit codes: Celery's (0 after a warm shutdown); 2 bad settings, before Celery starts."
)

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
app.command("run", help="Run a goal end to end (Plan -> Act -> Reflect) in this process.", epilog=RUN_EPILOG)(
    run.run_goal
)
app.command("validate", help="Validate an output folder: contract rules, then (with --model) semantics.")(
    validate.validate_cmd
)
app.command(
    "submit", help="Queue goals (JSONL, one per line) for the workers; --wait for the results.", epilog=SUBMIT_EPILOG
)(submit.submit)
app.command(
    "jobs",
    help="The job ledger: states, attempts, workers, artifacts, traces; cancel, re-run, download, batches.",
    epilog=JOBS_EPILOG,
)(jobs.jobs)
app.command("worker", help="Run a Celery worker for the Plan/Act/Reflect tasks.", epilog=WORKER_EPILOG)(jobs.worker)
app.command("api", help="Serve the producers' HTTP API (keys from `keys create`).")(api.serve)
app.add_typer(keys.app, name="keys", help="Producers' API keys: create (printed once), list, revoke.")
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
