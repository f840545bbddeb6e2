"""Property: no frontmatter and no body crashes the parser, and references never leave the skill folder."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.skills import SkillLibrary
from orchestrator.skills.frontmatter import parse_skill_md
from orchestrator.skills.lenient import printable
from orchestrator.skills.parsed import PROBLEM_CODES

yaml_bits = st.sampled_from(
    [
        "name: demo",
        "name: ",
        "name: 12",
        "name: [a",
        "description: d",
        "description: >\n  folded",
        "metadata:",
        "  k: v",
        "- item",
        "&a x",
        "*a",
        "!!binary aGk=",
        "!!python/object:os.system x",
        "key: 'unterminated",
        ": bare",
        "? complex",
        "allowed-tools: [a, b]",
        "input-schema: {type: 3}",
        "operations: 7",
        "\t",
        "---",
        "...",
        'name: "é\\x00"',
        "description: <b>",
        "license: {a: [1, {b: 2}]}",
    ]
)
markdown_bits = st.sampled_from(
    [
        "[a](a.md)",
        "[b](../b.md)",
        "[c](/etc/passwd)",
        "![i](img.png)",
        "`scripts/x.py`",
        "```\npath/to/y.sh\n```",
        "[r]: ref.md",
        "**/*.md",
        "<a href='../../z'>",
        "see ./x.md",
        "[%2e%2e/up](%2e%2e/up.md)",
        "http://x/y.md",
        "[loop](SKILL.md)",
        "[q](a.md?x#y)",
        "\u202e",
        "\ufeff",
        "\r\n",
    ]
)
texts = st.lists(st.one_of(yaml_bits, st.text(max_size=40)), max_size=8).map("\n".join)
bodies = st.lists(st.one_of(markdown_bits, st.text(max_size=60)), max_size=10).map(" \n".join)


def check(parsed) -> None:
    assert all(p.code in PROBLEM_CODES for p in parsed.problems)
    if "description_from_body" in {p.code for p in parsed.problems}:
        assert 0 < len(parsed.description) <= 1024 and printable(parsed.description)
    assert isinstance(parsed.body, str)
    if parsed.name is not None:
        assert isinstance(parsed.name, str)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_no_bytes_crash_the_parser(data: bytes) -> None:
    check(parse_skill_md(data, folder_name="demo"))


@settings(max_examples=200, deadline=None)
@given(frontmatter=texts, body=bodies, crlf=st.booleans(), bom=st.booleans())
def test_no_frontmatter_or_body_crashes_the_parser(
    frontmatter: str, body: str, crlf: bool, bom: bool
) -> None:
    text = f"---\n{frontmatter}\n---\n{body}"
    if crlf:
        text = text.replace("\n", "\r\n")
    data = text.encode("utf-8", errors="surrogatepass")
    check(parse_skill_md((b"\xef\xbb\xbf" if bom else b"") + data, folder_name="demo"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frontmatter=texts, body=bodies)
def test_no_skill_crashes_the_library_and_references_stay_inside(frontmatter: str, body: str) -> None:
    base = Path(tempfile.mkdtemp(prefix="orchtest-prop-"))
    try:
        (base / "outside.md").write_text("[x](inside.md)")
        folder = base / "lib" / "demo"
        folder.mkdir(parents=True)
        (folder / "a.md").write_text(body + "\n[back](SKILL.md)")
        (folder / "up.md").symlink_to(base / "outside.md")
        (folder / "SKILL.md").write_bytes(
            f"---\n{frontmatter}\n---\n{body}".encode("utf-8", errors="surrogatepass")
        )
        library = SkillLibrary(base / "lib")
        (summary,) = library.list()
        skill = library.get("demo")
        library.l2("demo")
        assert summary.id == skill.id == "demo"
        root = folder.resolve()
        for ref in skill.references:
            assert ref.source in ("SKILL.md", "a.md")
            if ref.path is None:
                assert not ref.exists
            else:
                target = (root / ref.path).resolve()
                assert ref.exists == (target.is_relative_to(root) and target.exists())
    finally:
        shutil.rmtree(base, ignore_errors=True)
