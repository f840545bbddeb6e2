"""``keys create|list|revoke`` and ``api`` as an operator runs them: real processes on a private Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
from api_helpers import REPO, RedisServer, free_port, goal, wait_for


def _env(redis_url: str, root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_")}
    env.update(ORCH_BROKER_URL=redis_url, ORCH_OUTPUT_ROOT=str(root / "out"), ORCH_CACHE_DIR=str(root / "cache"),
               ORCH_SCENARIO_DIRS=json.dumps([str(REPO / "ops" / "scenarios")]))
    return env


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


def test_keys_are_made_listed_and_revoked_and_the_api_command_serves_them(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis").start()
    env = _env(server.url, tmp_path)
    port = free_port()
    api = subprocess.Popen([sys.executable, "-m", "orchestrator", "api", "--host", "127.0.0.1", "--port", str(port)],
                           cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        made = _cli(env, "keys", "create", "alice", "--json")
        assert made.returncode == 0, made.stderr
        alice = json.loads(made.stdout)
        assert alice["name"] == "alice" and alice["admin"] is False and alice["key"].startswith("orch-")
        plain = _cli(env, "keys", "create", "root", "--admin")
        assert plain.returncode == 0 and plain.stdout.strip().startswith("orch-")
        assert _cli(env, "keys", "create", "alice").returncode == 1  # one key per producer
        assert _cli(env, "keys", "create", "bad\nname").returncode == 1
        listed = json.loads(_cli(env, "keys", "list", "--json").stdout)
        assert [(k["name"], k["admin"]) for k in listed] == [("alice", False), ("root", True)]
        assert alice["key"] not in json.dumps(listed) and "sha256" not in json.dumps(listed)
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _up(url), 30, "the api command to serve")
        headers = {"Authorization": f"Bearer {alice['key']}"}
        accepted = httpx.post(f"{url}/v1/jobs", json=[goal("k-1")], headers=headers).json()
        assert [a["job_id"] for a in accepted["accepted"]] == ["k-1"]
        assert httpx.get(f"{url}/v1/jobs/k-1", headers=headers).json()["owner"] == "alice"
        revoked = _cli(env, "keys", "revoke", "alice")
        assert revoked.returncode == 0
        assert httpx.get(f"{url}/v1/jobs/k-1", headers=headers).status_code == 401
        assert _cli(env, "keys", "revoke", "alice").returncode == 1
        schema = httpx.get(f"{url}/openapi.json").json()
        assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/batches/{batch}/report", "/healthz"} <= set(schema["paths"])
    finally:
        api.terminate()
        api.wait(timeout=20)
        server.stop()


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
