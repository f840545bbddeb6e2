"""Sloppy but plain SKILL.md files are read, each leniency reported as a warning with its line; the file stays hostile.

The shapes come from public registry skills: a no-break space after '---', a closing '---' glued to the body's first
heading, a description whose continuation lines are not indented, no name, no description. The texts here are our
own.
"""

from __future__ import annotations

import time

import pytest

from orchestrator.select.shortlist import model_invocable
from orchestrator.skills import SkillLibrary
from orchestrator.skills.frontmatter import parse_skill_md
from orchestrator.skills.lenient import DESCRIPTION_FROM_BODY_MAX
from orchestrator.skills.recover import LOOSE_CHARS, LOOSE_LINES


def parse(text: str, folder: str | None = "demo"):
    return parse_skill_md(text.encode("utf-8"), folder_name=folder)


def codes(parsed) -> list[str]:
    return [p.code for p in parsed.problems]


def only(parsed, code: str):
    (problem,) = [p for p in parsed.problems if p.code == code]
    assert problem.severity == "warning"
    return problem


# -- 1. delimiter lines that end in Unicode whitespace ---------------------------------------------------------------


@pytest.mark.parametrize(("space", "named"), [("\u00a0", "U+00A0"), ("\u3000", "U+3000"), (" \t\u2009", "U+2009")])
def test_delimiter_lines_ending_in_unicode_whitespace_are_read_and_each_reported(space, named):
    parsed = parse(f"---{space}\nname: demo\ndescription: Makes demos.\n---{space}\n\n# Demo\n")
    assert (parsed.name, parsed.description, parsed.body, parsed.body_line) == ("demo", "Makes demos.", "# Demo\n", 6)
    warnings = [(p.code, p.line, p.severity) for p in parsed.problems]
    assert warnings == [("frontmatter_delimiter_whitespace", n, "warning") for n in (1, 4)]
    assert named in parsed.problems[0].message and "line 1" in parsed.problems[0].message
    assert "closing" in parsed.problems[1].message


@pytest.mark.parametrize("after", ["\x0b", "\x0c", "\u200b", "\ufeff", "x"])
def test_a_control_character_or_a_non_space_after_the_opening_dashes_is_still_no_frontmatter(after):
    assert codes(parse(f"---{after}\nname: demo\ndescription: d\n---\nbody\n")) == ["frontmatter_missing"]


def test_plain_trailing_spaces_on_delimiters_stay_silent():
    assert parse("--- \t\nname: demo\ndescription: d\n---  \nbody\n").problems == []


# -- 2. a closing '---' glued to the body's first line ----------------------------------------------------------------


@pytest.mark.parametrize("first", ["# Market scanner", "## Usage", "```bash", "Plain text"])
def test_a_closer_glued_to_the_first_body_line_closes_the_frontmatter(first):
    parsed = parse(f"---\nname: demo\ndescription: Scans markets.\nmetadata:\n  version: '2'\n---{first}\n\nMore.\n")
    assert (parsed.name, parsed.description, parsed.metadata) == ("demo", "Scans markets.", {"version": "2"})
    assert parsed.body == f"{first}\n\nMore.\n" and parsed.body_line == 6
    problem = only(parsed, "frontmatter_closer_joined")
    assert problem.line == 6 and "line 6" in problem.message and repr(first) in problem.message
    assert codes(parsed) == ["frontmatter_closer_joined"]


def test_the_first_closer_of_either_kind_wins():
    glued_first = parse("---\nname: demo\ndescription: d\n---# Title\ntext\n---\nmore\n")
    assert glued_first.body == "# Title\ntext\n---\nmore\n" and glued_first.body_line == 4
    clean_first = parse("---\nname: demo\ndescription: d\n---\n---# Not a closer any more\n")
    assert clean_first.body == "---# Not a closer any more\n" and clean_first.problems == []


@pytest.mark.parametrize("line", ["----", "-----# x", "---|---|---", "--- text", "---\u00a0text"])
def test_more_dashes_a_table_rule_or_text_after_a_space_do_not_close(line):
    parsed = parse(f"---\nname: demo\ndescription: d\n{line}\n")
    assert codes(parsed)[0] in ("frontmatter_unterminated", "frontmatter_yaml_error")
    assert parsed.name is None and parsed.description is None


