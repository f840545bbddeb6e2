"""The bundled skills' scripts run in the real sandbox: one runner for the session, one job per test module."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bundled_helpers import SKILLS

from orchestrator.config import SandboxSettings
from orchestrator.sandbox.docker import SandboxRunner

TEST_LABEL_PREFIX = "orchtest"  # as in tests/conftest.py


@dataclass
class Run:
    """One script run: its exit code and the JSON it printed."""

    exit_code: int
    out: dict[str, Any]
    stderr: str


@dataclass
class SkillSandbox:
    job: Any  # the runner's job: run_script, read_file, close
    inputs: Path

    def run(self, script: str, args: dict[str, Any] | list[Any]) -> Run:
        result = self.job.run_script(script, args, timeout_s=60)
        assert not result.timed_out and not result.oom_killed, result
        out = result.stdout_json
        assert isinstance(out, dict), f"{script} printed no JSON object: {result}"
        return Run(result.exit_code, out, str(result.stderr_summary))

    def file(self, rel: str, dest: Path) -> Path:
        """Copy ``build/rel`` out of the sandbox to ``dest``."""
        dest.write_bytes(self.job.read_file(rel))
        return dest


@pytest.fixture(scope="session")
def bundled_runner(sandbox_image: str, docker_client, tmp_path_factory) -> Iterator[SandboxRunner]:
    settings = SandboxSettings(image=sandbox_image, label_prefix=TEST_LABEL_PREFIX, memory_mb=512, cpus=1.0)
    runner = SandboxRunner(settings, docker_client, work_dir=tmp_path_factory.mktemp("bundled-work"))
    yield runner
    runner.close()


@pytest.fixture(scope="module")
def skill_sandbox(
    bundled_runner: SandboxRunner, tmp_path_factory
) -> Iterator[Callable[[str, dict[str, str | bytes]], SkillSandbox]]:
    """skill_sandbox("data/csv-summary", {"sales.csv": "..."}) opens a job on the bundled skill with those inputs."""
    jobs: list[Any] = []

    def open_(skill_id: str, inputs: dict[str, str | bytes]) -> SkillSandbox:
        folder = tmp_path_factory.mktemp("inputs")
        folder.chmod(0o755)  # the sandbox user (not root) reads the inputs
        for name, content in inputs.items():
            path = folder / name
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
            path.chmod(0o644)
        job = bundled_runner.open_job(f"bundled-{len(jobs)}", SKILLS / skill_id, inputs_dir=folder)
        jobs.append(job)
        return SkillSandbox(job, folder)

    yield open_
    for job in jobs:
        job.close()


BRAND = {
    "name": "Acme",
    "colors": {"primary": "#1F3A5F", "accent": "#F28C28", "background": "#FFFFFF", "text": "#1A1A1A"},
    "fonts": {"heading": "Lato", "body": "Source Sans 3"},
    "sizes_pt": {"title": 36, "body": 20, "min": 14},
    "rules": [],
}


@pytest.fixture(scope="session")
def brand_json() -> str:
    return json.dumps(BRAND)


def copy_scenario_data(name: str, dest: Path) -> Path:
    from bundled_helpers import SCENARIOS

    return Path(shutil.copyfile(SCENARIOS / "data" / name, dest / name))
