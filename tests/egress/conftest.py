"""Egress fixtures: the local outside world (a test CA and an upstream container) shared by a module's tests, and
a sandbox runner whose label prefix is this area's own, checked for leftovers when the module ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from egress_world import (
    EGRESS_PREFIX,
    GRANTED,
    SECRET_NAME,
    SECRET_VALUE,
    Upstream,
    egress_image,
    egress_section,
    leftovers,
    running_upstream,
)

from orchestrator.config import SandboxSettings, load_settings
from orchestrator.sandbox.docker import SandboxRunner
from orchestrator.sandbox.egress import EgressPlan, resolve_egress


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


@pytest.fixture(scope="module")
def plan(upstream: Upstream, docker_client, tmp_path_factory) -> EgressPlan:
    """What a skill granted ``GRANTED:8443`` and ``:8080`` with the secret as a bearer token may reach."""
    egress_image(docker_client)
    library = tmp_path_factory.mktemp("library")
    settings = load_settings(skills_dir=library, egress=egress_section(upstream, library="default"))
    found = resolve_egress(
        settings,
        library_root=library,
        skill_id="caller",
        skill_name="caller",
        network=[f"{GRANTED}:8443", f"{GRANTED}:8080"],
        secrets=[SECRET_NAME],
        environ={f"ORCH_SECRET_{SECRET_NAME}": SECRET_VALUE},
    )
    assert isinstance(found, EgressPlan), found
    return found
