"""L3 access (read_text, resolve, glob) and the read cache: confined, hashed, never blocking."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from orchestrator.errors import PathEscapeError, SkillError
from orchestrator.skills import ReadCache, SkillLibrary
from orchestrator.skills.confine import Verdict, confine, locate
from orchestrator.skills.read_cache import NotARegularFile


@pytest.fixture
def library(make_skill, skills_root, tmp_path):
    (tmp_path / "secret.txt").write_text("top secret")
    folder = make_skill(
        "s",
        files={
            "docs/guide.md": "# Guide\n",
            "data/big.txt": "x" * 5000,
            "img.png": b"\x89PNG\r\n\x1a\n\x00\x00",
        },
    )
    (folder / "out.txt").symlink_to(tmp_path / "secret.txt")
    (folder / "outdir").symlink_to(tmp_path, target_is_directory=True)
    return SkillLibrary(skills_root)


def test_read_text_returns_the_text_and_its_sha256(library, skills_root):
    text, sha = library.read_text("s", "docs/guide.md")
    assert text == "# Guide\n"
    assert sha == hashlib.sha256(b"# Guide\n").hexdigest()
    assert library.read_text("s", "./docs/../docs/guide.md") == (text, sha)


@pytest.mark.parametrize(
    "path",
    ["../secret.txt", "../../secret.txt", "/etc/passwd", "~/.bashrc", "out.txt", "outdir/secret.txt", "a\0b"],
)
def test_paths_leaving_the_skill_are_refused_before_anything_is_read(library, path):
    with pytest.raises(PathEscapeError) as caught:
        library.read_text("s", path)
    assert caught.value.where == "skill:s" and caught.value.data["path"] == path
    with pytest.raises(PathEscapeError):
        library.resolve("s", path)


def test_resolve_gives_the_confined_absolute_path(library, skills_root):
    assert library.resolve("s", "docs/guide.md") == (skills_root / "s" / "docs" / "guide.md").resolve()
    assert library.resolve("s", "not/yet/there.txt").is_relative_to(skills_root.resolve() / "s")


def test_missing_folder_and_binary_files_are_skill_errors(library):
    with pytest.raises(SkillError, match="does not exist"):
        library.read_text("s", "nope.md")
    with pytest.raises(SkillError, match="is a folder"):
        library.read_text("s", "docs")
    with pytest.raises(SkillError, match="binary") as caught:
        library.read_text("s", "img.png")
    assert caught.value.data["kind"] == "binary"


def test_a_large_file_is_cut_with_a_visible_marker(library):
    text, _ = library.read_text("s", "data/big.txt", max_bytes=1000)
    assert text.startswith("x" * 1000) and "[... read_text cut at 1000 of 5000 bytes ...]" in text


def test_a_fifo_is_refused_at_once_instead_of_blocking(library, skills_root):
    os.mkfifo(skills_root / "s" / "pipe.txt")
    started = time.monotonic()
    with pytest.raises(SkillError):
        library.read_text("s", "pipe.txt")
    assert time.monotonic() - started < 2


def test_glob_lists_confined_files_sorted_and_skips_symlinks_out(library):
    assert library.glob("s", "**/*") == ["SKILL.md", "data/big.txt", "docs/guide.md", "img.png"]
    assert library.glob("s", "docs/*.md") == ["docs/guide.md"]
    assert library.glob("s", "outdir/*") == []
    assert library.glob("s", "") == library.glob("s", "**/*")


@pytest.mark.parametrize("pattern", ["../*", "/etc/*", "docs/../../*"])
def test_glob_patterns_leaving_the_skill_are_refused(library, pattern):
    with pytest.raises(PathEscapeError):
        library.glob("s", pattern)


def test_locate_classifies_without_opening(tmp_path):
    root = tmp_path.resolve()
    (root / "a").mkdir()
    (root / "link").symlink_to("/etc", target_is_directory=True)
    assert locate(root, "a").verdict is Verdict.INSIDE and locate(root, "a").is_dir
    assert locate(root, "a/../a/x.md").rel == "a/x.md"
    assert locate(root, "../x").verdict is Verdict.ESCAPE
    assert locate(root, "C:\\x").verdict is Verdict.ESCAPE
    assert locate(root, "link/passwd").verdict is Verdict.SYMLINK_ESCAPE
    assert locate(root, "").verdict is Verdict.INVALID
    with pytest.raises(PathEscapeError):
        confine(root, "link/passwd")


def test_the_cache_recognises_unchanged_content_per_path(tmp_path):
    cache = ReadCache()
    path = tmp_path / "f.txt"
    path.write_text("one")
    first = cache.read(path)
    again = cache.read(path)
    assert (first.changed, again.changed) == (True, False)
    assert first.sha256 == again.sha256 == hashlib.sha256(b"one").hexdigest() and again.text == "one"
    path.write_text("two")
    assert cache.read(path).changed is True
    path.write_text("one")
    assert cache.read(path).changed is False  # content seen before for this path
    twin = tmp_path / "twin.txt"
    twin.write_text("one")
    assert cache.read(twin).changed is True


def test_scopes_are_independent(tmp_path):
    cache = ReadCache()
    path = tmp_path / "f.txt"
    path.write_text("x")
    assert cache.read(path, scope="loader").changed
    assert cache.read(path).changed
    assert not cache.read(path, scope="loader").changed


def test_a_persisted_cache_is_shared_across_instances(tmp_path):
    store = tmp_path / "store"
    path = tmp_path / "f.txt"
    path.write_text("persist me")
    assert ReadCache(store).read(path).changed is True
    fresh = ReadCache(store)
    assert fresh.read(path).changed is False
    assert fresh.seen(path, hashlib.sha256(b"persist me").hexdigest())
    assert ReadCache().read(path).changed is True  # an in-memory cache knows nothing of the store


def test_the_cache_never_follows_a_final_symlink_and_refuses_non_files(tmp_path):
    cache = ReadCache()
    target = tmp_path / "t.txt"
    target.write_text("t")
    (tmp_path / "link.txt").symlink_to(target)
    with pytest.raises(OSError):
        cache.read(tmp_path / "link.txt")
    with pytest.raises(NotARegularFile):
        cache.read(tmp_path)
    read = cache.read(target, max_bytes=0)
    assert (read.data, read.size, read.truncated) == (b"", 1, True)
