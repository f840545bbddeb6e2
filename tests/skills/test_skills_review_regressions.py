"""Behaviours found by an outside review: no skill disappears, and no input makes reference parsing crawl."""

from __future__ import annotations

import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from orchestrator.skills import SkillLibrary


def _skill(folder: Path, name: str) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A skill.\n---\nBody.\n")


def test_folders_whose_ids_read_alike_are_all_listed(skills_root: Path):
    nfc = unicodedata.normalize("NFC", "café")
    nfd = unicodedata.normalize("NFD", "café")
    _skill(skills_root / nfc, "cafe")
    _skill(skills_root / nfd, "cafe")
    raw = os.fsencode(skills_root)
    for name in (b"bad-\xff", b"bad-\xfe"):
        folder = os.fsdecode(raw + b"/" + name)
        _skill(Path(folder), "bad")
    library = SkillLibrary(skills_root)
    listed = library.list()
    assert len(listed) == 4
    clashes = [s for s in listed if any(p.code == "duplicate_id" for p in s.problems)]
    assert len(clashes) == 2 and len({s.id for s in listed}) == 4
    for summary in listed:
        assert library.get(summary.id).id == summary.id


def test_an_unreadable_folder_is_reported_on_stderr_not_silently_skipped(skills_root: Path):
    _skill(skills_root / "fine", "fine")
    locked = skills_root / "locked"
    _skill(locked / "inner", "inner")
    locked.chmod(0o000)
    try:
        # setpriv drops the capabilities that let root read anything, so the permission check is real.
        proc = subprocess.run(
            ["setpriv", "--inh-caps=-all", "--bounding-set=-all", sys.executable, "-m", "orchestrator", "skills",
             "list", "--root", str(skills_root), "--json"],
            capture_output=True, text=True, timeout=120,
        )
    finally:
        locked.chmod(0o755)
    assert proc.returncode == 0, proc.stderr
    assert "folder_unreadable" in proc.stderr and "locked" in proc.stderr
    assert '"id": "fine"' in proc.stdout


@pytest.mark.timeout(60)  # a hang guard: before the fix one 200 KB word took about 30 s, 1.5 MB never finished
@pytest.mark.parametrize("body", ["a" * 1_500_000, "a." * 500_000, "http" * 300_000], ids=["word", "dots", "http"])
def test_one_huge_word_does_not_make_reference_parsing_quadratic(make_skill, skills_root: Path, body: str):
    make_skill("long", body=body + "\n")
    skill = SkillLibrary(skills_root).get("long")
    assert skill.body_tokens > 100_000


def test_a_link_with_a_trailing_slash_to_a_file_does_not_exist(make_skill, skills_root: Path):
    make_skill("slash", body="See [the guide](docs/guide.md/) and [the folder](docs/).\n",
               files={"docs/guide.md": "# Guide\n"})
    refs = {r.ref: r.exists for r in SkillLibrary(skills_root).get("slash").references}
    assert refs["docs/guide.md/"] is False and refs["docs/"] is True
