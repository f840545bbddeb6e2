"""Egress fixtures: the local outside world (a test CA and an upstream container) shared by a module's tests, and
a sandbox runner whose label prefix is this area's own, checked for leftovers when the module ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from egress_world import EGRESS_PREFIX, Upstream, leftovers, running_upstream

from orchestrator.config import SandboxSettings
from orchestrator.sandbox.docker import SandboxRunner


@pytest.fixture(scope="module")
def upstream(docker_client, tmp_path_factory) -> Iterator[Upstream]:
    with running_upstream(docker_client, tmp_path_factory.mktemp("upstream")) as up:
        yield up


@pytest.fixture(scope="module")
def egress_runner(sandbox_image, docker_client, tmp_path_factory) -> Iterator[SandboxRunner]:
    settings = SandboxSettings(image=sandbox_image, label_prefix=EGRESS_PREFIX, memory_mb=128, tmp_size_mb=8)
    runner = SandboxRunner(settings, docker_client, work_dir=tmp_path_factory.mktemp("egress-work"))
    yield runner
    runner.close()
    assert leftovers(docker_client, EGRESS_PREFIX) == []
