"""``bench throughput``: goals per minute with 1 and W workers, and the orchestration overhead per goal.

The benchmark starts its own ``redis-server`` (a free port, a temporary folder) and real worker processes, and
queues goals played by the scripted model with a fixed think time per reply (a real model is never instant).
Overhead per goal is the wall time of its phases minus the time inside model calls and scripts: what the
orchestrator itself adds (loading skills, the ledger, the sandbox, the validator, queueing the next phase).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis
import yaml
from pydantic import BaseModel

from orchestrator.errors import ConfigError
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import TERMINAL, JobRecord
from orchestrator.workflow.phases import is_phase_token


class ThroughputRun(BaseModel):
    workers: int
    goals: int
    done: int
    wall_s: float
    goals_per_min: float
    overhead_s_median: float
    overhead_s_p95: float
    model_s_median: float


class ThroughputReport(BaseModel):
    goals: int
    think_ms: int
    scenario: str
    runs: list[ThroughputRun]
    ratio: float
    """goals/min with the most workers over goals/min with one."""
    overhead_s_median: float
    targets: dict[str, float] = {"overhead_s_median_max": 1.0, "ratio_min": 1.8}
    ok: bool


def bench_throughput(
    *, goals: int, workers: int, think_ms: int, scenario: Path, skills: Path, timeout_s: float = 900
) -> ThroughputReport:
    if shutil.which("redis-server") is None:
        raise ConfigError("redis-server is not installed", where="bench", next_step="run bash ops/setup.sh")
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        timed = Path(tmp) / "scenario.yaml"
        data = yaml.safe_load(scenario.read_text(encoding="utf-8"))
        data["delay_ms"] = think_ms
        timed.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        runs = []
        for count in sorted({1, workers}):
            runs.append(_one_run(Path(tmp) / f"w{count}", count, goals, timed, data["goal"], skills, timeout_s))
    ratio = runs[-1].goals_per_min / runs[0].goals_per_min if runs[0].goals_per_min else 0.0
    overhead = max(r.overhead_s_median for r in runs)
    return ThroughputReport(
        goals=goals,
        think_ms=think_ms,
        scenario=str(scenario),
        runs=runs,
        ratio=round(ratio, 3),
        overhead_s_median=overhead,
        ok=overhead < 1.0 and (workers == 1 or ratio >= 1.8) and all(r.done == goals for r in runs),
    )


def _one_run(
    root: Path, workers: int, goals: int, scenario: Path, goal: str, skills: Path, timeout_s: float
) -> ThroughputRun:
    root.mkdir(parents=True)
    with _redis(root / "redis") as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_")}
        env.update(
            ORCH_BROKER_URL=url,
            ORCH_OUTPUT_ROOT=str(root / "out"),
            ORCH_CACHE_DIR=str(root / "cache"),
            ORCH_SKILLS_DIR=str(skills.resolve()),
            ORCH_SCENARIO_DIRS=json.dumps([str(scenario.resolve().parent)]),
            ORCH_LOG_LEVEL="WARNING",
            ORCH_WORKER__CHECK_MODEL="false",  # goal lines name their scripted model
        )
        with _workers(root, workers, env, url):
            ledger = Ledger.from_url(url)
            lines = "\n".join(
                json.dumps({"goal": goal, "model": f"scripted:{scenario}", "job_id": f"bench-{i:04d}"})
                for i in range(goals)
            )
            submit = subprocess.run(
                [sys.executable, "-m", "orchestrator", "submit", "-", "--json"],
                input=lines, env=env, capture_output=True, text=True, timeout=300,
            )
            if submit.returncode != 0:
                raise ConfigError(f"bench: submit failed: {submit.stderr[-2000:]}", where="bench")
            ids = [f"bench-{i:04d}" for i in range(goals)]
            records = _wait(ledger, ids, timeout_s)
    return _measure(workers, goals, records)


def _measure(workers: int, goals: int, records: list[JobRecord]) -> ThroughputRun:
    finished = [r for r in records if r.state in TERMINAL and r.finished_at]
    start = min(r.submitted_at for r in records)
    end = max((r.finished_at or 0) for r in finished) if finished else time.time()
    wall = max(end - start, 1e-6)
    overheads = []
    models = []
    for r in finished:
        phases = sum(v for k, v in r.timings.items() if is_phase_token(k))
        inside = r.timings.get("model", 0.0) + r.timings.get("scripts", 0.0)
        overheads.append(max(0.0, phases - inside))
        models.append(r.timings.get("model", 0.0))
    overheads.sort()
    return ThroughputRun(
        workers=workers,
        goals=goals,
        done=sum(1 for r in finished if r.state == "done"),
        wall_s=round(wall, 3),
        goals_per_min=round(len(finished) / wall * 60, 2),
        overhead_s_median=round(statistics.median(overheads), 3) if overheads else 0.0,
        overhead_s_p95=round(overheads[int(0.95 * (len(overheads) - 1))], 3) if overheads else 0.0,
        model_s_median=round(statistics.median(models), 3) if models else 0.0,
    )


def _wait(ledger: Ledger, ids: list[str], timeout_s: float) -> list[JobRecord]:
    deadline = time.monotonic() + timeout_s
    while True:
        records = [r for i in ids if (r := ledger.get(i)) is not None]
        if all(r.state in TERMINAL for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _redis(folder: Path) -> Iterator[str]:
    folder.mkdir(parents=True)
    port = _free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--save", "",
         "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(url, socket_connect_timeout=0.5).ping()
                break
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@contextlib.contextmanager
def _workers(root: Path, count: int, env: dict[str, str], url: str) -> Iterator[None]:
    procs = []
    try:
        for i in range(count):
            log = open(root / f"worker{i}.log", "wb")  # noqa: SIM115 - closed with the process
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "orchestrator", "worker", "--concurrency", "1", "-n", f"bench{i}@%h",
                     "--loglevel", "WARNING"],
                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                )
            )
        deadline = time.monotonic() + 120
        ledger = Ledger.from_url(url)
        while sum(1 for w in ledger.workers() if w.get("ready")) < count:  # ready: consuming the queue
            if time.monotonic() > deadline:
                raise ConfigError("bench: the workers were not ready in 120 s", where="bench")
            time.sleep(0.5)
        yield
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
