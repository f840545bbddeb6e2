"""The local outside world of the egress tests: a test CA, an upstream container (HTTPS, HTTP, UDP echo) on the
default bridge, and the settings that grant a skill one of its names. Shared by the sandbox and end-to-end tests."""

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

from orchestrator.deploy.images import DEFAULT_TAGS

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

    name = DEFAULT_TAGS["egress"]
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
