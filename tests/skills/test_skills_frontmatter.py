"""SKILL.md frontmatter as the Agent Skills specification defines it: exact values, precise problems."""

from __future__ import annotations

import pytest
import yaml

from orchestrator.skills.frontmatter import parse_skill_md


def parse(text: str | bytes, folder: str | None = "demo"):
    return parse_skill_md(text if isinstance(text, bytes) else text.encode("utf-8"), folder_name=folder)


def codes(parsed) -> list[str]:
    return [p.code for p in parsed.problems]


def test_a_valid_skill_md_gives_its_exact_name_description_and_body_without_problems():
    parsed = parse("---\nname: demo\ndescription: Makes demos. Use it when asked for one.\n---\n\n# Demo\n\nBody.\n")
    assert parsed.name == "demo"
    assert parsed.description == "Makes demos. Use it when asked for one."
    assert parsed.body == "# Demo\n\nBody.\n"
    assert parsed.body_line == 6
    assert parsed.problems == []


def test_a_long_quoted_description_with_colons_and_quotes_is_kept_exactly():
    description = 'Slides: create, edit; read "decks" (.pptx) - when the user says "deck", use it: always.'
    escaped = description.replace('"', '\\"')
    parsed = parse(f'---\nname: demo\ndescription: "{escaped}"\nlicense: Complete terms in LICENSE.txt\n---\nx\n')
    assert parsed.description == description
    assert parsed.license == "Complete terms in LICENSE.txt"
    assert parsed.problems == []


def test_optional_spec_fields_are_read_without_problems():
    parsed = parse(
        "---\nname: demo\ndescription: d\nlicense: MIT\nallowed-tools: Bash(git:*) Read\n"
        "compatibility: Needs python3 and network access\n"
        "metadata:\n  author: someone\n  version: '1.0'\n---\n"
    )
    assert parsed.allowed_tools == ["Bash(git:*)", "Read"]
    assert parsed.compatibility == "Needs python3 and network access"
    assert parsed.metadata == {"author": "someone", "version": "1.0"}
    assert parsed.problems == []


def test_a_bom_and_crlf_line_endings_are_each_reported_and_the_fields_still_read():
    data = b"\xef\xbb\xbf---\r\nname: demo\r\ndescription: Crlf text.\r\n---\r\n\r\n# T\r\n"
    parsed = parse(data)
    assert (parsed.name, parsed.description, parsed.body) == ("demo", "Crlf text.", "# T\n")
    assert codes(parsed) == ["encoding_bom", "crlf_line_endings"]
    assert all(p.severity == "warning" for p in parsed.problems)


def test_a_folded_description_is_exactly_the_yaml_value_and_reported():
    text = "---\nname: demo\ndescription: >\n  First line\n  continues here.\n---\nbody\n"
    parsed = parse(text)
    assert parsed.description == "First line continues here.\n" == yaml.safe_load(text.split("---")[1])["description"]
    problem = parsed.problems[0]
    assert (problem.code, problem.field, problem.line, problem.severity) == (
        "block_scalar",
        "description",
        3,
        "warning",
    )


def test_a_literal_block_description_keeps_its_inner_newlines():
    parsed = parse("---\nname: demo\ndescription: |\n  one\n  two\n---\n")
    assert parsed.description == "one\ntwo\n"
    assert codes(parsed) == ["block_scalar"]


def test_non_utf8_bytes_are_replaced_and_reported_with_their_byte_offset_and_line():
    data = b"---\nname: demo\ndescription: caf\xe9 time\n---\nbody \xff\n"
    parsed = parse(data)
    assert parsed.description == "caf\ufffd time"
    (problem,) = parsed.problems
    assert problem.code == "invalid_utf8"
    assert "byte offset 31" in problem.message and problem.line == 3
    assert "2 invalid sequence(s)" in problem.message


def test_utf16_text_is_decoded_and_reported():
    parsed = parse("---\nname: demo\ndescription: wide\n---\nb\n".encode("utf-16"))
    assert (parsed.name, parsed.description) == ("demo", "wide")
    assert codes(parsed) == ["encoding_utf16"]