def test_a_glued_closer_gives_body_references_their_true_lines(make_skill, skills_root):
    make_skill("demo", text="---\nname: demo\ndescription: d\n---See [the guide](guide.md).\n", files={"guide.md": "g"})
    skill = SkillLibrary(skills_root).get("demo")
    assert [(r.ref, r.exists) for r in skill.references] == [("guide.md", True)]
    assert SkillLibrary(skills_root).parsed("demo")[0].body_line == 4


# -- 3. recovery: a plain value continued on lines that are not indented ----------------------------------------------


def test_an_unindented_continuation_of_a_plain_description_is_read_up_to_the_next_key():
    parsed = parse(
        "---\nname: demo\ndescription: **What it does:**\nTracks multi-step errands.\n\n**When:**\n"
        "- the user asks for help with a process\n- or checks progress\nlicense: MIT\n---\nbody\n"
    )
    assert parsed.description == (
        "**What it does:** Tracks multi-step errands. **When:** - the user asks for help with a process"
        " - or checks progress"
    )
    assert codes(parsed) == ["frontmatter_recovered", "continuation_unindented"]
    problem = only(parsed, "continuation_unindented")
    assert (problem.line, problem.field) == (3, "description") and "lines 4-8" in problem.message


def test_an_unindented_continuation_stops_at_a_key_written_after_a_no_break_space_and_at_a_code_fence():
    parsed = parse("---\nname: demo\ndescription: Writes: scripts\ntriggers:\u00a0\n\u00a0- scripts\n---\nbody\n")
    assert parsed.description == "Writes: scripts"
    fenced = parse("---\nname: demo\ndescription: **Guide**\nStep one.\n```bash\nrm -rf x\n```\n---\nbody\n")
    assert fenced.description == "**Guide** Step one."


def test_an_empty_value_followed_by_a_list_is_still_not_text():
    parsed = parse("---\nname: demo\ndescription:\n- one\n- two\nbroken: : :\n---\nbody\n")
    assert codes(parsed) == ["frontmatter_yaml_error"] and parsed.description is None


def test_quoted_and_block_values_are_not_continued_over_unindented_lines():
    parsed = parse("---\nname: demo\ndescription: 'Quoted: yes' tail\nloose line\n---\n")
    assert parsed.description == "Quoted: yes" and "continuation_unindented" not in codes(parsed)


def test_an_unindented_continuation_is_bounded_in_lines_and_characters():
    many = parse("---\nname: demo\ndescription: **x**\n" + "- item\n" * 100_000 + "---\nbody\n")
    assert many.description == "**x** " + " ".join(["- item"] * LOOSE_LINES)
    long = parse("---\nname: demo\ndescription: **x**\n" + "y" * 200_000 + "\n---\nbody\n")
    assert long.description == "**x** " + "y" * LOOSE_CHARS


# -- 4. no name: the folder's name stands in --------------------------------------------------------------------------


def test_a_missing_name_is_read_from_the_folder_with_a_warning():
    parsed = parse("---\ndescription: Shares pictures.\n---\nbody\n", folder="picture-share")
    assert parsed.name == "picture-share"
    problem = only(parsed, "name_from_folder")
    assert (problem.field, problem.line) == ("name", None) and "'picture-share'" in problem.message
    assert codes(parsed) == ["name_from_folder"]


def test_a_quoting_slip_in_a_frontmatter_without_a_name_still_reads_the_description_and_the_folder_name():
    parsed = parse("---\ndescription: **Desktop control**\n\nmouse, keyboard and screen automation\n---\nbody\n",
                   folder="desktop-control")
    assert parsed.name == "desktop-control"
    assert parsed.description == "**Desktop control** mouse, keyboard and screen automation"
    assert {"frontmatter_recovered", "name_from_folder"} <= set(codes(parsed))
    assert all(p.severity == "warning" for p in parsed.problems)


