"""Fixture trees for the skills library are written by each test into tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.skills import Skill

SkillMaker = Callable[..., Path]


def skill_md(
    name: str | None,
    description: str | None = "Does a thing. Use it when a thing is needed.",
    body: str = "# Body\n",
    extra: str = "",
) -> str:
    lines = ["---"]
    if name is not None:
        lines.append(f"name: {name}")
    if description is not None:
        lines.append(f"description: {description}")
    if extra:
        lines.append(extra.rstrip("\n"))
    lines.append("---")
    return "\n".join(lines) + "\n\n" + body


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "library"
    root.mkdir()
    return root


@pytest.fixture
def make_skill(skills_root: Path) -> SkillMaker:
    """make_skill("a/b", body="...", files={"x.md": "..."}) writes <root>/a/b/SKILL.md (name: folder name)."""

    def make(
        skill_id: str,
        *,
        body: str = "# Body\n",
        files: dict[str, str | bytes] | None = None,
        text: str | bytes | None = None,
        name: str | None = "",
        description: str | None = None,
        extra: str = "",
    ) -> Path:
        folder = skills_root / skill_id if skill_id != "." else skills_root
        folder.mkdir(parents=True, exist_ok=True)
        if text is None:
            text = skill_md(
                folder.name if name == "" else name,
                description if description is not None else f"Skill {folder.name}. Use it in tests.",
                body,
                extra,
            )
        target = folder / "SKILL.md"
        target.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        for rel, content in (files or {}).items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        return folder

    return make


def assert_references_truthful(skill: Skill) -> None:
    """The invariant behind every reference: `exists` is exactly what the file system inside the root says."""
    root = skill.root.resolve()
    for ref in skill.references:
        if ref.path is None:
            assert ref.exists is False, ref
            continue
        assert not ref.path.startswith("/") and ".." not in ref.path.split("/"), ref
        target = (root / ref.path).resolve()
        inside = target.is_relative_to(root)
        assert ref.exists == (inside and target.exists()), ref


@pytest.fixture
def truthful() -> Callable[[Skill], None]:
    return assert_references_truthful
