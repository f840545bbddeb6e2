"""The documentation site builds offline with ``mkdocs build --strict``: a broken link, a missing anchor or a page
left out of the navigation fails the build, and so this test. README.md (not part of the site) links into it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=project, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # Material's banner about its successor
    )


def _copy_of_the_docs(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(REPO / "docs", project / "docs")
    shutil.copy(REPO / "mkdocs.yml", project / "mkdocs.yml")
    shutil.copytree(REPO / "ops" / "docs", project / "ops" / "docs")
    return project


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = _build(REPO, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "operations" / "who-is-trusted.html").is_file()
    # The reference pages made from the code at build time (ops/docs/hooks.py):
    cli = (tmp_path / "site" / "reference" / "cli.html").read_text()
    assert "python -m orchestrator submit" in cli and "Exit codes" in cli
    assert "ORCH_WORKER__HEARTBEAT_S" in (tmp_path / "site" / "reference" / "all-settings.html").read_text()
    assert "evidence_path" in (tmp_path / "site" / "reference" / "schemas.html").read_text()


def test_a_broken_link_a_broken_anchor_and_a_page_left_out_of_the_nav_each_fail_the_build(tmp_path: Path) -> None:
    project = _copy_of_the_docs(tmp_path)
    page = project / "docs" / "concepts" / "results.md"
    page.write_text(
        page.read_text()
        + "\nSee [the missing page](no-such-page.md) and [compose](../operations/compose.md#no-such-section).\n"
    )
    (project / "docs" / "orphan.md").write_text("# An orphan\n")
    done = _build(project, tmp_path / "site")
    assert done.returncode != 0
    # --strict reports every problem before it aborts: each one is named.
    for problem in ("no-such-page.md", "no-such-section", "orphan.md"):
        assert problem in done.stderr, done.stderr[-4000:]


def test_every_relative_link_of_the_readme_names_a_file_and_its_heading() -> None:
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    local = [link for link in links if "://" not in link]
    assert local, "README.md should link into docs/"
    for link in local:
        path, _, anchor = link.partition("#")
        target = REPO / path
        assert target.is_file(), f"README.md links to {link}, which does not exist"
        if anchor:
            headings = {_slug(h) for h in re.findall(r"^#+ (.+)$", target.read_text(), flags=re.M)}
            assert anchor in headings, f"README.md links to {link}: no such heading in {path}"


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension gives a heading (for the plain headings used here)."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)
