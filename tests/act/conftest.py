from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.config import Settings, load_settings

SkillWriter = Callable[..., Path]


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    root.mkdir()
    return root


@pytest.fixture
def write_skill(skills_root: Path) -> SkillWriter:
    """write_skill("notes", body, files={"scripts/x.py": "..."}) creates skills/notes/SKILL.md and the files."""

    def write(
        skill_id: str,
        body: str,
        *,
        description: str = "A test skill.",
        files: dict[str, str] | None = None,
        frontmatter: str = "",
    ) -> Path:
        folder = skills_root / skill_id
        folder.mkdir(parents=True, exist_ok=True)
        name = skill_id.rsplit("/", 1)[-1]
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {description}\n{frontmatter}---\n\n{textwrap.dedent(body)}",
            encoding="utf-8",
        )
        for rel, text in (files or {}).items():
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(textwrap.dedent(text), encoding="utf-8")
        return folder

    return write


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(cache_dir=tmp_path / "cache", sandbox={"label_prefix": "orchtest"})


@pytest.fixture
def sandbox_runner(docker_client, sandbox_image, settings):  # noqa: ANN001
    from orchestrator.sandbox.docker import SandboxRunner

    runner = SandboxRunner(settings.sandbox, client=docker_client)
    yield runner
    leftovers = docker_client.containers.list(all=True, filters={"label": "orchtest"})
    leftovers += docker_client.containers.list(all=True, filters={"label": "orchestrator.prefix=orchtest"})
    assert not leftovers, f"containers left behind: {[c.name for c in leftovers]}"
