"""CLI: the scripted model server (``scripted-llm --scenario PATH | --scenarios DIR``) and the session recorder
(``record-llm --upstream URL --out DIR``)."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from orchestrator.cli.common import fail, state
from orchestrator.errors import ConfigError
from orchestrator.llm.recorder import EXCHANGES, RecordingProxy
from orchestrator.llm.scenario import load_scenario
from orchestrator.llm.scenario_server import (
    ScenarioLibraryServer,
    ScenarioServer,
    load_library,
    start_scenario_server,
)


def scripted_llm(
    ctx: typer.Context,
    scenario: Annotated[
        Path | None,
        typer.Option("--scenario", help="Scenario YAML file to play, or a record-llm recording folder to replay."),
    ] = None,
    scenarios: Annotated[
        Path | None,
        typer.Option(
            "--scenarios",
            help="Serve every scenario in DIR at once: the request's model name picks NAME.yaml, the X-Orch-Job "
            "header the conversation (one step cursor per job).",
        ),
    ] = None,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0 = ephemeral).")] = 0,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    trace: Annotated[
        Path | None,
        typer.Option("--trace", envvar="ORCH_SCRIPTED_TRACE", help="Append every request body to FILE (JSON lines)."),
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 if a request mismatched or a step was never requested.")
    ] = False,
) -> None:
    """Serve a scenario as an OpenAI-compatible endpoint until Ctrl-C/SIGTERM; prints the base URL first."""
    state(ctx).settings()
    if (scenario is None) == (scenarios is None):
        raise typer.BadParameter("give exactly one of --scenario FILE or --scenarios DIR")
    server: ScenarioServer | ScenarioLibraryServer
    try:
        if scenario is not None:
            server = start_scenario_server(load_scenario(scenario), trace_path=trace, host=host, port=port)
        else:
            assert scenarios is not None
            library = load_library(scenarios)
            server = ScenarioLibraryServer(library, trace_path=trace, host=host, port=port).start()
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
    _serve_until_stopped(server.base_url, server.close)
    if isinstance(server, ScenarioServer):
        players = [server.player]
    else:
        players = server.players
        typer.echo(f"{len(players)} conversations over {len(server.scenarios)} scenarios", err=True)
    unfinished = 0
    for player in players:
        used, total = player.steps_used, len(player.scenario.steps)
        unfinished += used < total
        who = f" (job {player.session})" if player.session else ""
        typer.echo(
            f"scenario {player.scenario.source}{who}: {used}/{total} steps played, {len(player.failures)} mismatches",
            err=True,
        )
        for failure in player.failures:
            typer.echo(f"  mismatch: {failure}", err=True)
    if strict and (any(p.failures for p in players) or unfinished):
        raise typer.Exit(1)


def record_llm(
    ctx: typer.Context,
    upstream: Annotated[
        str,
        typer.Option(
            "--upstream", help="Base URL of the real OpenAI-compatible server (e.g. http://127.0.0.1:8765/v1)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Folder the recording is written to (exchanges.jsonl).")],
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0 = ephemeral).")] = 0,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    goal: Annotated[
        str | None, typer.Option("--goal", help="The goal of the session (a replay uses it when none is given).")
    ] = None,
) -> None:
    """Record real sessions: a pass-through proxy to --upstream; prints its base URL (use it as OPENAI_BASE_URL).

    Every chat completion is forwarded unchanged and appended to OUT/exchanges.jsonl (the API key is never written).
    Replay with `scripted-llm --scenario OUT` or `run --model scripted:OUT`; record runs with --no-memo.
    """
    state(ctx).settings()
    try:
        proxy = RecordingProxy(upstream, out, host=host, port=port, goal=goal).start()
    except ConfigError as e:
        fail(e, as_json=False, code=2)
    except OSError as e:
        fail(
            ConfigError(
                f"cannot record into {out} or listen on {host}:{port}: {e.strerror or e}",
                where="record-llm",
                next_step="pick a writable --out folder and another --port (0 = any free port)",
            ),
            as_json=False,
            code=2,
        )
    _serve_until_stopped(proxy.base_url, proxy.close)
    typer.echo(f"recorded {proxy.exchanges} exchanges in {out / EXCHANGES}", err=True)


def _serve_until_stopped(base_url: str, close: Callable[[], None]) -> None:
    """Print the base URL, then wait for Ctrl-C or SIGTERM and close."""
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, _on_signal)
    sys.stdout.write(base_url + "\n")
    sys.stdout.flush()
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        close()
