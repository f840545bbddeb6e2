"""L3 references: links, then explicit paths, then globs; `exists` exactly right; nothing outside the root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.skills import SkillLibrary
from orchestrator.skills.loader import RUNTIME_WORK_DIRS
from orchestrator.skills.refs import extract, glob_match


def refs(skill) -> list[tuple]:
    return [(r.ref, r.path, r.exists, r.via, r.source) for r in skill.references]


def problem_codes(skill) -> list[str]:
    return [p.code for p in skill.problems]


def load(make_skill, skills_root, body: str, files: dict | None = None, skill_id: str = "s"):
    make_skill(skill_id, body=body, files=files or {})
    return SkillLibrary(skills_root).get(skill_id)


def test_links_come_first_then_explicit_paths_then_globs(make_skill, skills_root, truthful):
    body = (
        "Run `scripts/fill.py` on the templates in `templates/*.html`.\n\n"
        "Read [the forms guide](reference/forms.md) first.\n"
    )
    files = {
        "scripts/fill.py": "x",
        "templates/a.html": "a",
        "templates/b.html": "b",
        "reference/forms.md": "f",
    }
    skill = load(make_skill, skills_root, body, files)
    assert refs(skill) == [
        ("reference/forms.md", "reference/forms.md", True, "link", "SKILL.md"),
        ("scripts/fill.py", "scripts/fill.py", True, "path", "SKILL.md"),
        ("templates/*.html", "templates/a.html", True, "glob", "SKILL.md"),
        ("templates/*.html", "templates/b.html", True, "glob", "SKILL.md"),
    ]
    assert skill.problems == []
    truthful(skill)


def test_inline_reference_style_and_image_links_and_html_attributes_are_links(
    make_skill, skills_root, truthful
):
    body = (
        'See [guide][g] and [ooxml.md](ooxml.md), ![logo](assets/logo.png "Logo").\n\n'
        '<img src="assets/icon.svg"> <a href="html2pptx.md">x</a>\n\n'
        "[g]: docs/guide.md\n[unused]: docs/unused.md\n"
    )
    files = {"docs/guide.md": "", "ooxml.md": "", "assets/logo.png": b"\x89PNG", "assets/icon.svg": "<svg/>"}
    skill = load(make_skill, skills_root, body, files)
    assert [(r.ref, r.exists, r.via) for r in skill.references] == [
        ("docs/guide.md", True, "link"),
        ("ooxml.md", True, "link"),
        ("assets/logo.png", True, "link"),
        ("assets/icon.svg", True, "link"),
        ("html2pptx.md", False, "link"),
        ("docs/unused.md", False, "link"),
    ]
    truthful(skill)


def test_urls_mailto_and_pure_anchors_are_not_references(make_skill, skills_root):
    body = (
        "[a](https://example.com/x.md) [b](mailto:someone@example.com) [c](#usage)\n"
        "[d](//cdn.example.com/y.js)\n"
        "[e](ftp://host/z.txt) <https://example.org/page.html> plain https://example.net/doc.md too.\n"
    )
    skill = load(make_skill, skills_root, body)
    assert skill.references == [] and skill.problems == []


def test_fragments_and_queries_are_dropped_and_percent_escapes_decoded(make_skill, skills_root, truthful):
    body = "[a](my%20notes.md#part-2) [b](<other file.md?raw=1>) [c](caf%C3%A9.md) [d](no%23te.md)\n"
    files = {"my notes.md": "", "other file.md": "", "café.md": "", "no#te.md": ""}
    skill = load(make_skill, skills_root, body, files)
    assert [(r.ref, r.path, r.exists) for r in skill.references] == [
        ("my notes.md#part-2", "my notes.md", True),
        ("other file.md?raw=1", "other file.md", True),
        ("café.md", "café.md", True),
        ("no#te.md", "no#te.md", True),
    ]
    truthful(skill)


def test_explicit_relative_paths_in_code_spans_fences_and_prose_are_references(
    make_skill, skills_root, truthful
):
    body = (
        "Unpack with `python ooxml/scripts/unpack.py <file> <dir>`, then see ./ooxml.md for details.\n\n"
        "```bash\npython scripts/thumbnail.py deck.pptx workspace/thumbs --cols 4\n"
        "node scripts/html2pptx.js\n```\n\n"
        "The policy lives in reference/policy.md, and data in data/table.csv.\n"
    )
    files = {
        "ooxml/scripts/unpack.py": "",
        "ooxml.md": "",
        "scripts/thumbnail.py": "",
        "reference/policy.md": "",
    }
    skill = load(make_skill, skills_root, body, files)
    assert [(r.ref, r.path, r.exists, r.via) for r in skill.references] == [
        ("ooxml/scripts/unpack.py", "ooxml/scripts/unpack.py", True, "path"),
        ("./ooxml.md", "ooxml.md", True, "path"),
        ("scripts/thumbnail.py", "scripts/thumbnail.py", True, "path"),
        ("scripts/html2pptx.js", "scripts/html2pptx.js", False, "path"),
        ("reference/policy.md", "reference/policy.md", True, "path"),
        ("data/table.csv", "data/table.csv", False, "path"),
    ]
    assert [(p.code, p.line) for p in skill.problems] == [
        ("reference_missing", 10),
        ("reference_missing", 13),
    ]
    truthful(skill)


@pytest.mark.parametrize(
    "text",
    [
        "Works e.g. for slides and/or docs, i.e. everything.",
        "Use os.path.join and json.loads; call pptx.writeFile() later.",
        "Install @scope/sdk or see docs.python.org/3/library/json.html and www.example.com/a.md.",
        "Edit ppt/slides/slide{N}.xml and {{ template }}/x.md for 16:9 decks at 40%/60% split.",
        "Ratios 30/70 or 25/75; input/output; client/server; TCP/IP.",
        "Write presentation.pptx and output.pdf to the outputs folder.",
        "`unpacked/` and `my_templates/` are created by you.",
        "Files like package.json or tsconfig.json belong to the project.",
    ],
)
def test_words_that_only_look_like_paths_are_not_references(make_skill, skills_root, text):
    skill = load(make_skill, skills_root, text + "\n")
    assert skill.references == [], refs(skill)
    assert skill.problems == []


def test_a_bare_file_name_counts_only_when_it_exists(make_skill, skills_root, truthful):
    body = "Read `editing.md`, then `thumbnail.py`. The skill has a `scripts/` folder.\n"
    skill = load(make_skill, skills_root, body, {"editing.md": "", "scripts/thumbnail.py": ""})
    assert [(r.ref, r.path, r.exists) for r in skill.references] == [
        ("editing.md", "editing.md", True),
        ("scripts/", "scripts", True),
    ]
    truthful(skill)


def test_a_folder_reference_exists_when_the_folder_is_inside_the_root(make_skill, skills_root, truthful):
    skill = load(
        make_skill, skills_root, "[templates](templates/) and [gone](gone/)\n", {"templates/a.txt": ""}
    )
    assert [(r.path, r.exists) for r in skill.references] == [("templates", True), ("gone", False)]
    truthful(skill)


def test_globs_expand_inside_the_skill_only_and_an_empty_glob_is_reported(make_skill, skills_root, truthful):
    body = "All docs: `**/*.md`. Styles: styles/*.css. Top level: `*.txt`.\n"
    files = {"a.md": "", "deep/er/b.md": "", ".hidden/c.md": "", "notes.txt": "", "deep/notes.txt": ""}
    skill = load(make_skill, skills_root, body, files)
    assert [(r.ref, r.path, r.exists, r.via) for r in skill.references] == [
        ("**/*.md", "a.md", True, "glob"),
        ("**/*.md", "deep/er/b.md", True, "glob"),
        ("styles/*.css", None, False, "glob"),
        ("*.txt", "notes.txt", True, "glob"),
    ]
    assert problem_codes(skill) == ["glob_no_match"]
    truthful(skill)


def test_glob_matching_rules():
    assert glob_match("**/*.md", "a.md") and glob_match("**/*.md", "x/y/a.md")
    assert glob_match("templates/*.html", "templates/a.html")
    assert not glob_match("templates/*.html", "templates/sub/a.html")
    assert not glob_match("*.md", "x/a.md")
    assert not glob_match("**/*.md", ".git/a.md") and not glob_match("*", ".env")
    assert glob_match("data/?.csv", "data/1.csv") and glob_match("[ab].md", "b.md")


def test_a_reference_is_listed_once_with_the_first_way_it_was_found(make_skill, skills_root):
    body = "[guide](guide.md) and `guide.md` and `./guide.md` and `*.md`.\n"
    skill = load(make_skill, skills_root, body, {"guide.md": ""})
    assert [(r.ref, r.via) for r in skill.references] == [("guide.md", "link")]


def test_dot_dot_and_absolute_references_are_refused_with_a_problem(
    make_skill, skills_root, tmp_path, truthful
):
    (tmp_path / "secret.md").write_text("secret")
    body = (
        "[up](../../secret.md) [abs](/etc/passwd) [win](C:\\Windows\\win.ini) [enc](..%2F..%2Fother.md)\n\n"
        "Also `../other-skill/SKILL.md` and `../*.md`.\n"
    )
    skill = load(make_skill, skills_root, body)
    assert all(r.path is None and r.exists is False for r in skill.references)
    assert [r.ref for r in skill.references] == [
        "../../secret.md",
        "/etc/passwd",
        "C:\\Windows\\win.ini",
        "../../other.md",
        "../other-skill/SKILL.md",
        "../*.md",
    ]
    assert set(problem_codes(skill)) == {"reference_escape"}
    assert len(skill.problems) == 6
    truthful(skill)


def test_a_symlink_pointing_out_of_the_root_is_refused_and_never_exists(
    make_skill, skills_root, tmp_path, truthful
):
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.md").write_text("secret [more](more.md)")
    (outside / "dir" / "inner.md").write_text("inner")
    folder = make_skill(
        "s", body="[file](leak.md) [parent](linkdir/inner.md) `linkdir/inner.md` [dead](dead.md)\n"
    )
    (folder / "leak.md").symlink_to(outside / "secret.md")
    (folder / "linkdir").symlink_to(outside / "dir", target_is_directory=True)
    (folder / "dead.md").symlink_to(outside / "missing.md")
    (folder / "internal.md").symlink_to(folder / "SKILL.md")
    library = SkillLibrary(skills_root)
    skill = library.get("s")
    assert [(r.ref, r.path, r.exists) for r in skill.references] == [
        ("leak.md", None, False),
        ("linkdir/inner.md", None, False),
        ("dead.md", None, False),
    ]
    assert problem_codes(skill) == ["symlink_escape"] * 3
    assert all(p.severity == "error" for p in skill.problems)
    assert library.glob("s", "**/*") == ["SKILL.md", "internal.md"]
    truthful(skill)


def test_a_symlink_that_stays_inside_the_root_resolves_normally(make_skill, skills_root, truthful):
    folder = make_skill("s", body="[alias](alias.md)\n", files={"real/target.md": "# t"})
    (folder / "alias.md").symlink_to(folder / "real" / "target.md")
    skill = SkillLibrary(skills_root).get("s")
    assert [(r.path, r.exists) for r in skill.references] == [("alias.md", True)]
    truthful(skill)


def test_a_symlink_loop_is_a_missing_reference_not_a_hang(make_skill, skills_root):
    folder = make_skill("s", body="[loop](loop.md)\n")
    (folder / "loop.md").symlink_to(folder / "loop.md")
    skill = SkillLibrary(skills_root).get("s")
    assert [(r.ref, r.exists) for r in skill.references] == [("loop.md", False)]
    assert problem_codes(skill) == ["reference_missing"]


def test_referenced_markdown_documents_are_followed_and_their_references_reported(
    make_skill, skills_root, truthful
):
    files = {
        "reference/forms.md": "Fill with [script](../scripts/fill.py) or `scripts/check.py`, [api](api.md).",
        "reference/api.md": "# API\nUse `templates/*.j2`.",
        "scripts/fill.py": "",
        "scripts/check.py": "",
        "templates/page.j2": "",
    }
    skill = load(make_skill, skills_root, "Read [forms](reference/forms.md).\n", files)
    assert refs(skill) == [
        ("reference/forms.md", "reference/forms.md", True, "link", "SKILL.md"),
        ("../scripts/fill.py", "scripts/fill.py", True, "link", "reference/forms.md"),
        ("api.md", "reference/api.md", True, "link", "reference/forms.md"),
        ("scripts/check.py", "scripts/check.py", True, "path", "reference/forms.md"),
        ("templates/*.j2", "templates/page.j2", True, "glob", "reference/api.md"),
    ]
    assert skill.problems == []
    truthful(skill)


def test_a_link_cycle_between_documents_terminates_and_is_reported_once(make_skill, skills_root):
    files = {"a.md": "[b](b.md)", "b.md": "[a](a.md) and [a again](./a.md)"}
    skill = load(make_skill, skills_root, "[a](a.md)\n", files)
    assert [(r.path, r.source) for r in skill.references] == [("a.md", "SKILL.md"), ("b.md", "a.md")]
    (cycle,) = [p for p in skill.problems if p.code == "reference_cycle"]
    assert cycle.severity == "warning" and cycle.message == "reference cycle: a.md -> b.md -> a.md"
    assert cycle.cycle == ("a.md", "b.md", "a.md")  # the documents as data: nobody parses the message


def test_a_cycle_back_to_skill_md_and_a_diamond_are_told_apart(make_skill, skills_root):
    files = {"a.md": "[c](c.md)", "b.md": "[c](c.md)", "c.md": "[home](SKILL.md)"}
    skill = load(make_skill, skills_root, "[a](a.md) [b](b.md)\n", files)
    cycles = [p.message for p in skill.problems if p.code == "reference_cycle"]
    assert cycles == ["reference cycle: SKILL.md -> a.md -> c.md -> SKILL.md"]


def test_following_stops_at_the_depth_limit_with_a_problem(make_skill, skills_root):
    files = {f"d{i}.md": f"[next](d{i + 1}.md)" for i in range(12)}
    skill = load(make_skill, skills_root, "[start](d0.md)\n", files)
    assert "reference_limit" in problem_codes(skill)
    assert len(skill.references) < 12


def test_a_fifo_among_the_references_never_blocks(make_skill, skills_root):
    folder = make_skill("s", body="[pipe](pipe.md)\n")
    os.mkfifo(folder / "pipe.md")
    skill = SkillLibrary(skills_root).get("s")
    assert [(r.path, r.exists) for r in skill.references] == [("pipe.md", True)]
    assert problem_codes(skill) == ["reference_unreadable"]


def test_a_realistic_office_skill_layout_resolves(make_skill, skills_root, truthful):
    """Shapes met in public office skills, written afresh: links in backticks, ooxml paths, a license file."""
    body = (
        "# Decks\n\n## Workflow\n"
        "1. **Read** [`html2pptx.md`](html2pptx.md) completely.\n"
        "2. Use the [`html2pptx.js`](scripts/html2pptx.js) library.\n"
        "3. Thumbnails: `python scripts/thumbnail.py output.pptx workspace/thumbnails --cols 4`\n"
        "4. Unpack: `python ooxml/scripts/unpack.py <office_file> <output_dir>` then edit "
        "`ppt/slides/slide{N}.xml`.\n"
        "5. Analyse the template with `thumbnail.py` (it lives in scripts/).\n\n"
        "Templates are in `~/.claude/skills/decks/my_templates/` (relative: `my_templates/`).\n"
    )
    files = {
        "html2pptx.md": "# HTML to PPTX\nSee [ooxml.md](ooxml.md).",
        "ooxml.md": "# OOXML\nValidate with `python ooxml/scripts/validate.py <dir>`.",
        "scripts/html2pptx.js": "",
        "scripts/thumbnail.py": "",
        "ooxml/scripts/unpack.py": "",
        "ooxml/scripts/validate.py": "",
        "LICENSE.txt": "terms",
    }
    make_skill("decks", body=body, files=files, extra="license: Proprietary. LICENSE.txt has complete terms")
    skill = SkillLibrary(skills_root).get("decks")
    assert skill.license == "Proprietary. LICENSE.txt has complete terms"
    assert [(r.path, r.exists, r.via, r.source) for r in skill.references] == [
        ("html2pptx.md", True, "link", "SKILL.md"),
        ("scripts/html2pptx.js", True, "link", "SKILL.md"),
        ("scripts/thumbnail.py", True, "path", "SKILL.md"),
        ("ooxml/scripts/unpack.py", True, "path", "SKILL.md"),
        ("scripts", True, "path", "SKILL.md"),
        ("ooxml.md", True, "link", "html2pptx.md"),
        ("ooxml/scripts/validate.py", True, "path", "ooxml.md"),
    ]
    assert problem_codes(skill) == []
    truthful(skill)


def test_extraction_ignores_links_and_paths_inside_code_fences_as_links():
    found = extract("```markdown\nSee [FORMS.md](FORMS.md)\n```\n")
    assert found.links == []


def test_reference_lines_point_into_skill_md(make_skill, skills_root):
    body = "intro\n\nline three has missing/one.py\nand the next line [two](missing/two.md)\n"
    make_skill("s", body=body)
    skill = SkillLibrary(skills_root).get("s")
    body_line = (Path(skill.root) / "SKILL.md").read_text().splitlines().index("intro") + 1
    assert [(p.code, p.line) for p in skill.problems] == [
        ("reference_missing", body_line + 3),
        ("reference_missing", body_line + 2),
    ]


def test_a_bare_extension_glob_matching_nothing_is_a_shell_pattern_not_a_reference(make_skill, skills_root):
    skill = load(make_skill, skills_root, '```bash\ngrep -rn "x" --include="*.py" .\nls *.ts\n```\n')
    assert skill.references == [] and skill.problems == []


def test_an_id_with_spaces_round_trips(make_skill, skills_root):
    make_skill("skills/ safe-editing", name="safe-editing")
    library = SkillLibrary(skills_root)
    (summary,) = library.list()
    assert summary.id == "skills/ safe-editing" and summary.name == "safe-editing"
    assert [p.code for p in summary.problems] == ["name_folder_mismatch"]
    assert library.get("skills/ safe-editing").id == summary.id


def test_the_runtime_library_treats_build_and_inputs_paths_as_work_areas_not_references(make_skill, skills_root):
    body = (
        "Write the outline to `build/outline.json`, the deck to ./build/deck.pptx and all `build/*.png`;\n"
        "read the brand from `/inputs/brand.json` or `inputs/brand.json`. Ship `build/seed.json` too.\n"
    )
    make_skill("s", body=body, files={"build/seed.json": "{}"})
    skill = SkillLibrary(skills_root, work_dirs=RUNTIME_WORK_DIRS).get("s")
    assert [(r.ref, r.path, r.exists) for r in skill.references] == [
        ("build/seed.json", "build/seed.json", True)
    ]
    assert skill.problems == []
    plain = SkillLibrary(skills_root).get("s")  # the plain library treats no folder name specially
    assert [r.ref for r in plain.references if not r.exists] == [
        "build/outline.json",
        "./build/deck.pptx",
        "build/*.png",
    ]  # '/inputs/..' is absolute, and the skill has no 'inputs/' folder for the code span to point into


def test_absolute_paths_in_text_name_the_hosts_files_and_are_not_references(make_skill, skills_root):
    body = (
        "Save to /tmp/inspect.png, see `/path/to/slide-01.jpg`, `~/.config/anthropic/` and `/etc/shadow`.\n\n"
        "```bash\nls /mnt/session/outputs/ > /dev/null\ncp ~/.ssh/id_rsa.pub /workspace/*.csv\n```\n"
    )
    skill = load(make_skill, skills_root, body)
    assert skill.references == [] and skill.problems == []


def test_code_examples_about_other_trees_are_not_missing_references(make_skill, skills_root, truthful):
    body = (
        "Slide order is in `ppt/presentation.xml`; save cases to `evals/evals.json`.\n\n"
        '```javascript\nslide.addImage({ path: "images/chart.png" });\nconst out = "./claude_outputs";\n```\n\n'
        '```json\n{"include": ["src/**/*"], "outDir": "./dist", "files": ["evals/files/a.pdf"]}\n```\n\n'
        "Run `python scripts/gone.py` and `python scripts/there.py`; see `scripts/*.sh`, `scripts/*.txt`.\n"
    )
    skill = load(make_skill, skills_root, body, {"scripts/there.py": "", "scripts/a.sh": ""})
    assert [(r.ref, r.path, r.exists) for r in skill.references] == [
        ("scripts/gone.py", "scripts/gone.py", False),
        ("scripts/there.py", "scripts/there.py", True),
        ("scripts/*.sh", "scripts/a.sh", True),
        ("scripts/*.txt", None, False),
    ]
    assert problem_codes(skill) == ["reference_missing", "glob_no_match"]
    truthful(skill)


def test_a_path_in_plain_prose_stays_a_reference_even_under_an_unknown_folder(make_skill, skills_root):
    skill = load(make_skill, skills_root, "The policy is in reference/policy.md.\n")
    assert [(r.ref, r.exists) for r in skill.references] == [("reference/policy.md", False)]
    assert problem_codes(skill) == ["reference_missing"]


def test_a_reference_in_another_letter_case_resolves_with_a_warning(make_skill, skills_root, truthful):
    body = "Read FORMS.md, then [the guide](Docs/Guide.MD) and run `SCRIPTS/fill.py`.\n"
    files = {"forms.md": "# forms", "docs/guide.md": "# g", "scripts/fill.py": ""}
    make_skill("s", body=body, files=files)
    library = SkillLibrary(skills_root)
    skill = library.get("s")
    assert [(r.ref, r.path, r.exists) for r in skill.references] == [
        ("Docs/Guide.MD", "docs/guide.md", True),
        ("FORMS.md", "forms.md", True),
        ("SCRIPTS/fill.py", "scripts/fill.py", True),
    ]
    assert problem_codes(skill) == ["reference_case"] * 3
    assert all(p.severity == "warning" and "only when letter case is ignored" in p.message for p in skill.problems)
    assert library.read_text("s", "FORMS.md")[0] == "# forms"
    truthful(skill)


def test_an_ambiguous_letter_case_is_never_guessed(make_skill, skills_root):
    make_skill("s", body="Read [it](FORMS.md).\n", files={"Forms.md": "a", "forms.md": "b"})
    skill = SkillLibrary(skills_root).get("s")
    assert [(r.ref, r.exists) for r in skill.references] == [("FORMS.md", False)]
    assert problem_codes(skill) == ["reference_missing"]


def test_a_letter_case_match_never_follows_a_symlink_out_of_the_skill(make_skill, skills_root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    folder = make_skill("s", body="[a](LINK/SECRET.md) [b](Leak.md)\n")
    (folder / "link").symlink_to(outside, target_is_directory=True)
    (folder / "leak.md").symlink_to(outside / "secret.md")
    skill = SkillLibrary(skills_root).get("s")
    assert [(r.ref, r.path, r.exists) for r in skill.references] == [
        ("LINK/SECRET.md", "LINK/SECRET.md", False),  # the folder behind 'link' is never even listed
        ("Leak.md", None, False),
    ]
    assert problem_codes(skill) == ["reference_missing", "symlink_escape"]