def test_binary_data_is_an_error_with_the_offset_of_the_first_nul_byte():
    parsed = parse(b"---\nname: demo\n\x00\x01\x02")
    assert parsed.name is None
    (problem,) = parsed.problems
    assert problem.code == "skill_md_binary" and "offset 15" in problem.message


@pytest.mark.parametrize("data", [b"", b"  \n\n"])
def test_an_empty_file_is_an_error(data):
    assert codes(parse(data)) == ["skill_md_empty"]


def test_missing_frontmatter_is_an_error_and_the_whole_text_is_the_body():
    parsed = parse("# Just markdown\n\nname: demo\n")
    assert codes(parsed) == ["frontmatter_missing"]
    assert parsed.body.startswith("# Just markdown") and parsed.name is None


def test_an_unterminated_frontmatter_is_an_error_on_line_1():
    parsed = parse("---\nname: demo\ndescription: d\n# no closing line\n")
    (problem,) = parsed.problems
    assert (problem.code, problem.line) == ("frontmatter_unterminated", 1)


def test_a_yaml_syntax_error_names_its_line_in_the_file():
    parsed = parse("---\nname: demo\ndescription: [unclosed\nlicense: x\n---\nbody\n")
    (problem,) = parsed.problems
    assert problem.code == "frontmatter_yaml_error"
    assert problem.line in (4, 5) and f"line {problem.line}" in problem.message
    assert parsed.body == "body\n"


def test_an_unquoted_colon_in_a_description_is_recovered_line_by_line_with_a_warning_on_that_line():
    parsed = parse("---\nname: demo\ndescription: Use this when: things happen\n---\n")
    assert (parsed.name, parsed.description) == ("demo", "Use this when: things happen")
    (problem,) = parsed.problems
    assert (problem.code, problem.severity, problem.line) == ("frontmatter_recovered", "warning", 3)
    assert "line 3" in problem.message and "read 'name' and 'description' line by line" in problem.message


@pytest.mark.parametrize(
    ("frontmatter", "name", "description"),
    [
        # a description that starts like a YAML alias (Markdown bold)
        ("name: coach\ndescription: **Running coach** plans your week", "coach", "**Running coach** plans your week"),
        # text after the closing quote; YAML's own escapes still apply inside the quotes
        ('name: q\ndescription: "Say \\"hi\\": politely" then more', "q", 'Say "hi": politely'),
        ("name: q\ndescription: 'It''s: fine' tail", "q", "It's: fine"),
        # another key is broken (a quoted value with an unindented tail); the description is a block scalar
        (
            'name: memo\nsummary: "short"\n  broken tail...\n'
            "description: |-\n  Keeps notes.\n  Use when asked.\ntags:\n- a",
            "memo",
            "Keeps notes.\nUse when asked.",
        ),
        # a folded description whose continuation line holds ': '
        (
            "name: f\ndescription: >\n  Reads logs\n  when: the build fails\nx: [",
            "f",
            "Reads logs when: the build fails",
        ),
        # a plain description continued on indented lines, with a comment after the name
        ("name: p # the id\ndescription: Finds\n  slow queries: fast\nbad: : :", "p", "Finds slow queries: fast"),
    ],
)
def test_quoting_slips_still_yield_name_and_description(frontmatter, name, description):
    parsed = parse(f"---\n{frontmatter}\n---\nbody\n", folder=None)
    assert (parsed.name, parsed.description) == (name, description)
    assert codes(parsed)[0] == "frontmatter_recovered"
    assert parsed.body == "body\n"


def test_a_recovered_frontmatter_keeps_disable_model_invocation_so_a_slip_never_makes_a_skill_invocable():
    parsed = parse("---\nname: demo\ndisable-model-invocation: true\ndescription: Deploys: prod\n---\n")
    assert parsed.disable_model_invocation is True
    assert "'disable-model-invocation'" in parsed.problems[0].message


