"""The rules file (seed appendix B + slides) parses into typed rules; anything malformed is a clear error."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from orchestrator.errors import ValidationRulesError
from orchestrator.validate import ContractRules, ExpectedOutputs, RequiredFile, validate_outputs

APPENDIX_B = """
required:
  - path: "build/out/result.json"
    kind: json
    schema: "schemas/result.schema.json"
limits:
  max_total_bytes: 5242880
  max_files: 50
allowed_extensions:
  - ".md"
  - ".json"
  - ".txt"
sandbox:
  output_root: "build/out"
  deny_outside_output_root: true
hash:
  enabled: true
  algorithm: "sha256"
"""

RESULT_SCHEMA = {"type": "object", "required": ["title"], "properties": {"title": {"type": "string"}}}


def write_rules(folder: Path, text: str, name: str = "rules.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_the_appendix_b_example_parses_and_loads_its_schema_from_the_rules_folder(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "result.schema.json").write_text(json.dumps(RESULT_SCHEMA))
    rules = ContractRules.from_yaml(write_rules(tmp_path, APPENDIX_B))

    assert rules.required[0].path == "build/out/result.json"
    assert rules.required[0].kind == "json"
    assert rules.required[0].schema_ == RESULT_SCHEMA
    assert rules.required[0].schema_label == "schemas/result.schema.json"
    assert rules.limits.max_total_bytes == 5242880 and rules.limits.max_files == 50
    assert rules.allowed_extensions == [".md", ".json", ".txt"]
    assert rules.sandbox.output_root == "build/out" and rules.sandbox.deny_outside_output_root
    assert rules.hash.enabled and rules.hash.algorithm == "sha256"


def test_slide_counts_and_byte_bounds_are_accepted_for_a_pptx(tmp_path: Path) -> None:
    rules = ContractRules.from_yaml(
        write_rules(
            tmp_path,
            """
            required:
              - {path: build/deck.pptx, slides: 5, min_bytes: 100}
              - {path: build/other.pptx, kind: pptx, min_slides: 2, max_slides: 9}
            allowed_extensions: [pptx, MD]
            """,
        )
    )
    assert rules.required[0].slides == 5
    assert rules.required[1].min_slides == 2 and rules.required[1].max_slides == 9
    assert rules.allowed_extensions == [".pptx", ".md"]


def test_an_empty_rules_file_means_no_rules(tmp_path: Path) -> None:
    assert ContractRules.from_yaml(write_rules(tmp_path, "")) == ContractRules()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("required: [{path: a.json, kind: jsn}]", r"required\.0\.kind: Input should be 'json'"),
        ("limits: {max_files: -1}", r"limits\.max_files: Input should be greater than or equal to 0"),
        ("limits: {max_filez: 3}", r"limits\.max_filez: Extra inputs are not permitted"),
        ("required: [{path: notes.md, slides: 5}]", r"required\.0: .*slides only apply to a \.pptx path"),
        ("required: [{path: a.pptx, kind: docx, slides: 5}]", r"slides only apply to kind pptx, not docx"),
        (
            "required: [{path: a.pptx, min_slides: 6, max_slides: 5}]",
            r"min_slides 6 is greater than max_slides 5",
        ),
        (
            "required: [{path: a.png, kind: png, schema: {type: object}}]",
            r"a schema only applies to kind json",
        ),
        ("sandbox: {output_root: ../elsewhere}", r"sandbox\.output_root: .*must not contain '\.\.'"),
        ("sandbox: {output_root: /abs}", r"must be a relative path"),
        ("hash: {algorithm: md5}", r"hash\.algorithm: Input should be 'sha256'"),
        ("allowed_extensions: ['']", r"allowed_extensions: .*must not be empty"),
        ("- just\n- a list\n", r"rules must be a mapping, got list"),
    ],
)
def test_malformed_rules_raise_an_error_naming_file_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write_rules(tmp_path, text)
    with pytest.raises(ValidationRulesError, match=message) as caught:
        ContractRules.from_yaml(path)
    assert str(path) in caught.value.message


def test_invalid_yaml_is_an_error_with_the_position(tmp_path: Path) -> None:
    path = write_rules(tmp_path, "required: [\n  - path: x\n")
    with pytest.raises(ValidationRulesError, match=r"not valid YAML.*line"):
        ContractRules.from_yaml(path)


def test_a_missing_rules_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationRulesError, match="rules file not found"):
        ContractRules.from_yaml(tmp_path / "nope.yaml")


def test_a_schema_file_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    path = write_rules(tmp_path, "required: [{path: r.json, kind: json, schema: schemas/none.json}]")
    with pytest.raises(ValidationRulesError, match=r"required\[0\]\.schema: schema file not found"):
        ContractRules.from_yaml(path)


def test_a_schema_path_may_not_leave_the_schema_folder(tmp_path: Path) -> None:
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    (tmp_path / "outside.json").write_text("{}")
    (rules_dir / "link.json").symlink_to(tmp_path / "outside.json")
    for schema in ("../outside.json", "link.json"):
        path = write_rules(rules_dir, f"required: [{{path: r.json, schema: {schema}}}]")
        with pytest.raises(ValidationRulesError, match="schema"):
            ContractRules.from_yaml(path)


def test_a_schema_that_is_itself_invalid_is_an_error_not_a_pass(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({"type": "objekt"}))
    with pytest.raises(ValidationRulesError, match="not a valid JSON Schema"):
        ContractRules.from_yaml(write_rules(tmp_path, "required: [{path: r.json, schema: bad.json}]"))
    with pytest.raises(ValidationRulesError, match=r"inline schema.*not a valid JSON Schema"):
        ContractRules.from_mapping(
            {"required": [{"path": "r.json", "schema": {"type": 12}}]}, source="skill X"
        )


def test_a_schema_path_without_a_schema_folder_is_an_error_at_validation(out: Path) -> None:
    (out / "r.json").write_text("{}")
    expected = ExpectedOutputs(rules=ContractRules(required=[RequiredFile(path="r.json", schema="s.json")]))
    with pytest.raises(ValidationRulesError, match="cannot be resolved"):
        validate_outputs(out, expected)


def test_an_explicit_schema_base_resolves_schema_paths(tmp_path: Path, out: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps(RESULT_SCHEMA))
    (out / "r.json").write_text('{"title": "Q3"}')
    expected = ExpectedOutputs(rules=ContractRules(required=[RequiredFile(path="r.json", schema="s.json")]))
    assert validate_outputs(out, expected, schema_base=tmp_path).pass_


def test_merged_rules_keep_every_required_file_and_the_stricter_limits() -> None:
    from_outputs = ContractRules.from_mapping(
        {
            "required": [{"path": "a.json"}],
            "limits": {"max_files": 10},
            "allowed_extensions": [".json", ".md"],
        }
    )
    from_file = ContractRules.from_mapping(
        {
            "required": [{"path": "a.json"}, {"path": "deck.pptx", "slides": 5}],
            "limits": {"max_files": 5, "max_total_bytes": 1000},
            "allowed_extensions": [".json", ".pptx"],
            "sandbox": {"output_root": "build"},
        }
    )
    merged = from_outputs.merged(from_file)
    assert [r.path for r in merged.required] == ["a.json", "deck.pptx"]
    assert merged.limits.max_files == 5 and merged.limits.max_total_bytes == 1000
    assert merged.allowed_extensions == [".json"]
    assert merged.sandbox.output_root == "build"


def test_merging_rules_with_two_different_output_roots_is_an_error() -> None:
    a = ContractRules.from_mapping({"sandbox": {"output_root": "build/a"}})
    b = ContractRules.from_mapping({"sandbox": {"output_root": "build/b"}})
    with pytest.raises(ValidationRulesError, match="conflicting output roots"):
        a.merged(b)
