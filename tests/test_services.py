"""The CI provisions a real Docker engine and a real Redis; these prove the wiring every later test relies on."""

from __future__ import annotations

import json
import uuid

import redis


def test_redis_round_trips_a_value(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    key = f"orchtest:{uuid.uuid4().hex}"
    try:
        client.set(key, "hello", ex=30)
        assert client.get(key) == b"hello"
    finally:
        client.delete(key)


NETWORK_PROBE = """
import errno, json, socket
try:
    socket.create_connection(("192.0.2.1", 80), timeout=1).close()  # TEST-NET-1: routed only if a network exists
    outcome = "connected"
except OSError as e:
    outcome = errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__
print(json.dumps({"interfaces": sorted(name for _, name in socket.if_nameindex()), "connect": outcome}))
"""


def _probe(docker_client, image: str, network_mode: str) -> dict[str, object]:
    output = docker_client.containers.run(
        image, ["python3", "-c", NETWORK_PROBE], network_mode=network_mode, remove=True, labels={"orchtest": "services"}
    )
    return dict(json.loads(output))


def test_docker_engine_runs_a_container_with_no_network(docker_client, sandbox_image: str) -> None:
    # With network_mode="none" the container has only loopback and no route anywhere.
    assert _probe(docker_client, sandbox_image, "none") == {"interfaces": ["lo"], "connect": "ENETUNREACH"}
    # The same probe on the default bridge sees an interface and a route: it would notice a network.
    bridged = _probe(docker_client, sandbox_image, "bridge")
    assert bridged["interfaces"] != ["lo"] and bridged["connect"] != "ENETUNREACH", bridged