def test_a_quoting_slip_with_neither_name_nor_description_readable_stays_an_error():
    parsed = parse("---\nlicense: *odd\n---\nFirst paragraph of prose.\n", folder="odd")
    assert parsed.name is None and codes(parsed) == ["frontmatter_yaml_error"]


@pytest.mark.parametrize("value", ["", "''", '"  "'])
def test_an_empty_name_is_read_from_the_folder_and_the_warning_names_its_line(value):
    parsed = parse(f"---\ndescription: d\nname: {value}\n---\n")
    assert parsed.name == "demo"
    assert only(parsed, "name_from_folder").line == 3 and codes(parsed) == ["name_from_folder"]


def test_a_folder_name_stands_in_only_as_a_written_name_would_pass_the_checks():
    parsed = parse("---\ndescription: d\n---\n", folder="My Skill")
    assert parsed.name == "My Skill"
    assert codes(parsed) == ["name_from_folder", "name_invalid"]


@pytest.mark.parametrize("folder", [None, "", "evil\x1b[31m", "x" * 256])
def test_without_a_usable_folder_name_a_missing_name_stays_an_error(folder):
    parsed = parse("---\ndescription: d\n---\n", folder=folder)
    assert parsed.name is None and codes(parsed) == ["name_missing"]


@pytest.mark.parametrize("value", ["2048", "[a, b]", "true"])
def test_a_name_that_is_not_a_string_is_not_replaced_by_the_folder(value):
    parsed = parse(f"---\nname: {value}\ndescription: d\n---\n")
    assert parsed.name is None and codes(parsed) == ["name_not_string"]


# -- 5. no description: the body's first paragraph stands in ----------------------------------------------------------


def test_a_missing_description_is_the_first_paragraph_of_prose_with_a_warning_on_its_line():
    body = (
        "# Title\n\n<!-- generated\nby a tool -->\n```\ncode here\n```\n| a | b |\n|---|---|\n![logo](logo.png)\n"
        "> a quoted note\n- a list item\n\nSetext heading\n==============\n\n"
        "Finds **slow** queries in `postgres` logs\nand suggests [indexes](https://example.org/i).\n\nSecond one.\n"
    )
    parsed = parse(f"---\nname: demo\n---\n{body}")
    assert parsed.description == "Finds slow queries in postgres logs and suggests indexes."
    problem = only(parsed, "description_from_body")
    assert problem.line == 20 and "line 20" in problem.message and problem.field == "description"
    assert codes(parsed) == ["description_from_body"]


@pytest.mark.parametrize("value", ["", "''", "'   '"])
def test_an_empty_description_is_read_from_the_body(value):
    parsed = parse(f"---\nname: demo\ndescription: {value}\n---\n\nDoes the thing.\n")
    assert parsed.description == "Does the thing." and only(parsed, "description_from_body").line == 6
    assert "line 3 leaves 'description' empty" in parsed.problems[0].message


@pytest.mark.parametrize(
    "body", ["", "# Only a heading\n", "```\nprose inside a fence\n```\n", "- a\n- b\n", "Bell \x07 ring\n"]
)
def test_without_a_paragraph_of_prose_a_missing_description_stays_an_error(body):
    parsed = parse(f"---\nname: demo\n---\n{body}")
    assert parsed.description is None and codes(parsed) == ["description_missing"]


@pytest.mark.parametrize("invisible", ["\u200b", "\u2060\ufeff", "**\u200d**", "\u00a0\u200c"])
def test_a_paragraph_of_only_invisible_characters_is_not_a_description(invisible):
    parsed = parse(f"---\nname: demo\n---\n{invisible}\n\nDoes the thing.\n")
    assert parsed.description == "Does the thing." and only(parsed, "description_from_body").line == 6
    assert parse(f"---\nname: demo\n---\n{invisible}\n").description is None


def test_a_description_from_the_body_is_cut_to_1024_characters():
    parsed = parse("---\nname: demo\n---\n" + "word " * 5000 + "\n")
    assert parsed.description is not None
    assert len(parsed.description) <= DESCRIPTION_FROM_BODY_MAX and parsed.description.endswith("word\u2026")
    assert "description_invalid" not in codes(parsed)


