"""The synthetic skills library of these specifications (our own skills, see corpus.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).parent
CORPUS = yaml.safe_load((HERE / "corpus.yaml").read_text(encoding="utf-8"))
GOALS = HERE / "goals.jsonl"


def write_skill(root: Path, skill_id: str, *, name: str, description: str, body: str, disable: bool = False) -> Path:
    folder = root / skill_id
    folder.mkdir(parents=True, exist_ok=True)
    front = {"name": name, "description": description}
    if disable:
        front["disable-model-invocation"] = True
    text = f"---\n{yaml.safe_dump(front, sort_keys=False)}---\n\n# {name}\n\n{body}\n"
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder


def write_corpus(root: Path) -> Path:
    for s in CORPUS:
        write_skill(
            root,
            s["id"],
            name=s.get("name", s["id"].rsplit("/", 1)[-1]),
            description=s["description"],
            body=s["body"],
            disable=bool(s.get("disable")),
        )
    return root


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "skills")
