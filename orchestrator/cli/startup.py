"""How fast the CLI starts (``bench cli``): each command from a fresh interpreter, timed next to the eager path it
replaced (every command module imported before the command runs), and which heavy libraries each one loaded.

A probe runs the command in a child interpreter and writes what it loaded to a file, so the command's own output
and exit code are left alone.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

HEAVY = (
    "openai", "celery", "kombu", "docker", "plotly", "jinja2", "numpy", "onnxruntime", "tokenizers", "httpx", "PIL",
)
"""Libraries a command that only reads the ledger, or prints its help, has no use for (each costs 0.1-1 s)."""
COMMANDS: dict[str, list[str]] = {
    "--help": ["--help"],
    "jobs --help": ["jobs", "--help"],
    "jobs ID": ["jobs", "bench-cli-no-such-job"],
    "submit --help": ["submit", "--help"],
    "run --help": ["run", "--help"],
}
"""What ``bench cli`` times (``jobs ID`` asks the configured Redis for a job that does not exist: exit 2)."""
Mode = Literal["lazy", "eager"]
_PROBE = """
import json, sys
argv, mode, report = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
sys.argv = ["orchestrator", *argv]
code = 0
try:
    if mode == "eager":  # as before: every command module imported, then the command runs
        import orchestrator.cli
        orchestrator.cli.app()
    else:
        from orchestrator.cli import main
        main()
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else 0
with open(report, "w") as f:
    json.dump({"modules": sorted(sys.modules), "exit_code": code}, f)
"""


class Probe(BaseModel):
    seconds: float
    modules: list[str]
    exit_code: int

    def heavy(self) -> list[str]:
        """The heavy libraries (``HEAVY``) this run imported."""
        loaded = {m.split(".")[0] for m in self.modules}
        return [h for h in HEAVY if h in loaded]


class CommandTiming(BaseModel):
    command: str
    lazy_median_s: float
    eager_median_s: float
    ratio_eager_to_lazy: float
    lazy_modules: int
    eager_modules: int
    heavy_loaded: list[str]
    """Heavy libraries the command still imports (lazily)."""
    exit_code: int


class CliStartup(BaseModel):
    repeats: int
    python_start_median_s: float
    """A bare ``python -c pass``: the floor under every command."""
    commands: list[CommandTiming]


def probe(argv: list[str], mode: Mode = "lazy", env: dict[str, str] | None = None) -> Probe:
    """Run ``python -m orchestrator ARGV`` in a fresh interpreter: its wall time, the modules it loaded, its exit."""
    with tempfile.TemporaryDirectory(prefix="orch-bench-cli-") as folder:
        report = Path(folder) / "probe.json"
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", _PROBE, json.dumps(argv), mode, str(report)],
            env=env if env is not None else dict(os.environ), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=False,
        )
        seconds = time.perf_counter() - started
        data = json.loads(report.read_text()) if report.is_file() else {"modules": [], "exit_code": -1}
    return Probe(seconds=seconds, **data)


def bench_cli(repeats: int = 5) -> CliStartup:
    """Each command ``repeats`` times lazily and eagerly, alternating; medians of the wall times."""
    bare = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=False)
        bare.append(time.perf_counter() - started)
    timings = []
    for name, argv in COMMANDS.items():
        lazy: list[Probe] = []
        eager: list[Probe] = []
        for _ in range(repeats):
            lazy.append(probe(argv, "lazy"))
            eager.append(probe(argv, "eager"))
        lazy_s = statistics.median(p.seconds for p in lazy)
        eager_s = statistics.median(p.seconds for p in eager)
        timings.append(CommandTiming(
            command=name, lazy_median_s=round(lazy_s, 3), eager_median_s=round(eager_s, 3),
            ratio_eager_to_lazy=round(eager_s / lazy_s, 2) if lazy_s else 0.0,
            lazy_modules=len(lazy[-1].modules), eager_modules=len(eager[-1].modules),
            heavy_loaded=lazy[-1].heavy(), exit_code=lazy[-1].exit_code,
        ))
    return CliStartup(repeats=repeats, python_start_median_s=round(statistics.median(bare), 3), commands=timings)