def test_a_description_that_is_not_a_string_is_not_replaced_by_the_body():
    parsed = parse("---\nname: demo\ndescription: [TODO, fill in]\n---\nA real paragraph.\n")
    assert parsed.description is None and codes(parsed) == ["description_not_string"]


def test_an_empty_frontmatter_in_a_named_folder_takes_both_fields_and_is_listed(make_skill, skills_root):
    make_skill("notes-helper", text="---\n---\n# Notes\n\nKeeps a diary of the user's notes.\n")
    (summary,) = SkillLibrary(skills_root).l1_index()
    assert (summary.name, summary.description) == ("notes-helper", "Keeps a diary of the user's notes.")
    assert [p.code for p in summary.problems] == ["name_from_folder", "description_from_body"]


# -- what stays refused ------------------------------------------------------------------------------------------------


def test_no_frontmatter_stays_unlisted_even_with_prose_and_a_folder(make_skill, skills_root):
    make_skill("plain", text="# Plain\n\nA paragraph that could describe it.\n")
    make_skill("open", text="---\nname: open\n# never closed\n\nProse.\n")
    assert SkillLibrary(skills_root).l1_index() == []


def test_an_alias_stays_refused_even_when_name_and_description_could_be_guessed():
    parsed = parse("---\nlicense: &l MIT\nother: *l\n---\nA paragraph.\n")
    assert codes(parsed) == ["frontmatter_yaml_error"] and (parsed.name, parsed.description) == (None, None)


# -- disable-model-invocation is never lost ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "---\ndisable-model-invocation: true\n---\nDeploys to production.\n",  # both fields from fallbacks
        "---\u00a0\nname: demo\ndescription: Deploys: prod\ndisable-model-invocation:\u00a0true\n---\u00a0\n",
        "---\nname: demo\ndescription: **Deploys**\nto prod\ndisable-model-invocation:true\n---\nbody\n",
        "---\nname: demo\ndescription: d\ndisable-model-invocation: 'true'\n---\nbody\n",
        "---\nname: demo\ndescription: d\n---# Deploy\ndisable-model-invocation: TRUE\n---\nbody\n",
        "---\nname: demo\ndescription: d\n---# Deploy\ndisable-model-invocation: true\n---# Usage\nbody\n",
        '---\nname: demo\ndescription: d\n"disable-model-invocation": "true"\n---\nbody\n',
        "---\n{name: demo, description: d, disable-model-invocation: 'yes'}\n---\nbody\n",
        "---\nname: demo\ndescription: d\ndisable-model-invocation:\n  'True'\n---\nbody\n",
        "---\nname: demo\ndescription: d\n\u00a0disable-model-invocation: true\n---\nbody\n",
        "---\nname: demo\ndescription: d\n\ufeffdisable-model-invocation: true\n---\nbody\n",
        "\n \n---\nname: demo\ndescription: d\ndisable-model-invocation: true\n---\nbody\n",
        "\n---\nname: demo\ndescription: 'Deploys: \"prod\"' now\ndisable-model-invocation: yes\n---\nbody\n",
    ],
)
def test_a_skill_that_asks_not_to_be_picked_is_never_picked_through_a_lenient_reading(text, tmp_path):
    parsed = parse(text)
    assert parsed.disable_model_invocation is True
    assert "disable-model-invocation" not in (parsed.description or "")
    folder = tmp_path / "lib" / "demo"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    (summary,) = SkillLibrary(tmp_path / "lib").l1_index()
    assert summary.disable_model_invocation and model_invocable([summary]) == []


@pytest.mark.parametrize("brk", ["\u2028", "\u2029", "\x85"])
def test_a_flag_after_a_yaml_line_break_inside_a_recovered_line_is_not_lost(brk, tmp_path):
    # YAML breaks lines at U+2028, U+2029 and NEL too; the line-by-line reading after a quoting slip does not.
    text = f"---\nname: demo\ndescription: Use when: deploying{brk}disable-model-invocation: true\n---\nbody\n"
    assert parse(text).disable_model_invocation is True
    folder = tmp_path / "lib" / "demo"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    assert model_invocable(SkillLibrary(tmp_path / "lib").l1_index()) == []


