"""compose.yaml, read by the real Debian `docker-compose` 1.29 (`config` interpolates and validates it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from orchestrator.deploy import hostenv

ROOT = Path(__file__).resolve().parents[2]


def compose_config(
    env: dict[str, str], tmp_path: Path, files: tuple[str, ...] = ("compose.yaml",)
) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail("docker-compose is required (bash ops/setup.sh installs Debian's docker-compose)")
    # Copies, so a developer's .env beside the real files does not leak into the test.
    for name in files:
        shutil.copy(ROOT / name, tmp_path / name)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ORCH_", "DOCKER_GID", "COMPOSE_"))}
    return subprocess.run(
        [binary, *(arg for name in files for arg in ("-f", str(tmp_path / name))), "config"],
        cwd=tmp_path,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=False,
    )


GRANTS = (
    '{"grants": [{"library": "default", "skill": "forecast", "hosts": ["api.example.com:8443"], "secrets": '
    '{"API_TOKEN": {"host": "api.example.com:8443", "header": "X-Key", "format": "Key {value}"}}}]}'
)


@pytest.fixture
def host_env(tmp_path: Path) -> dict[str, str]:
    worker_env = tmp_path / "worker.env"
    hostenv.ensure_worker_env(worker_env)
    env = hostenv.compute(
        ROOT, cache_dir=tmp_path / "cache", output_root=tmp_path / "out",
        existing={"ORCH_WORKER_ENV_FILE": str(worker_env)},
    )
    return {k: str(v) for k, v in env.model_dump().items()}


@pytest.fixture
def config(host_env: dict[str, str], tmp_path: Path) -> dict:
    done = compose_config(host_env, tmp_path)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


def test_compose_refuses_to_start_without_the_host_settings(tmp_path: Path) -> None:
    done = compose_config({}, tmp_path)
    assert done.returncode != 0
    assert "compose env --write" in done.stderr


def test_the_file_has_no_version_key_and_only_the_five_services(config: dict) -> None:
    raw = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert "version" not in raw  # the Compose Specification: read by v2 and by 1.27+
    assert set(config["services"]) == {"redis", "api", "worker", "flower", "scripted-llm"}


def test_the_api_reads_the_output_root_read_only_and_holds_no_docker_socket(config: dict, host_env: dict) -> None:
    api = config["services"]["api"]
    mounts = {v.split(":")[0]: v.split(":")[1:] for v in api["volumes"]}
    root = host_env["ORCH_OUTPUT_ROOT"]
    assert mounts[root] == [root, "ro"]
    assert host_env["ORCH_DOCKER_SOCKET"] not in mounts
    published = [str(port) for port in api["ports"]]
    assert any("127.0.0.1" in port and "8400" in port for port in published), published


def test_workers_see_skills_cache_and_output_root_at_the_host_paths(config: dict, host_env: dict) -> None:
    worker = config["services"]["worker"]
    mounts = {v.split(":")[0]: v.split(":")[1:] for v in worker["volumes"]}
    for name, mode in [("ORCH_SKILLS_DIR", "ro"), ("ORCH_CACHE_DIR", "rw"), ("ORCH_OUTPUT_ROOT", "rw")]:
        path = host_env[name]
        assert mounts[path] == [path, mode], f"{name} must be mounted at the same path"
        assert worker["environment"][name] == path
    assert mounts[host_env["ORCH_DOCKER_SOCKET"]] == ["/var/run/docker.sock", "rw"]


def test_workers_run_as_the_host_user_with_the_docker_socket_group(config: dict, host_env: dict) -> None:
    worker = config["services"]["worker"]
    assert worker["user"] == f"{host_env['ORCH_UID']}:{host_env['ORCH_GID']}"
    assert worker["group_add"] == [host_env["DOCKER_GID"]]


def test_workers_and_flower_reach_redis_with_its_password_which_never_shows_in_a_process_list(
    config: dict, host_env: dict
) -> None:
    password = host_env["ORCH_REDIS_PASSWORD"]
    redis = config["services"]["redis"]
    assert redis["environment"]["REDISCLI_AUTH"] == password  # the health check's redis-cli
    script = redis["command"][-1]
    assert redis["command"][:2] == ["sh", "-c"] and "requirepass $$REDISCLI_AUTH" in script
    assert password not in " ".join(redis["command"])  # the server reads it on stdin, not in its argv
    for name in ("worker", "flower", "api"):
        service = config["services"][name]
        assert service["environment"]["ORCH_REDIS_PASSWORD"] == password
        # what the service and an operator's `docker-compose exec SERVICE python -m orchestrator ...` use
        assert service["environment"]["ORCH_BROKER_URL"] == f"redis://:{password}@redis:6379/0"
        assert "ORCH_BROKER_URL=$${ORCH_STACK_BROKER_URL:-$$ORCH_BROKER_URL}" in service["command"][-1]
        assert password not in " ".join(service["command"])


def test_compose_refuses_to_start_without_a_redis_password_or_a_flower_login(host_env: dict, tmp_path: Path) -> None:
    for name in ("ORCH_REDIS_PASSWORD", "ORCH_FLOWER_AUTH"):
        done = compose_config({k: v for k, v in host_env.items() if k != name}, tmp_path)
        assert done.returncode != 0 and name in done.stderr and "compose env --write" in done.stderr


def test_redis_persists_append_only_into_a_named_volume(config: dict) -> None:
    redis = config["services"]["redis"]
    assert "--appendonly yes" in redis["command"][-1]
    assert "redis-data:/data:rw" in redis["volumes"]
    assert "redis-data" in config["volumes"]


def test_only_the_api_and_flower_are_published_and_on_the_loopback_only(config: dict) -> None:
    published = {name: svc["ports"] for name, svc in config["services"].items() if svc.get("ports")}
    assert set(published) == {"api", "flower"}, published  # Redis stays on the stack's network
    for name, ports in published.items():
        for port in ports:
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond the loopback"


def test_the_operator_override_publishes_redis_on_the_loopback(host_env: dict, tmp_path: Path) -> None:
    done = compose_config(host_env, tmp_path, ("compose.yaml", "compose.operator.yaml"))
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    assert [str(p) for p in services["redis"]["ports"]] == ["127.0.0.1:6380:6379/tcp"]
    assert {n for n, svc in services.items() if svc.get("ports")} == {"api", "flower", "redis"}
    moved = compose_config({**host_env, "ORCH_REDIS_PORT": "7001"}, tmp_path, ("compose.yaml", "compose.operator.yaml"))
    assert [str(p) for p in yaml.safe_load(moved.stdout)["services"]["redis"]["ports"]] == ["127.0.0.1:7001:6379/tcp"]


def test_flower_requires_the_generated_basic_auth_login(host_env: dict, tmp_path: Path) -> None:
    flower = yaml.safe_load(compose_config(host_env, tmp_path).stdout)["services"]["flower"]
    assert flower["environment"]["FLOWER_BASIC_AUTH"] == host_env["ORCH_FLOWER_AUTH"]
    assert "exec celery -A orchestrator.worker.celery_app:app flower" in flower["command"][-1]
    custom = compose_config({**host_env, "ORCH_FLOWER_AUTH": "ops:s3cret-0123456"}, tmp_path)
    flower = yaml.safe_load(custom.stdout)["services"]["flower"]
    assert flower["environment"]["FLOWER_BASIC_AUTH"] == "ops:s3cret-0123456"


def test_every_app_service_uses_the_one_locally_built_app_image(config: dict) -> None:
    images = {name: svc["image"] for name, svc in config["services"].items()}
    assert images == {
        "redis": "orchestrator-redis:latest",
        "api": "orchestrator-app:latest",
        "worker": "orchestrator-app:latest",
        "flower": "orchestrator-app:latest",
        "scripted-llm": "orchestrator-app:latest",
    }
    assert not any("build" in svc for svc in config["services"].values())  # built by compose build-images


def test_only_the_worker_gets_the_egress_grants_and_secret_values_from_its_own_env_file(
    host_env: dict, tmp_path: Path
) -> None:
    worker_env = Path(host_env["ORCH_WORKER_ENV_FILE"])
    assert worker_env.stat().st_mode & 0o777 == 0o600  # made owner-only, holding comments only
    assert all(line.startswith("#") for line in worker_env.read_text().splitlines())
    worker_env.write_text(worker_env.read_text() + f"ORCH_EGRESS={GRANTS}\nORCH_SECRET_API_TOKEN=v4lue-$x'y\n")
    done = compose_config(host_env, tmp_path)
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    worker = services["worker"]["environment"]
    assert worker["ORCH_EGRESS"] == GRANTS
    assert worker["ORCH_SECRET_API_TOKEN"].replace("$$", "$") == "v4lue-$x'y"  # `config` escapes a literal $
    for name in ("api", "flower", "redis", "scripted-llm"):
        assert "ORCH_SECRET_API_TOKEN" not in services[name].get("environment", {}), name
        assert "ORCH_EGRESS" not in services[name].get("environment", {}), name


def test_compose_refuses_to_start_without_the_workers_env_file(host_env: dict, tmp_path: Path) -> None:
    missing = compose_config({k: v for k, v in host_env.items() if k != "ORCH_WORKER_ENV_FILE"}, tmp_path)
    assert missing.returncode != 0 and "compose env --write" in missing.stderr
    Path(host_env["ORCH_WORKER_ENV_FILE"]).unlink()
    assert compose_config(host_env, tmp_path).returncode != 0
