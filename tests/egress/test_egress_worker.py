"""End to end through a real Celery worker: a goal line naming a registered library whose skill calls a granted
service. The grant and the secret are the worker's settings and environment; the producer's line carries neither,
and the secret is nowhere in the ledger, the worker's log, the outputs or what the model was sent."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import redis
from egress_world import (
    EGRESS_PREFIX,
    GOAL,
    SECRET_NAME,
    SECRET_VALUE,
    egress_image,
    egress_section,
    forecast_library,
    forecast_scenario,
    injected_digest,
    leftovers,
)


def _worker_helpers():  # noqa: ANN202 - the worker tests' cluster (tests/worker/worker_helpers.py)
    name = "worker_helpers"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "worker" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_a_worker_runs_a_granted_skill_that_calls_the_service(upstream, docker_client, tmp_path):
    egress_image(docker_client)
    helpers = _worker_helpers()
    library = forecast_library(tmp_path / "lib")
    scenario = forecast_scenario(tmp_path / "forecast.yaml", granted=True)
    server = helpers.RedisServer(tmp_path / "redis").start()
    cluster = helpers.Cluster(
        root=tmp_path,
        redis=server,
        settings_env={
            "ORCH_LIBRARIES": json.dumps({"weather": str(library)}),
            "ORCH_EGRESS": json.dumps(egress_section(upstream, library="weather", skill="forecast")),
            f"ORCH_SECRET_{SECRET_NAME}": SECRET_VALUE,
            "ORCH_SANDBOX__LABEL_PREFIX": EGRESS_PREFIX,
        },
    )
    try:
        cluster.start_worker("w1")
        line = {"goal": GOAL, "skills": "weather", "model": f"scripted:{scenario}", "job_id": "egress-1"}
        done = cluster.cli("submit", "-", "--wait", "--timeout", "400", "--json", stdin=json.dumps(line), timeout=450)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + cluster.log("w1")[-3000:]
        job = cluster.job("egress-1")
        assert job["state"] == "done", job
        saved = json.loads((cluster.output_root / "egress-1" / "forecast.json").read_text())
        assert saved["upstream"]["auth_sha256"] == injected_digest()
        assert "api.granted.test" in json.dumps(job["result"])
        store = redis.Redis.from_url(server.url)
        for key in store.scan_iter():
            kind = store.type(key).decode()
            dumped = {"string": lambda k: store.get(k), "hash": store.hgetall, "list": lambda k: store.lrange(k, 0, -1),
                      "set": store.smembers, "zset": lambda k: store.zrange(k, 0, -1)}.get(kind, lambda k: b"")(key)
            assert SECRET_VALUE not in repr(dumped), key
        assert SECRET_VALUE not in cluster.log("w1")
        for path in cluster.output_root.rglob("*"):
            assert not path.is_file() or SECRET_VALUE.encode() not in path.read_bytes(), path
    finally:
        cluster.stop_all()
        server.stop()
    assert leftovers(docker_client, EGRESS_PREFIX) == []
