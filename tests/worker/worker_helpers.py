"""A private Redis server and real Celery worker processes for the distributed-mode tests.

Each test gets its own ``redis-server`` on a free port (append-only on, in the test's folder), so the shared Redis
on 6379 is never touched, and workers are ``python -m orchestrator worker`` subprocesses in their own sessions.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

REPO = Path(__file__).resolve().parents[2]
BRAND_JSON = REPO / "ops" / "scenarios" / "brand-json.yaml"
BRAND_GOAL = "Give me our brand rules as a machine-readable brand.json"
LABEL_PREFIX = "orchworktest"  # not "orchtest": the sandbox tests sweep that one for leftovers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RedisServer:
    folder: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        exe = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder), "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: self._ping(), 10, "redis-server to answer")
        return self

    def _ping(self) -> bool:
        try:
            return bool(redis.Redis.from_url(self.url, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: Redis flushes the append-only file and exits
            self.proc.wait(timeout=20)
        self.proc = None


@dataclass
class Cluster:
    """Workers and producer commands sharing one Redis, output root and cache folder."""

    root: Path
    redis: RedisServer
    settings_env: dict[str, str] = field(default_factory=dict)
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def output_root(self) -> Path:
        return self.root / "out"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ORCH_", "OTEL_"))}
        env.update(
            ORCH_BROKER_URL=self.redis.url,
            ORCH_OUTPUT_ROOT=str(self.output_root),
            ORCH_CACHE_DIR=str(self.root / "cache"),
            ORCH_SKILLS_DIR=str(REPO / "skills"),
            ORCH_SANDBOX__LABEL_PREFIX=LABEL_PREFIX,
            ORCH_SCENARIO_DIRS=json.dumps([str(REPO), str(self.root)]),
            # Goal lines name their (scripted) models; the default model's server is not there to ask.
            ORCH_WORKER__CHECK_MODEL="false",
            OPENAI_BASE_URL="http://127.0.0.1:9/v1",
            OPENAI_API_KEY="sk-test-never-sent-anywhere",
            PYTHONUNBUFFERED="1",
        )
        env.update(self.settings_env)
        return env

    def start_worker(self, name: str, concurrency: int = 1) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "worker", "--concurrency", str(concurrency), "-n", f"{name}@%h",
             "--loglevel", "INFO"],
            cwd=REPO,
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.workers[name] = proc
        return proc

    def start_flower(self) -> Callable[[str], bytes]:
        """Flower on this cluster's Redis, with a basic-auth login as on compose (stopped with the workers); a
        function that GETs one of its paths once it answers."""
        import base64
        import secrets
        import urllib.error
        import urllib.request

        port, login = free_port(), f"ops:{secrets.token_urlsafe(12)}"
        log = open(self.root / "flower.log", "ab")  # noqa: SIM115 - closed with the process
        self.workers["flower"] = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "orchestrator.worker.celery_app:app", "flower",
             "--address=127.0.0.1", f"--port={port}"],
            cwd=REPO, env={**self.env(), "FLOWER_BASIC_AUTH": login}, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        auth = "Basic " + base64.b64encode(login.encode()).decode()

        def get(path: str) -> bytes:
            request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": auth})
            with urllib.request.urlopen(request, timeout=30) as response:
                body: bytes = response.read()
                return body

        def answers() -> bool:
            try:
                return bool(get("/api/workers"))
            except (OSError, urllib.error.HTTPError):
                return False

        wait_for(answers, 60, "Flower to answer")
        return get

    def kill_worker(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.workers.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)

    def stop_all(self) -> None:
        for name in list(self.workers):
            self.kill_worker(name, signal.SIGTERM)

    def cli(self, *args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orchestrator", *args],
            cwd=REPO,
            env=self.env(),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def ledger(self) -> Any:
        from orchestrator.worker.ledger import Ledger

        return Ledger.from_url(self.redis.url)

    def job(self, job_id: str) -> dict[str, Any]:
        done = self.cli("jobs", job_id, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")


def goal_line(job_id: str, **extra: Any) -> str:
    return json.dumps({"goal": BRAND_GOAL, "model": f"scripted:{BRAND_JSON}", "job_id": job_id, **extra})


def wait_for(check: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
