"""The local outside world of the egress tests: a test CA, an upstream container (HTTPS, HTTP, UDP echo) on the
default bridge, and the settings that grant a skill one of its names."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme

from orchestrator.egress import EgressSettings
from orchestrator.sandbox.reaper import owner_alive, owner_id

EGRESS_PREFIX = "orchtestegress"
"""The sandbox resources of these tests (jobs may live across a module's tests); not the sandbox tests' prefix."""
UPSTREAM_LABEL = "orchtest-egress-upstream"  # not the sandbox's prefix: the per-test sweep must not see it
GRANTED = "api.granted.test"
OTHER = "other.test"
SECRET_NAME = "API_TOKEN"
SECRET_VALUE = "s3cr3t-" + uuid.uuid4().hex  # unique per run: found anywhere, it leaked
HERE = Path(__file__).parent


@dataclass
class Upstream:
    container: str
    address: str
    ca_file: Path

    def seen(self, docker_client: Any) -> list[dict[str, Any]]:
        """What reached the upstream (one entry per request or UDP datagram)."""
        raw = docker_client.api.logs(self.container, stdout=False, stderr=True).decode("utf-8", "replace")
        return [json.loads(line) for line in raw.splitlines() if line.startswith("{") and '"seen"' in line]


def egress_image(docker_client: Any) -> str:
    import docker.errors
    import pytest

    name = EgressSettings().image
    try:
        docker_client.images.get(name)
    except docker.errors.ImageNotFound:
        pytest.fail(f"egress image {name} is missing: run `python -m orchestrator compose build-images --only egress`")
    return name


@contextmanager
def running_upstream(docker_client: Any, folder: Path) -> Iterator[Upstream]:
    """Start the upstream (its certificate names GRANTED and OTHER, signed by a fresh test CA)."""
    ca = trustme.CA()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    ca.issue_cert(GRANTED, OTHER).private_key_and_cert_chain_pem.write_to_path(str(folder / "server.pem"))
    shutil.copy(HERE / "egress_upstream.py", folder / "egress_upstream.py")
    for path in folder.iterdir():
        path.chmod(0o644)
    api = docker_client.api
    created = api.create_container(
        egress_image(docker_client),
        ["python3", "/srv/egress_upstream.py", "/srv/server.pem"],
        entrypoint=[],
        name=f"orchtest-upstream-{uuid.uuid4().hex[:8]}",
        labels={UPSTREAM_LABEL: "1"},
        host_config=api.create_host_config(binds={str(folder): {"bind": "/srv", "mode": "ro"}}),
    )
    cid = created["Id"]
    try:
        api.start(cid)
        deadline = time.monotonic() + 30
        while b'"ready"' not in api.logs(cid, stdout=False, stderr=True):
            assert time.monotonic() < deadline, api.logs(cid).decode()
            time.sleep(0.1)
        address = api.inspect_container(cid)["NetworkSettings"]["Networks"]["bridge"]["IPAddress"]
        yield Upstream(cid, address, folder / "ca.pem")
    finally:
        api.remove_container(cid, force=True)


def egress_section(upstream: Upstream, *, library: str, skill: str | None = None, **extra: Any) -> dict[str, Any]:
    """The ``egress`` settings granting ``GRANTED:8443`` (and ``GRANTED:8080``) with the secret as a bearer token."""
    grant: dict[str, Any] = {
        "library": library,
        "hosts": [f"{GRANTED}:8443", f"{GRANTED}:8080"],
        "secrets": {SECRET_NAME: {"host": f"{GRANTED}:8443", "header": "Authorization", "format": "Bearer {value}"}},
    }
    if skill is not None:
        grant["skill"] = skill
    return {
        "grants": [grant],
        "extra_hosts": {GRANTED: upstream.address, OTHER: upstream.address},
        "upstream_ca_file": str(upstream.ca_file),
        **extra,
    }


def injected_digest() -> str:
    return hashlib.sha256(f"Bearer {SECRET_VALUE}".encode()).hexdigest()


def assert_forecast_saved(out_dir: Path) -> None:
    """The skill's output: the upstream's answer to the call, which carried the injected secret."""
    saved = json.loads((out_dir / "forecast.json").read_text())
    assert saved["upstream"]["auth_sha256"] == injected_digest()
    assert saved["upstream"]["path"] == "/v1/forecast?city=Lyon"


def assert_secret_nowhere(*texts: str, folders: tuple[Path, ...] = ()) -> None:
    """The secret's value is in none of ``texts`` (results, logs, ledger dumps) nor any file under ``folders``."""
    for text in texts:
        assert SECRET_VALUE not in text
    for folder in folders:
        for path in folder.rglob("*"):
            assert not path.is_file() or SECRET_VALUE.encode() not in path.read_bytes(), path


def leftovers(docker_client: Any, prefix: str) -> list[str]:
    """Containers, volumes and networks of ``prefix`` left by this process (or by a dead one)."""
    key, me = f"{prefix}.managed", owner_id()

    def ours(labels: dict[str, str] | None) -> bool:
        owner = (labels or {}).get(f"{prefix}.owner", "")
        return owner == me or owner_alive(owner) is False

    api = docker_client.api
    containers = api.containers(all=True, filters={"label": key})
    volumes = api.volumes(filters={"label": key}).get("Volumes") or []
    found = [f"container {c['Names'][0]}" for c in containers if ours(c["Labels"])]
    found += [f"volume {v['Name']}" for v in volumes if ours(v["Labels"])]
    found += [f"network {n['Name']}" for n in api.networks(filters={"label": key}) if ours(n["Labels"])]
    return found


GOAL = "Save tomorrow's forecast for Lyon from our forecast service as forecast.json"
SKILL_MD = f"""---
name: forecast
description: Fetches a city's weather forecast from the company forecast service and saves it as forecast.json.
metadata:
  network: ["{GRANTED}:8443"]
  secrets: [{SECRET_NAME}]
---
# Forecast

Run `fetch.py` with {{"city": NAME}}. It calls the forecast service (the key is added on the way, the script never
holds it) and writes `build/forecast.json`.
"""
FETCH = f"""import json, sys, urllib.request
city = json.load(sys.stdin).get("city", "Paris")
with urllib.request.urlopen("https://{GRANTED}:8443/v1/forecast?city=" + city, timeout=20) as response:
    answer = json.load(response)
with open("build/forecast.json", "w") as fh:
    json.dump({{"city": city, "upstream": answer}}, fh)
print(json.dumps({{"written": "build/forecast.json", "path": answer["path"]}}))
"""


def forecast_scenario(path: Path, *, granted: bool) -> Path:
    """The scripted model's part: plan the forecast skill; granted, run fetch.py and finish (else the plan only)."""
    plan = {
        "purpose": "plan",
        "reply": {"content": json.dumps({
            "steps": [{"skill": "forecast", "why": "it calls the forecast service", "expected": "forecast.json",
                       "outputs": [{"path": "forecast.json", "kind": "json"}]}],
            "evaluation": ["forecast.json holds the service's answer"],
        })},
    }
    act = [
        {"purpose": "act", "expect": {"contains": ["# Forecast"]},
         "reply": {"tool_calls": [{"name": "run_script",
                                   "arguments": {"path": "fetch.py", "args": {"city": "Lyon"}}}]}},
        {"purpose": "act", "expect": {"last_tool_result_contains": ['"exit_code": 0', "api.granted.test"]},
         "reply": {"tool_calls": [{"name": "finish",
                                   "arguments": {"summary": "saved", "outputs": ["build/forecast.json"]}}]}},
        {"purpose": "semantic",
         "reply": {"content": '{"pass": true, "missing": [], "violations": [], "rationale": "the forecast is there"}'}},
    ]
    scenario = {"goal": GOAL, "model": "scripted-forecast", "forbid": [SECRET_VALUE],
                "steps": [plan, *(act if granted else [])]}
    path.write_text(json.dumps(scenario))
    return path


def forecast_library(tmp_path: Path) -> Path:
    """A library with one skill, ``forecast``, that declares the granted host and the secret and calls the service."""
    skill = tmp_path / "egress-skills" / "forecast"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "fetch.py").write_text(FETCH)
    return skill.parent
