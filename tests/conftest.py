"""Shared fixtures. Docker and Redis are real and required: a missing service fails the test, it never skips."""

from __future__ import annotations

import functools
import inspect
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.testing import ScriptedModel

# A suite started in the background by a non-interactive shell (`.ci/run ... &`) inherits Ctrl-C ignored, and every
# program it starts would too: `run` and `jobs --watch` then rightly keep ignoring it (a background job's
# convention), and the tests that stop them with Ctrl-C could not. Programs started by the tests get it back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

TEST_LABEL_PREFIX = "orchtest"
SERVICE_MARKERS = {"docker_client": ("docker",), "redis_url": ("redis",)}
"""Shared fixtures whose use means the service."""
STARTS = {
    "RedisServer(": ("redis",),
    "TlsAclRedis(": ("redis",),
    "Cluster(": ("redis", "docker", "cluster"),
    "start_worker(": ("redis", "docker", "cluster"),
}
"""Code that starts a service of its own: a test whose body or fixtures (at any depth) hold it needs the service."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the real services it uses, read from its fixtures and from the code it and they run:
    ``-m "not redis"`` selects only tests that need no Redis (no cluster either), ``-m "not docker"`` none that
    needs an engine; CI runs all."""
    for item in items:
        wanted: set[str] = set()
        for fixture, markers in SERVICE_MARKERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                wanted.update(markers)
        code = _code_run_by(item)
        for start, markers in STARTS.items():
            if start in code:
                wanted.update(markers)
        for marker in sorted(wanted):
            item.add_marker(marker)


def _code_run_by(item: pytest.Item) -> str:
    functions = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        functions += [d.func for d in defs]
    return "".join(_source(f) for f in functions if f is not None)


@functools.cache
def _source(function: Any) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


@pytest.fixture(autouse=True)
def _scripted_models_use_every_step(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Every in-memory scripted model made in a test must have been asked for all of its scripted responses.

    A test that leaves responses unused on purpose says so with ``@pytest.mark.unused_script_steps``.
    """
    made: list[ScriptedModel] = []
    original = ScriptedModel.__init__

    def recording_init(self: ScriptedModel, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(ScriptedModel, "__init__", recording_init)
    yield
    if request.node.get_closest_marker("unused_script_steps") is None:
        for model in made:
            model.assert_all_used()


@pytest.fixture(autouse=True)
def _no_real_model(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Any model call that is not pointed at our scripted server goes to a closed loopback port and fails.

    The cache (read cache, memo) of every test is private, so no test warms another and none touches ~/.cache.
    """
    monkeypatch.setenv("ORCH_CACHE_DIR", str(tmp_path_factory.mktemp("orch-cache")))
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-sent-anywhere")
    monkeypatch.delenv("ORCH_CONFIG", raising=False)
    monkeypatch.delenv("ORCH_SCRIPTED_TRACE", raising=False)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[object]:
    import docker

    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as e:  # noqa: BLE001 - any failure means the engine is not usable
        pytest.fail(f"a running Docker engine is required (run `bash ops/setup.sh`): {e}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def redis_url() -> str:
    import redis

    url = os.environ.get("ORCH_REDIS_URL", "redis://localhost:6379/0")
    try:
        redis.Redis.from_url(url, socket_connect_timeout=3).ping()
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"a running Redis server is required at {url} (run `bash ops/setup.sh`): {e}")
    return url


@pytest.fixture(scope="session")
def sandbox_image(docker_client) -> str:
    """The sandbox image built by `bash ops/setup.sh` (`python -m orchestrator sandbox build-image`)."""
    import docker.errors

    from orchestrator.config import DEFAULT_SANDBOX_IMAGE

    name = os.environ.get("ORCH_SANDBOX__IMAGE", DEFAULT_SANDBOX_IMAGE)
    try:
        docker_client.images.get(name)
    except docker.errors.ImageNotFound:
        pytest.fail(f"sandbox image {name} is missing: run `python -m orchestrator sandbox build-image`")
    return name


@pytest.fixture(scope="session")
def browser_image(docker_client, sandbox_image) -> str:
    """The browser image (the sandbox image plus Playwright and Chromium), built by `sandbox build-image` too."""
    import docker.errors

    from orchestrator.config import DEFAULT_BROWSER_IMAGE

    name = os.environ.get("ORCH_SANDBOX__BROWSER_IMAGE", DEFAULT_BROWSER_IMAGE)
    try:
        docker_client.images.get(name)
    except docker.errors.ImageNotFound:
        pytest.fail(f"browser image {name} is missing: run `python -m orchestrator sandbox build-image`")
    return name


@pytest.fixture
def cli_env(tmp_path: Path, sandbox_image: str) -> dict[str, str]:
    """Environment for running the CLI as a subprocess: its own cache, a scripted-model trace, labelled containers."""
    env = dict(os.environ)
    env.update(
        ORCH_CACHE_DIR=str(tmp_path / "cache"),
        ORCH_SCRIPTED_TRACE=str(tmp_path / "trace.jsonl"),
        ORCH_SANDBOX__LABEL_PREFIX=TEST_LABEL_PREFIX,
    )
    return env