@pytest.mark.parametrize("value", ["false", "'false'", "truely", "no", "maybe", "'true, but later'", "1"])
def test_a_flag_set_to_false_or_to_nonsense_stays_false(value):
    parsed = parse(f"---\nname: demo\ndescription: d\ndisable-model-invocation: {value}\n---\n")
    assert parsed.disable_model_invocation is False


# -- hostile sizes -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "---" + "\u00a0" * 200_000 + "\nname: demo\n---\n" + "b" * 200_000,
        "---\nname: demo\n---" + "#" * 200_000 + "\n",
        "---\n" + "---|x\n" * 100_000,
        "---\nname: demo\n---\n" + "```\n" + "code\n" * 100_000,
        "---\nname: demo\n---\n" + "[" + "a" * 199 + "](" * 100_000,
        "---\nname: demo\n---\n" + "*_`" * 70_000,
        "---\nname: demo\ndescription: d\ndisable-model-invocation:" + " " * 200_000 + "tru\n---\n",
        "---\nname: demo\ndescription: **x**\n" + ("a" * 199 + ":" + "\u00a0" * 10 + "b\n") * 1000 + "---\n",
    ],
)
def test_long_lines_and_many_lines_are_read_in_bounded_time_and_size(text):
    started = time.monotonic()
    parsed = parse(text)
    assert time.monotonic() - started < 2.0
    assert len(parsed.description or "") <= LOOSE_CHARS + 16


def test_a_line_read_after_a_quoting_slip_is_read_in_time_linear_in_its_spaces():
    # Spaces and tabs not followed by '#' (not a comment), then a comment: no pattern retries each space of the run.
    text = "---\nname: demo\ndescription: Use when: a" + " \t" * 30_000 + "b # note\n---\n"
    started = time.monotonic()
    parsed = parse(text)
    assert time.monotonic() - started < 2.0
    assert parsed.description is not None and parsed.description.endswith("\tb")
    assert "frontmatter_recovered" in codes(parsed)


# -- blank lines above the frontmatter --------------------------------------------------------------------------------


@pytest.mark.parametrize("above", ["\n", "\n\n", " \t\n", "\u3000\n\n"])
def test_blank_lines_before_the_opening_dashes_are_skipped_with_a_warning_and_true_line_numbers(above):
    blank = above.count("\n")
    parsed = parse(f"{above}---\nname: demo\ndescription: Makes demos.\nname: again\n---\n\n# Demo\n")
    assert (parsed.name, parsed.description, parsed.body) == ("again", "Makes demos.", "# Demo\n")
    assert parsed.body_line == 7 + blank
    assert [(p.code, p.line) for p in parsed.problems] == [
        ("frontmatter_after_blank_lines", blank + 1),
        ("duplicate_key", 4 + blank),
        ("name_folder_mismatch", 4 + blank),
    ]


def test_blank_lines_before_an_unclosed_frontmatter_name_its_true_opening_line():
    parsed = parse("\n\n---\nname: demo\ndescription: d\n")
    assert [(p.code, p.line) for p in parsed.problems] == [
        ("frontmatter_after_blank_lines", 3),
        ("frontmatter_unterminated", 3),
    ]
    assert "line 3" in parsed.problems[1].message


@pytest.mark.parametrize("text", ["\n# Title\n---\nname: demo\ndescription: d\n---\n", "\n\n", "\nname: demo\n"])
def test_text_before_the_dashes_or_no_dashes_at_all_is_still_no_frontmatter(text):
    assert codes(parse(text))[-1:] in (["frontmatter_missing"], ["skill_md_empty"])


def test_a_skill_whose_file_starts_with_an_empty_line_is_listed(make_skill, skills_root):
    text = "\r\n---\r\nname: blank-first\r\ndescription: Reads files that begin with a newline.\r\n---\r\nBody.\r\n"
    make_skill("blank-first", text=text.encode())
    (summary,) = SkillLibrary(skills_root).l1_index()
    assert summary.usable_at_l1 and summary.description == "Reads files that begin with a newline."
