"""Discovery and the L1/L2 views: every SKILL.md is a skill, a broken one never stops the listing."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import pytest

from orchestrator.errors import SkillError
from orchestrator.skills import ReadCache, SkillLibrary
from orchestrator.tokens import estimate_tokens


def by_id(library: SkillLibrary) -> dict:
    return {s.id: s for s in library.list()}


def codes(summary) -> list[str]:
    return [p.code for p in summary.problems]


def test_every_skill_md_at_any_depth_is_a_skill_whose_id_is_its_folder_path(make_skill, skills_root):
    make_skill("brand-guidelines")
    make_skill("document-skills/pptx")
    make_skill("a/b/c/deep-one")
    (skills_root / "not-a-skill").mkdir()
    (skills_root / "not-a-skill" / "README.md").write_text("# nothing\n")
    summaries = SkillLibrary(skills_root).list()
    assert [s.id for s in summaries] == ["a/b/c/deep-one", "brand-guidelines", "document-skills/pptx"]
    pptx = summaries[2]
    assert pptx.name == "pptx" and pptx.path == str(skills_root.resolve() / "document-skills" / "pptx")
    assert pptx.problems == []


def test_no_folder_name_is_special(make_skill, skills_root):
    make_skill("scripts/resources")
    make_skill("references/assets/templates")
    assert [s.id for s in SkillLibrary(skills_root).list()] == [
        "references/assets/templates",
        "scripts/resources",
    ]


def test_a_skill_md_in_the_root_itself_is_the_skill_with_id_dot(make_skill, skills_root):
    make_skill(".", name="library")
    make_skill("inner")
    summaries = by_id(SkillLibrary(skills_root))
    assert list(summaries) == [".", "inner"]
    assert summaries["."].name == "library" and codes(summaries["."]) == []
    assert SkillLibrary(skills_root).get("./").id == "."


def test_vcs_dependency_and_cache_folders_are_not_searched(make_skill, skills_root):
    for folder in (".git/hooks", "node_modules/pkg", "x/__pycache__"):
        make_skill(folder)
    make_skill(".claude/skills/hidden-but-fine")
    assert [s.id for s in SkillLibrary(skills_root).list()] == [".claude/skills/hidden-but-fine"]


def test_a_symlinked_folder_leading_out_of_the_root_is_never_entered(make_skill, skills_root, tmp_path):
    outside = tmp_path / "outside" / "stolen"
    outside.mkdir(parents=True)
    (outside / "SKILL.md").write_text("---\nname: stolen\ndescription: d\n---\n")
    (skills_root / "linked").symlink_to(outside.parent, target_is_directory=True)
    make_skill("real")
    assert [s.id for s in SkillLibrary(skills_root).list()] == ["real"]


def test_broken_skills_are_listed_with_precise_problems_and_the_others_still_load(
    make_skill, skills_root, tmp_path
):
    make_skill("good")
    make_skill("binary", text=b"\x00\x01\x02\xff" * 10)
    make_skill("empty", text="")
    make_skill("no-frontmatter", text="# Title only\n")
    make_skill("broken-yaml", text="---\nname: broken-yaml\ndescription: [oops\n---\n")
    make_skill("not-mapping", text="---\n- a\n---\n")
    make_skill("unterminated", text="---\nname: unterminated\n")
    (skills_root / "dir-skill" / "SKILL.md").mkdir(parents=True)
    (skills_root / "dangling").mkdir()
    (skills_root / "dangling" / "SKILL.md").symlink_to(skills_root / "dangling" / "nowhere.md")
    secret = tmp_path / "secret.md"
    secret.write_text("---\nname: leaked\ndescription: read from outside\n---\n")
    (skills_root / "escaping").mkdir()
    (skills_root / "escaping" / "SKILL.md").symlink_to(secret)
    os.mkfifo(skills_root / "binary" / "pipe.md")  # a FIFO must never block a listing
    fifo_skill = skills_root / "fifo"
    fifo_skill.mkdir()
    os.mkfifo(fifo_skill / "SKILL.md")

    started = time.monotonic()
    summaries = by_id(SkillLibrary(skills_root))
    assert time.monotonic() - started < 5
    expected = {
        "binary": "skill_md_binary",
        "broken-yaml": "frontmatter_yaml_error",
        "dangling": "skill_md_unreadable",
        "dir-skill": "skill_md_not_a_file",
        "empty": "skill_md_empty",
        "escaping": "skill_md_escape",
        "fifo": "skill_md_not_a_file",
        "no-frontmatter": "frontmatter_missing",
        "not-mapping": "frontmatter_not_mapping",
        "unterminated": "frontmatter_unterminated",
    }
    assert {k: codes(v)[0] for k, v in summaries.items() if k != "good"} == expected
    assert summaries["good"].problems == [] and summaries["good"].name == "good"
    assert summaries["escaping"].name is None  # the outside file was never read
    assert all(p.severity == "error" for k in expected for p in summaries[k].problems[:1])
    for skill_id in expected:  # get() is as robust as list()
        assert SkillLibrary(skills_root).get(skill_id).problems[0].code == expected[skill_id]


def test_a_skill_md_that_cannot_be_read_is_a_problem_not_a_crash(make_skill, skills_root):
    """As root, the listing runs without the capabilities that bypass permissions, so access is denied."""
    make_skill("open")
    locked = make_skill("locked")
    (locked / "SKILL.md").chmod(0o000)
    code = (
        "import json, sys; from pathlib import Path; from orchestrator.skills import SkillLibrary; "
        "print(json.dumps([s.model_dump(mode='json') for s in SkillLibrary(Path(sys.argv[1])).list()]))"
    )
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    result = subprocess.run(
        [*drop, sys.executable, "-c", code, str(skills_root)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
    listed = {s["id"]: s for s in json.loads(result.stdout.strip().splitlines()[-1])}
    assert listed["open"]["problems"] == []
    (problem,) = listed["locked"]["problems"]
    assert problem["code"] == "skill_md_unreadable" and "permission denied" in problem["message"]


def test_unicode_folder_names_give_nfc_ids_found_in_either_normal_form(make_skill, skills_root):
    decomposed = unicodedata.normalize("NFD", "données-é")
    make_skill(f"fr/{decomposed}", name="donnees")
    make_skill("日本語/スライド", name="slides")
    library = SkillLibrary(skills_root)
    ids = [s.id for s in library.list()]
    assert ids == ["fr/données-é", "日本語/スライド"]
    assert all(unicodedata.is_normalized("NFC", i) for i in ids)
    assert library.get("fr/données-é").id == library.get(f"fr/{decomposed}").id == "fr/données-é"
    assert codes(library.get("日本語/スライド")) == ["name_folder_mismatch"]


def test_a_nested_skill_is_its_own_skill_and_not_part_of_the_outer_one(make_skill, skills_root, truthful):
    make_skill(
        "outer",
        body="See [inner](inner/SKILL.md) and all docs: `**/*.md`.\n",
        files={"guide.md": "outer guide\n"},
    )
    make_skill("outer/inner", body="Inner links [secret](notes.md).\n", files={"notes.md": "inner notes\n"})
    library = SkillLibrary(skills_root)
    assert [s.id for s in library.list()] == ["outer", "outer/inner"]
    outer = library.get("outer")
    paths = [(r.path, r.via, r.source) for r in outer.references]
    assert paths == [("inner/SKILL.md", "link", "SKILL.md"), ("guide.md", "glob", "SKILL.md")]
    assert library.glob("outer", "**/*") == ["SKILL.md", "guide.md"]
    truthful(outer)


def test_the_l1_index_holds_only_skills_with_a_name_and_a_description(make_skill, skills_root):
    make_skill("complete")
    make_skill("nameless", name=None)  # the folder's name stands in
    make_skill("undescribed", text="---\nname: undescribed\n---\n# A heading and no prose\n")
    make_skill("mismatch", name="other-name")
    make_skill("broken", text="no frontmatter\n")
    library = SkillLibrary(skills_root)
    index = library.l1_index()
    assert [s.id for s in index] == ["complete", "mismatch", "nameless"]
    complete = index[0]
    assert complete.l1_tokens == pytest.approx(len(f"complete: {complete.description}") / 4, abs=1)


def test_an_unknown_id_raises_a_skill_error_with_known_ids_and_close_matches(make_skill, skills_root):
    make_skill("document-skills/pptx")
    make_skill("document-skills/docx")
    with pytest.raises(SkillError) as caught:
        SkillLibrary(skills_root).get("document-skills/ppt")
    error = caught.value
    assert error.data["known"] == ["document-skills/docx", "document-skills/pptx"]
    assert error.data["close_matches"][0] == "document-skills/pptx"
    assert "document-skills/pptx" in (error.next_step or "")


def test_a_skill_added_after_the_first_scan_is_found(make_skill, skills_root):
    library = SkillLibrary(skills_root)
    assert library.list() == []
    make_skill("late")
    assert library.get("late").name == "late"


def test_a_missing_root_is_a_skill_error(tmp_path):
    with pytest.raises(SkillError):
        SkillLibrary(tmp_path / "nope")


def test_two_skills_with_the_same_name_are_both_warned(make_skill, skills_root):
    make_skill("a/dup")
    make_skill("b/dup")
    summaries = SkillLibrary(skills_root).list()
    assert [codes(s) for s in summaries] == [["duplicate_name"], ["duplicate_name"]]
    assert "b/dup" in summaries[0].problems[0].message


def test_the_full_skill_carries_frontmatter_body_hash_and_declarations(make_skill, skills_root):
    folder = make_skill(
        "decks",
        body="# Decks\n\nMake decks.\n",
        extra="license: Complete terms in LICENSE.txt\nmetadata:\n  requires-tools: [python-pptx]\n",
    )
    skill = SkillLibrary(skills_root).get("decks")
    assert skill.root == folder.resolve()
    assert skill.license == "Complete terms in LICENSE.txt"
    assert skill.body == "# Decks\n\nMake decks.\n" and skill.body_tokens == 6
    assert skill.skill_md_sha256 == hashlib.sha256((folder / "SKILL.md").read_bytes()).hexdigest()
    assert skill.declarations.requires_tools == ["python-pptx"]


def test_a_200_kb_body_loads_fast_and_l2_cuts_it_with_a_visible_marker(make_skill, skills_root, truthful):
    paragraph = (
        "Use `scripts/build.py` to build the deck; see [the guide](guide.md) and e.g. and/or notes.\n\n"
    )
    body = "# Big\n\n" + paragraph * (200_000 // len(paragraph))
    make_skill("big", body=body, files={"scripts/build.py": "print(1)\n", "guide.md": "# g\n"})
    library = SkillLibrary(skills_root, l2_max_tokens=5000)
    started = time.monotonic()
    skill = library.get("big")
    l2 = library.l2("big")
    assert time.monotonic() - started < 10
    assert skill.body_tokens > 45_000
    assert [r.path for r in skill.references] == ["guide.md", "scripts/build.py"]
    truthful(skill)
    assert l2.truncated and l2.tokens <= 5000
    shown = l2.text[: l2.text.rindex("\n\n[... L2 cut")]
    assert estimate_tokens(shown) + l2.cut_tokens == skill.body_tokens
    assert (
        f"[... L2 cut: {l2.cut_tokens} more tokens of SKILL.md not shown; "
        f'read the rest with read_ref {{"path": "SKILL.md", "offset": {len(shown)}}} ...]'
    ) in l2.text
    assert l2.text.startswith("# Big\n\nUse `scripts/build.py`")


def test_a_small_body_is_disclosed_whole_at_l2(make_skill, skills_root):
    make_skill("small", body="# Small\n\nShort.\n")
    l2 = SkillLibrary(skills_root).l2("small")
    assert (l2.text, l2.truncated, l2.cut_tokens) == ("# Small\n\nShort.\n", False, 0)
    assert l2.tokens == 4 and len(l2.sha256) == 64


def test_reads_go_through_the_shared_cache_and_unchanged_content_is_recognised(
    make_skill, skills_root, tmp_path
):
    folder = make_skill("cached", files={"doc.md": "hello\n"})
    cache = ReadCache()
    library = SkillLibrary(skills_root, cache=cache)
    library.list()
    text, sha = library.read_text("cached", "doc.md")
    assert text == "hello\n"
    assert cache.seen(folder.resolve() / "doc.md", sha)
    assert not cache.read(folder.resolve() / "doc.md").changed  # the L3 read was recorded
    # the loader's own parsing reads do not make a later L3 read of SKILL.md look already seen
    assert cache.read(folder.resolve() / "SKILL.md").changed


def test_two_folders_with_the_same_nfc_id_are_both_listed_the_second_under_its_exact_spelling(
    make_skill, skills_root
):
    make_skill(unicodedata.normalize("NFC", "é-notes"), name=None)
    make_skill(unicodedata.normalize("NFD", "é-notes"), name=None)
    library = SkillLibrary(skills_root)
    listed = library.list()
    assert sorted(s.id for s in listed) == sorted(unicodedata.normalize(f, "é-notes") for f in ("NFC", "NFD"))
    assert [p.code for p in library.scan_problems] == ["duplicate_id"]
    assert sum(any(p.code == "duplicate_id" for p in s.problems) for s in listed) == 1
