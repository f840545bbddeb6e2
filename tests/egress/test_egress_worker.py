"""End to end through real Celery workers: a goal line naming a library whose skill calls a granted service. The
grant and the secret are the worker's settings and environment; the producer's line carries neither, and the secret
is nowhere in the ledger, the worker's log, the outputs or what the model was sent.

Twice: a worker process on this host (the worker tests' cluster), and the compose stack's worker service in its
container (compose.yaml as shipped, the grant and the secret in the worker's own env file, ORCH_WORKER_ENV_FILE),
which starts the sandbox and the egress proxy through the host's engine as siblings.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis
from egress_world import (
    EGRESS_PREFIX,
    GOAL,
    SECRET_NAME,
    SECRET_VALUE,
    assert_forecast_saved,
    assert_secret_nowhere,
    egress_image,
    egress_section,
    forecast_library,
    forecast_scenario,
    leftovers,
)

from orchestrator.deploy import hostenv

REPO = Path(__file__).resolve().parents[2]


def _worker_helpers():  # noqa: ANN202 - the worker tests' cluster (tests/worker/worker_helpers.py)
    name = "worker_helpers"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "worker" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


def _redis_dump(store: redis.Redis) -> str:
    """Every key and value of a Redis database, as text (the ledger, the queues, the results)."""
    readers = {
        "string": store.get,
        "hash": store.hgetall,
        "list": lambda k: store.lrange(k, 0, -1),
        "set": store.smembers,
        "zset": lambda k: store.zrange(k, 0, -1),
    }
    return "\n".join(f"{key!r} {readers.get(store.type(key).decode(), lambda _k: b'')(key)!r}"
                     for key in store.scan_iter())


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
        assert_forecast_saved(cluster.output_root / "egress-1")
        assert "api.granted.test" in json.dumps(job["result"])
        assert_secret_nowhere(
            _redis_dump(redis.Redis.from_url(server.url)), cluster.log("w1"), folders=(cluster.output_root,)
        )
    finally:
        cluster.stop_all()
        server.stop()
    assert leftovers(docker_client, EGRESS_PREFIX) == []


# -- the compose stack's worker --------------------------------------------------------------------------------------


def _compose(project: str, env: dict[str, str], *args: str, stdin: str | None = None, timeout: float = 300):
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail("docker-compose is required (bash ops/setup.sh installs Debian's docker-compose)")
    return subprocess.run(
        [binary, "-f", str(REPO / "compose.yaml"), "-p", project, *args],
        cwd=REPO, env=env, input=stdin, capture_output=True, text=True, timeout=timeout, check=False,
    )


def _in_worker(project: str, env: dict[str, str], *argv: str, stdin: str | None = None, timeout: float = 300):
    """A command in the running worker container, as an operator runs one (`compose exec`), with its broker URL."""
    script = 'export ORCH_BROKER_URL=redis://:$ORCH_REDIS_PASSWORD@redis:6379/0; exec "$@"'
    return _compose(project, env, "exec", "-T", "worker", "sh", "-c", script, "sh", *argv, stdin=stdin,
                    timeout=timeout)


def _ours(docker_client, prefix: str) -> list[str]:
    api, key = docker_client.api, f"{prefix}.managed"
    found = [f"container {c['Names'][0]}" for c in api.containers(all=True, filters={"label": key})]
    found += [f"network {n['Name']}" for n in api.networks(filters={"label": key})]
    return found + [f"volume {v['Name']}" for v in api.volumes(filters={"label": key}).get("Volumes") or []]


def test_the_compose_worker_runs_a_granted_skill_with_the_grant_and_secret_of_its_env_file(
    upstream, docker_client, tmp_path
):
    egress_image(docker_client)
    docker_client.images.get("orchestrator-app:latest")  # built by ops/setup.sh (compose build-images)
    prefix = f"orchtestegc{uuid.uuid4().hex[:6]}"  # sandbox labels no other test uses: all of them are this run's
    project = f"orchtestegress{uuid.uuid4().hex[:8]}"
    library = forecast_library(tmp_path / "lib")
    scenarios = tmp_path / "scenarios"  # mounted read-only into the worker at the same path
    scenarios.mkdir()
    scenario = forecast_scenario(scenarios / "forecast.yaml", granted=True)
    ca_file = scenarios / "upstream-ca.pem"  # the worker reads egress.upstream_ca_file: a path it can see
    shutil.copy(upstream.ca_file, ca_file)
    for path in (tmp_path, tmp_path / "lib", scenarios, *scenarios.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    worker_env = tmp_path / "worker.env"
    hostenv.ensure_worker_env(worker_env)
    grants = egress_section(upstream, library="default", skill="forecast", upstream_ca_file=str(ca_file))
    with worker_env.open("a") as fh:
        fh.write(f"ORCH_EGRESS={json.dumps(grants)}\n")
        fh.write(f"ORCH_SECRET_{SECRET_NAME}={SECRET_VALUE}\n")
        fh.write(f"ORCH_SANDBOX__LABEL_PREFIX={prefix}\n")
        fh.write("ORCH_WORKER__CHECK_MODEL=false\n")  # goal lines name their scripted model; no model server here
    host = hostenv.compute(
        REPO, cache_dir=tmp_path / "cache", output_root=tmp_path / "out", skills=library,
        existing={"ORCH_WORKER_ENV_FILE": str(worker_env)},
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ORCH_", "COMPOSE_", "DOCKER_GID"))}
    env = {**clean, **{k: str(v) for k, v in host.model_dump().items()}, "ORCH_SCENARIOS_DIR": str(scenarios),
           "ORCH_REDIS_PORT": "0"}
    try:
        up = _compose(project, env, "up", "-d", "redis", "worker")
        assert up.returncode == 0, up.stderr[-3000:]
        line = {"goal": GOAL, "model": f"scripted:{scenario}", "job_id": "egress-c"}
        done = _in_worker(project, env, "python", "-m", "orchestrator", "submit", "-", "--wait", "--timeout", "400",
                          "--json", stdin=json.dumps(line), timeout=450)
        logs = _compose(project, env, "logs", "--no-color", "worker").stdout
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + logs[-3000:]
        shown = _in_worker(project, env, "python", "-m", "orchestrator", "jobs", "egress-c", "--json")
        job = json.loads(shown.stdout)
        assert job["state"] == "done", job
        assert "api.granted.test" in json.dumps(job["result"])
        assert_forecast_saved(tmp_path / "out" / "egress-c")
        dump = _in_worker(project, env, "python", "-c",
                          "import os, redis; store = redis.Redis.from_url(os.environ['ORCH_BROKER_URL']); "
                          "print(repr([(k, store.dump(k)) for k in store.scan_iter()]))")
        assert dump.returncode == 0 and "egress-c" in dump.stdout, dump.stderr[-2000:]
        assert_secret_nowhere(done.stdout, shown.stdout, dump.stdout, logs, folders=(tmp_path / "out",))
    finally:
        _compose(project, env, "down", "-v", "--remove-orphans")
    assert _ours(docker_client, prefix) == []
