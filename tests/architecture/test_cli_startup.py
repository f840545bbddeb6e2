"""The CLI loads only what the command it runs needs: ``--help`` of the ledger commands and ``jobs ID`` import no
model client, no Celery, no Docker SDK, no template engine, no chart library and none of the goal's Act machinery.
(How long that takes is measured by ``bench cli``, not here: a timed test would flake on a loaded machine.)"""

from __future__ import annotations

import pytest

from orchestrator.cli import COMMANDS, app, command_named
from orchestrator.cli.startup import probe

NOT_FOR_THE_LEDGER = ("orchestrator.act", "orchestrator.sandbox", "orchestrator.select", "orchestrator.validate",
                      "orchestrator.workflow.goal", "orchestrator.worker.celery_app", "orchestrator.worker.tasks")
UNREACHABLE_REDIS = "redis://127.0.0.1:9/0"  # `jobs ID` fails fast (exit 2) but has loaded what it needs by then


@pytest.mark.parametrize("argv", [["--help"], ["jobs", "--help"], ["submit", "--help"], ["worker", "--help"],
                                  ["run", "--help"], ["bench", "--help"], ["bench", "cli", "--help"],
                                  ["compose", "--help"], ["compose", "build-images", "--help"],
                                  ["--log-level", "info", "jobs", "some-job"]])
def test_a_ledger_command_and_help_load_no_heavy_library(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCH_BROKER_URL", UNREACHABLE_REDIS)
    import os

    run = probe(argv, env=dict(os.environ))
    assert run.modules, "the probe did not run"
    assert run.heavy() == [], f"{argv} loaded {run.heavy()}"
    assert [m for m in run.modules if m.startswith(NOT_FOR_THE_LEDGER)] == []
    if argv[-1] == "--help":
        assert run.exit_code == 0
        if argv[0] != "submit":  # its options' module also sends: it keeps the Redis client at its top
            assert "redis" not in {m.split(".")[0] for m in run.modules}
    else:
        assert run.exit_code == 2  # Redis unreachable, said as a usage-level error


def test_the_probe_sees_a_heavy_import_when_there_is_one() -> None:
    eager = probe(["jobs", "--help"], mode="eager")  # every command module: `sandbox` holds the Docker SDK at its top
    assert eager.exit_code == 0 and "docker" in eager.heavy()


def test_every_command_is_still_there_with_its_options() -> None:
    import typer

    loaded = typer.main.get_command(app)
    assert set(loaded.commands) == set(COMMANDS)  # type: ignore[attr-defined]
    assert "--state" in [o for p in loaded.commands["jobs"].params for o in p.opts]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("argv", "command"),
    [(["jobs", "x"], "jobs"), (["--config", "c.yaml", "submit", "-"], "submit"), (["--log-level=INFO", "run"], "run"),
     (["--help"], None), ([], None), (["--log-level", "jobs"], None)],
)
def test_the_command_is_found_after_the_root_options(argv: list[str], command: str | None) -> None:
    assert command_named(argv) == command