@pytest.mark.parametrize(
    "frontmatter",
    [
        "name: demo\ndescription: [a list: never closed",  # a flow collection is not text
        "name: demo\ndescription:\n  - a: b\nx: y: z",  # nor is a list
        "name: [demo\ndescription: Finds things: fast",  # a name written but unreadable
    ],
)
def test_a_frontmatter_without_both_fields_readable_stays_a_yaml_error(frontmatter):
    parsed = parse(f"---\n{frontmatter}\n---\n")
    assert codes(parsed) == ["frontmatter_yaml_error"]
    assert parsed.problems[0].severity == "error"
    assert parsed.name is None and parsed.description is None


def test_after_a_quoting_slip_a_name_not_written_at_all_is_the_folders_and_without_a_folder_an_error():
    parsed = parse("---\ndescription: Finds things: fast\n---\n")
    assert (parsed.name, parsed.description) == ("demo", "Finds things: fast")
    assert codes(parsed) == ["frontmatter_recovered", "name_from_folder"]
    parsed = parse("---\ndescription: Finds things: fast\n---\n", folder=None)
    assert parsed.name is None and "name_missing" in codes(parsed)


@pytest.mark.parametrize("yaml_text", ["- a\n- b", "just a sentence"])
def test_a_frontmatter_that_is_not_a_mapping_is_an_error(yaml_text):
    parsed = parse(f"---\n{yaml_text}\n---\nbody\n")
    assert codes(parsed) == ["frontmatter_not_mapping"]


def test_an_empty_frontmatter_misses_name_and_description_unless_the_folder_and_the_body_stand_in():
    assert codes(parse("---\n---\n# Title\n", folder=None)) == ["name_missing", "description_missing"]
    parsed = parse("---\n---\nbody\n")
    assert (parsed.name, parsed.description) == ("demo", "body")
    assert codes(parsed) == ["name_from_folder", "description_from_body"]


@pytest.mark.parametrize("value", ["2048", "[a, b]", "{x: 1}", "true"])
def test_a_name_that_is_not_a_string_is_an_error_and_not_guessed(value):
    parsed = parse(f"---\nname: {value}\ndescription: d\n---\n", folder=None)
    assert parsed.name is None
    (problem,) = parsed.problems
    assert (problem.code, problem.field, problem.line) == ("name_not_string", "name", 2)


@pytest.mark.parametrize("name", ["a", "pdf", "pdf-tools", "a1-b2-c3", "x" * 64, "'9'"])
def test_valid_names(name):
    assert parse(f"---\nname: {name}\ndescription: d\n---\n", folder=None).name == name.strip("'")
    assert parse(f"---\nname: {name}\ndescription: d\n---\n", folder=None).problems == []


@pytest.mark.parametrize("name", ["-a", "a-", "a--b", "Pdf", "a_b", "a b", "ä", "x" * 65, "'a.b'", "''"])
def test_invalid_names_are_reported_but_kept_as_written(name):
    parsed = parse(f"---\nname: {name}\ndescription: d\n---\n", folder=None)
    assert parsed.name == name.strip("'")
    assert codes(parsed) == ["name_invalid"]


def test_a_name_different_from_the_folder_is_an_error_and_still_reported_as_written():
    parsed = parse("---\nname: other-name\ndescription: d\n---\n", folder="demo")
    assert parsed.name == "other-name"
    (problem,) = parsed.problems
    assert problem.code == "name_folder_mismatch" and "'demo'" in problem.message


def test_a_description_of_1024_characters_is_fine_and_1025_is_not():
    assert parse(f"---\nname: demo\ndescription: {'d' * 1024}\n---\n").problems == []
    parsed = parse(f"---\nname: demo\ndescription: {'d' * 1025}\n---\n")
    assert parsed.description == "d" * 1025
    assert codes(parsed) == ["description_invalid"]


@pytest.mark.parametrize("description", ["Use <b>bold</b>", "a -> b", "''"])
def test_descriptions_with_angle_brackets_or_empty_are_invalid(description):
    assert codes(parse(f"---\nname: demo\ndescription: {description}\n---\n")) == ["description_invalid"]


def test_unknown_keys_are_warnings_with_their_line_and_do_not_stop_parsing():
    parsed = parse("---\nname: demo\nversion: 2\ndescription: d\ntags: [a]\n---\n")
    assert parsed.name == "demo" and parsed.description == "d"
    unknown = [(p.code, p.field, p.line, p.severity) for p in parsed.problems]
    assert unknown == [("unknown_key", "version", 3, "warning"), ("unknown_key", "tags", 5, "warning")]


