"""CLI: the scripted model server (``python -m orchestrator scripted-llm --scenario PATH``)."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from orchestrator.cli.common import fail, state
from orchestrator.errors import ConfigError
from orchestrator.llm.scenario import load_scenario
from orchestrator.testing.scenario_server import start_scenario_server


def scripted_llm(
    ctx: typer.Context,
    scenario: Annotated[Path, typer.Option("--scenario", help="Scenario YAML file to play.")],
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0 = ephemeral).")
    ] = 0,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace", envvar="ORCH_SCRIPTED_TRACE", help="Append every request body to FILE (JSON lines)."
        ),
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 if a request mismatched or a step was never requested.")
    ] = False,
) -> None:
    """Serve a scenario as an OpenAI-compatible endpoint until Ctrl-C/SIGTERM; prints the base URL first."""
    state(ctx).settings()
    try:
        parsed = load_scenario(scenario)
        server = start_scenario_server(parsed, trace_path=trace, host=host, port=port)
    except ConfigError as e:
        fail(e, as_json=False, code=2)
    except OSError as e:
        fail(
            ConfigError(
                f"cannot listen on {host}:{port}: {e.strerror or e}",
                where="scripted-llm",
                next_step="pick another --port (0 = any free port)",
            ),
            as_json=False,
            code=2,
        )
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, _on_signal)
    sys.stdout.write(server.base_url + "\n")
    sys.stdout.flush()
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.close()
    used, total = server.steps_used, len(parsed.steps)
    typer.echo(
        f"scenario {parsed.source}: {used}/{total} steps played, {len(server.failures)} mismatches", err=True
    )
    for failure in server.failures:
        typer.echo(f"  mismatch: {failure}", err=True)
    if strict and (server.failures or used < total):
        raise typer.Exit(1)
