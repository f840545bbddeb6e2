"""The CI provisions a real Docker engine and a real Redis; these prove the wiring every later test relies on."""

from __future__ import annotations

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


def test_docker_engine_runs_a_container_with_no_network(docker_client, sandbox_image: str) -> None:
    output = docker_client.containers.run(
        sandbox_image,
        ["python3", "-c", "import socket; print(socket.gethostname() != '')"],
        network_mode="none",
        remove=True,
        labels={"orchtest": "services"},
    )
    assert output.strip() == b"True"
