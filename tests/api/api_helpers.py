"""A private Redis and the producers' API served by a real uvicorn server in a thread, for the front-door tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis
import uvicorn

from orchestrator.api.keys import KeyStore
from orchestrator.api.server import create_api
from orchestrator.config import Settings, load_settings
from orchestrator.worker.celery_app import create_app
from orchestrator.worker.ledger import Ledger

REPO = Path(__file__).resolve().parents[2]
BRAND_JSON = REPO / "ops" / "scenarios" / "brand-json.yaml"
BRAND_GOAL = "Give me our brand rules as a machine-readable brand.json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@dataclass
class RedisServer:
    """``redis-server`` on a free loopback port, in a folder of the test's (the shared 6379 is never touched)."""

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
             "--appendonly", "no", "--protected-mode", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_for(self._ping, 10, "redis-server to answer")
        return self

    def _ping(self) -> bool:
        try:
            return bool(redis.Redis.from_url(self.url, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


def door_settings(root: Path, redis_url: str, **overrides: Any) -> Settings:
    return load_settings(
        None, broker_url=redis_url, output_root=root / "out", cache_dir=root / "cache", skills_dir=REPO / "skills",
        scenario_dirs=[REPO / "ops" / "scenarios"], **overrides,
    )


class ApiServer:
    """The API app under a real uvicorn server on a free loopback port, in a background thread."""

    def __init__(self, settings: Settings, *, render_report: Any = None) -> None:
        self.settings = settings
        self.ledger = Ledger.from_url(settings.broker_url)
        self.keys = KeyStore(self.ledger.r)
        self.port = free_port()
        app = create_api(settings, self.ledger, create_app(settings), render_report=render_report)
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ApiServer:
        self.thread.start()
        wait_for(lambda: self.server.started, 15, "the API server to start")
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)

    def client(self, key: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def producer(self, name: str, **quotas: Any) -> httpx.Client:
        _, secret = self.keys.create(name, **quotas)
        return self.client(secret)


def goal(job_id: str, **extra: Any) -> dict[str, Any]:
    return {"goal": BRAND_GOAL, "model": f"scripted:{BRAND_JSON}", "job_id": job_id, **extra}
