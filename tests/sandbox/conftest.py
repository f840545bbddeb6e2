"""Sandbox fixtures: a real engine, a test label prefix, small limits, and a sweep that fails on leftovers."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sandbox_helpers import TEST_LABEL_PREFIX, leftovers

from orchestrator.config import SandboxSettings
from orchestrator.sandbox.docker import SandboxJob, SandboxRunner

MakeSkill = Callable[..., Path]


@pytest.fixture(autouse=True)
def _sweep(docker_client) -> Iterator[None]:
    """After every test nothing of ours may be left: a leak fails the test (and is cleaned for the next one)."""
    yield
    left = leftovers(docker_client)
    if left:
        for item in left:
            kind, name = item.split(" ", 1)
            if kind == "container":
                docker_client.api.remove_container(name.lstrip("/"), force=True)
        for item in left:
            kind, name = item.split(" ", 1)
            if kind == "volume":
                docker_client.api.remove_volume(name, force=True)
            elif kind == "network":
                docker_client.api.remove_network(name)
        pytest.fail(f"sandbox resources left behind: {left}")


@pytest.fixture(scope="session")
def sandbox_settings(sandbox_image: str) -> SandboxSettings:
    return SandboxSettings(
        image=sandbox_image,
        label_prefix=TEST_LABEL_PREFIX,
        memory_mb=128,
        cpus=1.0,
        pids_limit=64,
        tmp_size_mb=8,
    )


@pytest.fixture(scope="session")
def runner(sandbox_settings: SandboxSettings, docker_client, tmp_path_factory) -> Iterator[SandboxRunner]:
    runner = SandboxRunner(sandbox_settings, docker_client, work_dir=tmp_path_factory.mktemp("sandbox-work"))
    yield runner
    runner.close()


@pytest.fixture
def make_skill(tmp_path: Path) -> MakeSkill:
    """Write a skill folder from {relative path: source}; sources are dedented."""

    def make(files: dict[str, str], name: str = "skill") -> Path:
        root = tmp_path / name
        root.mkdir(parents=True, exist_ok=True)
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip())
        return root

    return make


@pytest.fixture
def open_job(runner: SandboxRunner) -> Iterator[Callable[..., SandboxJob]]:
    jobs: list[SandboxJob] = []

    def open_(skill_root: Path, **kwargs) -> SandboxJob:
        job = runner.open_job(f"test-{len(jobs)}", skill_root, **kwargs)
        jobs.append(job)
        return job

    yield open_
    for job in jobs:
        job.close()
