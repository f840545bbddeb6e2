"""``python -m orchestrator``: one CLI, sub-commands grouped by area.

Each area keeps its commands in a module of this package; this module only assembles them, and loads only the
command it runs: ``python -m orchestrator jobs ID`` imports ``cli/jobs.py`` (and what it needs), never the sandbox,
the model client or Celery. Every other command is listed by its name and help alone. ``app`` (``from
orchestrator.cli import app``) is the whole CLI with every command loaded, for the reference pages and tests.
"""

from __future__ import annotations

import functools
import importlib
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

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


@dataclass(frozen=True)
class Entry:
    """Where a command lives (``orchestrator.cli.<module>``, attribute ``attr``) and what its help says."""

    module: str
    attr: str
    help: str
    group: bool = False
    """A Typer app of sub-commands (``skills list``), not one command."""
    epilog: str | None = None


COMMANDS: dict[str, Entry] = {
    "skills": Entry("skills", "app", "List and inspect skills (L1 index, L2 body, L3 references).", group=True),
    "sandbox": Entry("sandbox", "app", "Run scripts in the Docker sandbox; build its image; reap orphans.", group=True),
    "compose": Entry("compose", "app", "Prepare the compose stack: build its images, write the host settings (.env).",
                     group=True),
    "cache": Entry("cache", "app", "Show or clear the cache folder (job folders, evidence, memo).", group=True),
    "bench": Entry("bench", "app", "Benchmarks that print JSON with side-by-side ratios.", group=True),
    "run": Entry("run", "run_goal", "Run a goal end to end (Plan -> Act -> Reflect) in this process.",
                 epilog=RUN_EPILOG),
    "validate": Entry("validate", "validate_cmd",
                      "Validate an output folder: contract rules, then (with --model) semantics."),
    "submit": Entry("submit", "submit", "Queue goals (JSONL, one per line) for the workers; --wait for the results.",
                    epilog=SUBMIT_EPILOG),
    "jobs": Entry("jobs", "jobs",
                  "The job ledger: states, attempts, workers, artifacts, traces; cancel, re-run, download, batches.",
                  epilog=JOBS_EPILOG),
    "worker": Entry("jobs", "worker", "Run a Celery worker for the Plan/Act/Reflect tasks.", epilog=WORKER_EPILOG),
    "api": Entry("api", "serve", "Serve the producers' HTTP API (keys from `keys create`)."),
    "keys": Entry("keys", "app", "Producers' API keys: create (printed once), list, revoke.", group=True),
    "scripted-llm": Entry("llm", "scripted_llm",
                          "Serve a scripted scenario (or a recording) as an OpenAI-compatible endpoint."),
    "record-llm": Entry("llm", "record_llm",
                        "Record real model sessions: a pass-through proxy that writes what it forwards."),
}
"""Every command, in the order ``--help`` lists them."""
ROOT_OPTIONS_WITH_VALUE = ("--config", "--log-level")


def _check_log_level(value: str) -> str:
    try:
        return check_level(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e


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
    # Deferred: the settings machinery loads when a command runs, not for --help.
    from orchestrator.cli.common import CliState

    ctx.obj = CliState(config_file=config, log_level=log_level)


def _listed_only(ctx: typer.Context) -> None:
    """Stands for a command that was not loaded; ``main`` loads the command it runs, so this only runs when an app
    built by ``build_app`` is called with another one: it loads that command and runs it."""
    name = ctx.info_name or ""
    build_app({name})([name, *ctx.args], prog_name=ctx.find_root().info_name)


def build_app(load: set[str] | None = None) -> typer.Typer:
    """The CLI with the commands named in ``load`` loaded (every one when None); the others listed by name and help."""
    app = typer.Typer(
        name="orchestrator",
        help="Skills runtime: a model picks Claude-compatible skills for a goal and runs their scripts in a Docker "
        "sandbox.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    app.callback()(_root)
    for name, entry in COMMANDS.items():
        if load is not None and name not in load:
            app.command(name, help=entry.help, epilog=entry.epilog, add_help_option=False,
                        context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(_listed_only)
            continue
        target = getattr(importlib.import_module(f"orchestrator.cli.{entry.module}"), entry.attr)
        if entry.group:
            app.add_typer(target, name=name, help=entry.help)
        else:
            app.command(name, help=entry.help, epilog=entry.epilog)(target)
    return app


@functools.cache
def _whole_app() -> typer.Typer:
    return build_app()


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole CLI, every command loaded (the reference pages, tests)
        return _whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs (its first word after the root options), or None (``--help``, no command)."""
    words = iter(argv)
    for word in words:
        if word in ROOT_OPTIONS_WITH_VALUE:
            next(words, None)
        elif not word.startswith("-"):
            return word
        elif word in ("--help", "-h"):
            return None
    return None


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
    command = command_named(sys.argv[1:])
    build_app({command} if command is not None else set())()