def test_a_repeated_key_is_reported_and_the_last_value_wins():
    parsed = parse("---\nname: demo\ndescription: first\ndescription: second\n---\n")
    assert parsed.description == "second"
    assert [(p.code, p.line) for p in parsed.problems] == [("duplicate_key", 4)]


def test_yaml_aliases_are_refused_so_a_frontmatter_cannot_explode():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n"
    parsed = parse(f"---\nname: demo\ndescription: d\nmetadata:\n  {bomb.replace(chr(10), chr(10) + '  ')}\n---\n")
    assert "frontmatter_yaml_error" in codes(parsed)
    assert "aliases" in parsed.problems[0].message


def test_optional_fields_of_the_wrong_shape_are_warnings():
    parsed = parse(
        f"---\nname: demo\ndescription: d\nlicense: [MIT]\nallowed-tools: {{a: 1}}\n"
        f"compatibility: {'c' * 501}\nmetadata: just text\n---\n"
    )
    assert [(p.code, p.field) for p in parsed.problems] == [
        ("field_invalid", "license"),
        ("field_invalid", "allowed-tools"),
        ("field_invalid", "compatibility"),
        ("field_invalid", "metadata"),
    ]
    assert parsed.license is None and parsed.allowed_tools is None and parsed.metadata == {}


def test_yaml_dates_and_binary_in_metadata_become_json_safe_values():
    parsed = parse("---\nname: demo\ndescription: d\nmetadata:\n  released: 2024-05-01\n  blob: !!binary aGk=\n---\n")
    assert parsed.metadata == {"released": "2024-05-01", "blob": "aGk="}


def test_declarations_are_read_from_top_level_keys():
    parsed = parse(
        "---\nname: demo\ndescription: d\nrequires-tools: [python-pptx, node]\n"
        "operations: fs-temp, process-single\n"
        "input-schema:\n  type: object\n  required: [title]\n  properties: {title: {type: string}}\n---\n"
    )
    assert parsed.declarations.requires_tools == ["python-pptx", "node"]
    assert parsed.declarations.operations == ["fs-temp", "process-single"]
    assert parsed.declarations.input_schema == {
        "type": "object",
        "required": ["title"],
        "properties": {"title": {"type": "string"}},
    }
    assert parsed.problems == []


def test_declarations_are_read_from_metadata_and_a_top_level_key_wins():
    parsed = parse(
        "---\nname: demo\ndescription: d\nrequires-tools: [libreoffice]\nmetadata:\n"
        "  requires-tools: [ffmpeg]\n  operations: [fs-project]\n---\n"
    )
    assert parsed.declarations.requires_tools == ["libreoffice"]
    assert parsed.declarations.operations == ["fs-project"]
    assert parsed.problems == []


def test_malformed_declarations_are_reported():
    parsed = parse(
        "---\nname: demo\ndescription: d\nrequires-tools: {a: 1}\noperations: [teleport]\n"
        "input-schema:\n  type: 12\n---\n"
    )
    found = [(p.code, p.field, p.severity) for p in parsed.problems]
    assert found == [
        ("declaration_invalid", "requires-tools", "error"),
        ("declaration_invalid", "operations", "warning"),
        ("declaration_invalid", "input-schema", "error"),
    ]
    assert parsed.declarations.input_schema is None


@pytest.mark.parametrize(
    ("value", "tools"),
    [
        ("Read Write", ["Read", "Write"]),
        ("Read, Glob, Bash(npm:*)", ["Read", "Glob", "Bash(npm:*)"]),
        ("Bash(git add:*) Read", ["Bash(git add:*)", "Read"]),
        ("[Read, Write]", ["Read", "Write"]),
    ],
)
def test_allowed_tools_accept_the_spec_form_and_the_common_ones(value, tools):
    parsed = parse(f"---\nname: demo\ndescription: d\nallowed-tools: {value}\n---\n")
    assert parsed.allowed_tools == tools and parsed.problems == []
