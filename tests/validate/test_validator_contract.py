"""Stage 1, the contract: each rule passes when met and fails with a precise, categorised violation."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from validator_helpers import write

from orchestrator.validate import ContractRules, ExpectedOutputs, ValidationReport, validate_outputs


def check(out: Path, rules: dict[str, Any]) -> ValidationReport:
    return validate_outputs(out, ExpectedOutputs(rules=ContractRules.from_mapping(rules, source="test")))


def assert_fails(report: ValidationReport, category: str, *fragments: str) -> None:
    assert not report.pass_, report
    assert report.stage == "contract"
    assert report.violation_categories.get(category), report.violation_categories
    text = "\n".join(report.violations)
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in:\n{text}"


# required files ---------------------------------------------------------------------------------------------


def test_present_required_files_pass_and_the_report_has_the_spec_keys(out: Path) -> None:
    write(out / "build" / "result.json", '{"ok": true}')
    write(out / "notes.md", "# Notes\n")
    report = check(out, {"required": [{"path": "build/result.json", "kind": "json"}, {"path": "notes.md"}]})
    assert report.pass_ and report.stage == "contract" and report.skipped_semantic
    dumped = report.model_dump(mode="json")
    assert {"pass", "stage", "missing", "violations", "rationale", "metrics"} <= dumped.keys()
    assert dumped["metrics"] == {"files": 2, "bytes": 12 + 8}
    assert dumped["pass"] is True


def test_a_missing_required_file_is_listed_in_missing(out: Path) -> None:
    write(out / "other.txt", "x")
    report = check(out, {"required": [{"path": "build/result.json"}, {"path": "./other.txt"}]})
    assert not report.pass_ and report.stage == "contract"
    assert report.missing == ["build/result.json"]
    assert report.violation_categories == {"missing": 1}
    assert "1 required file(s) missing" in report.rationale


def test_a_required_pattern_needs_at_least_one_match_and_checks_each(out: Path) -> None:
    assert check(out, {"required": [{"path": "build/*.json"}]}).missing == ["build/*.json"]
    write(out / "build" / "a.json", "{}")
    write(out / "build" / "b.json", "{not json")
    report = check(out, {"required": [{"path": "build/*.json", "kind": "json"}]})
    assert_fails(report, "kind", "build/b.json is not valid JSON")
    assert report.missing == []


def test_a_required_directory_is_not_a_file(out: Path) -> None:
    (out / "build").mkdir()
    assert_fails(check(out, {"required": [{"path": "build"}]}), "kind", "build is not a regular file")


def test_a_missing_output_folder_is_a_failed_report(tmp_path: Path) -> None:
    report = check(tmp_path / "never-made", {"required": [{"path": "a.txt"}]})
    assert_fails(report, "missing", "does not exist")
    assert report.missing == ["a.txt"]


# kinds, checked by content ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "good", "bad", "message"),
    [
        (
            "r.json",
            "json",
            '{"a": [1, 2]}',
            '{"a": [1, 2}',
            "r.json is not valid JSON: Expecting ',' delimiter",
        ),
        ("r.yaml", "yaml", "a: 1\nb: [x]\n", "a: [1\nb: 2\n", "r.yaml is not valid YAML"),
        ("r.txt", "text", "plain words\n", b"\x00\x01\xff\xfe", "r.txt is not UTF-8 text"),
        ("r.md", "markdown", "# Title\n", b"\x89\x00\x00", "r.md is not UTF-8 markdown text"),
        ("r.csv", "csv", "a,b\n1,2\n", 'a,"b\n1,2', "r.csv is not valid CSV"),
        ("r.png", "png", b"\x89PNG\r\n\x1a\n....", b"GIF89a....", "r.png is not a png file"),
        ("r.pdf", "pdf", b"%PDF-1.7\n...", b"<html>", "r.pdf is not a pdf file"),
        ("r.jpg", "jpeg", b"\xff\xd8\xff\xe0....", b"\x89PNG\r\n\x1a\n", "r.jpg is not a jpeg file"),
    ],
)
def test_a_required_file_must_hold_its_declared_kind(
    out: Path, name: str, kind: str, good: str | bytes, bad: str | bytes, message: str
) -> None:
    rules = {"required": [{"path": name, "kind": kind}]}
    write(out / name, good)
    assert check(out, rules).pass_
    write(out / name, bad)
    assert_fails(check(out, rules), "kind", message)


def test_a_csv_with_a_nul_byte_is_not_text(out: Path) -> None:
    write(out / "r.csv", "a,b\n1,\x002\n")
    assert_fails(check(out, {}), "kind", "r.csv is not csv text (it contains NUL bytes)")


def test_a_kind_and_extension_mismatch_is_a_violation(out: Path) -> None:
    write(out / "r.yaml", "a: 1\n")
    assert_fails(
        check(out, {"required": [{"path": "r.yaml", "kind": "json"}]}),
        "kind",
        "r.yaml: declared kind json but its extension is for yaml",
    )


def test_text_kind_accepts_any_text_extension(out: Path) -> None:
    write(out / "r.json", '{"a": 1}')
    write(out / "run.log", "started\n")
    assert check(
        out, {"required": [{"path": "r.json", "kind": "text"}, {"path": "run.log", "kind": "text"}]}
    ).pass_


def test_every_produced_json_and_yaml_must_parse_even_when_not_required(out: Path) -> None:
    write(out / "extra" / "data.json", "[1, 2,")
    write(out / "extra" / "conf.yml", "key: [unclosed")
    report = check(out, {})
    assert_fails(report, "kind", "extra/data.json is not valid JSON", "extra/conf.yml is not valid YAML")
    assert report.violation_categories == {"kind": 2}


# JSON Schema ------------------------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "required": ["title", "slides"],
    "properties": {"title": {"type": "string"}, "slides": {"type": "array", "items": {"type": "integer"}}},
}


def test_a_json_file_matching_its_schema_passes_and_a_mismatch_names_the_place(out: Path) -> None:
    rules = {"required": [{"path": "r.json", "kind": "json", "schema": SCHEMA}]}
    write(out / "r.json", json.dumps({"title": "Q3", "slides": [1, 2]}))
    assert check(out, rules).pass_
    write(out / "r.json", json.dumps({"slides": [1, "two"]}))
    assert_fails(
        check(out, rules),
        "schema",
        "r.json: $: 'title' is a required property (schema inline schema)",
        "r.json: $.slides[1]: 'two' is not of type 'integer'",
    )


def test_a_schema_file_next_to_the_rules_is_applied_and_named(tmp_path: Path, out: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "r.schema.json").write_text(json.dumps(SCHEMA))
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text("required:\n  - {path: r.yaml, kind: yaml, schema: schemas/r.schema.json}\n")
    rules = ContractRules.from_yaml(rules_file)
    write(out / "r.yaml", "title: Q3\nslides: [1, 2]\n")
    assert validate_outputs(out, ExpectedOutputs(rules=rules)).pass_
    write(out / "r.yaml", "title: 3\nslides: []\n")
    report = validate_outputs(out, ExpectedOutputs(rules=rules))
    assert_fails(
        report, "schema", "r.yaml: $.title: 3 is not of type 'string' (schema schemas/r.schema.json)"
    )


def test_an_empty_yaml_file_is_still_checked_against_its_schema(out: Path) -> None:
    write(out / "r.yaml", "")
    assert_fails(
        check(out, {"required": [{"path": "r.yaml", "schema": SCHEMA}]}), "schema", "None is not of type"
    )


# sizes and counts -------------------------------------------------------------------------------------------


def test_max_file_bytes(out: Path) -> None:
    write(out / "small.txt", "x" * 10)
    assert check(out, {"limits": {"max_file_bytes": 10}}).pass_
    write(out / "big.txt", "x" * 11)
    assert_fails(
        check(out, {"limits": {"max_file_bytes": 10}}), "size", "big.txt is 11 bytes, max_file_bytes is 10"
    )


def test_max_total_bytes(out: Path) -> None:
    write(out / "a.txt", "x" * 60)
    write(out / "b.txt", "x" * 40)
    assert check(out, {"limits": {"max_total_bytes": 100}}).pass_
    assert_fails(
        check(out, {"limits": {"max_total_bytes": 99}}),
        "size",
        "100 bytes produced in total, max_total_bytes is 99",
    )


def test_max_files(out: Path) -> None:
    for number in range(3):
        write(out / f"f{number}.txt", "x")
    assert check(out, {"limits": {"max_files": 3}}).pass_
    assert_fails(check(out, {"limits": {"max_files": 2}}), "count", "3 files produced, max_files is 2")


def test_min_and_max_bytes_of_a_required_file(out: Path) -> None:
    write(out / "r.txt", "x" * 5)
    assert check(out, {"required": [{"path": "r.txt", "min_bytes": 5, "max_bytes": 5}]}).pass_
    assert_fails(
        check(out, {"required": [{"path": "r.txt", "min_bytes": 6}]}), "size", "r.txt is 5 bytes, at least 6"
    )
    assert_fails(
        check(out, {"required": [{"path": "r.txt", "max_bytes": 4}]}), "size", "r.txt is 5 bytes, at most 4"
    )


# extensions -------------------------------------------------------------------------------------------------


def test_allowed_extensions_apply_to_every_produced_file(out: Path) -> None:
    write(out / "a.md", "# a")
    write(out / "sub" / "b.JSON", "{}")
    rules = {"allowed_extensions": [".md", "json"]}
    assert check(out, rules).pass_
    write(out / "sub" / "run.exe", b"MZ")
    write(out / "Makefile", "all:")
    assert_fails(
        check(out, rules),
        "extension",
        "sub/run.exe: extension .exe is not allowed (allowed: .md, .json)",
        "Makefile: no extension is not allowed",
    )


# the output root boundary -----------------------------------------------------------------------------------


def test_a_symlinked_file_pointing_out_of_the_output_root_is_a_violation_and_not_read(
    tmp_path: Path, out: Path
) -> None:
    secret = write(tmp_path / "secret.txt", "TOP SECRET")
    (out / "build").mkdir()
    (out / "build" / "leak.txt").symlink_to(secret)
    report = check(out, {})
    assert_fails(report, "boundary", "build/leak.txt is a symlink pointing outside the output root")
    assert report.files == []
    assert "TOP SECRET" not in report.model_dump_json()


def test_a_symlinked_directory_pointing_out_is_a_violation(tmp_path: Path, out: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    write(tmp_path / "elsewhere" / "x.txt", "x")
    (out / "deep").mkdir()
    (out / "deep" / "escape").symlink_to(tmp_path / "elsewhere")
    report = check(out, {})
    assert_fails(report, "boundary", "deep/escape is a symlink pointing outside")
    assert report.metrics.files == 0


def test_a_symlink_inside_the_output_root_is_fine(out: Path) -> None:
    write(out / "real.txt", "hello")
    (out / "alias.txt").symlink_to(out / "real.txt")
    report = check(out, {"required": [{"path": "alias.txt", "kind": "text"}]})
    assert report.pass_, report.violations
    assert [e.path for e in report.files] == ["alias.txt", "real.txt"]


def test_a_dangling_symlink_is_a_violation(out: Path) -> None:
    (out / "gone.txt").symlink_to(out / "never-written.txt")
    assert_fails(check(out, {}), "boundary", "gone.txt is a dangling symlink")


def test_dotdot_in_a_required_path_is_a_violation(tmp_path: Path, out: Path) -> None:
    write(tmp_path / "outside.json", "{}")
    report = check(out, {"required": [{"path": "../outside.json"}]})
    assert_fails(report, "boundary", "required path ../outside.json leaves the output folder")


def test_the_output_root_scopes_what_counts_as_produced(out: Path) -> None:
    write(out / "build" / "out" / "result.json", "{}")
    write(out / "scratch.bin", b"\x00" * 50)
    rules = {
        "required": [{"path": "build/out/result.json", "kind": "json"}],
        "sandbox": {"output_root": "build/out"},
        "limits": {"max_files": 1},
    }
    report = check(out, rules)
    assert report.pass_, report.violations
    assert [e.path for e in report.files] == ["build/out/result.json"]


def test_a_required_file_outside_the_output_root_is_a_violation_unless_allowed(out: Path) -> None:
    write(out / "build" / "out" / "a.txt", "a")
    write(out / "notes.txt", "n")
    rules: dict[str, Any] = {"required": [{"path": "notes.txt"}], "sandbox": {"output_root": "build/out"}}
    assert_fails(
        check(out, rules), "boundary", "required file notes.txt lies outside the output root build/out"
    )
    rules["sandbox"]["deny_outside_output_root"] = False
    assert check(out, rules).pass_


def test_an_output_root_that_does_not_exist_is_reported(out: Path) -> None:
    assert_fails(
        check(out, {"sandbox": {"output_root": "build/out"}}), "missing", "output root build/out does not"
    )


# hashes -----------------------------------------------------------------------------------------------------


def test_every_file_gets_its_sha256_unless_hashing_is_disabled(out: Path) -> None:
    write(out / "a.txt", "alpha")
    write(out / "img.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    report = check(out, {})
    digests = {e.path: e.sha256 for e in report.files}
    assert digests == {
        "a.txt": hashlib.sha256(b"alpha").hexdigest(),
        "img.png": hashlib.sha256(b"\x89PNG\r\n\x1a\n" + bytes(range(256))).hexdigest(),
    }
    assert all(e.sha256 == "" for e in check(out, {"hash": {"enabled": False}}).files)


def test_an_output_root_that_is_a_symlink_pointing_out_is_a_violation(tmp_path: Path, out: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (out / "build").symlink_to(tmp_path / "elsewhere")
    report = check(out, {"sandbox": {"output_root": "build"}})
    assert_fails(report, "boundary", "output root build resolves outside")


def test_a_fifo_in_the_output_tree_is_reported_not_read(out: Path) -> None:
    os.mkfifo(out / "pipe.txt")
    assert_fails(check(out, {}), "boundary", "pipe.txt is not a regular file")


# the report ----------------------------------------------------------------------------------------------


def test_the_report_round_trips_through_json_with_the_pass_key(out: Path) -> None:
    write(out / "a.json", "{")
    report = check(out, {"required": [{"path": "b.json"}]})
    dumped = report.model_dump(mode="json", by_alias=True)
    assert dumped["pass"] is False and "pass_" not in dumped
    assert dumped["violation_categories"] == {"kind": 1, "missing": 1}
    assert ValidationReport.model_validate_json(report.model_dump_json()) == report


def test_symlink_loops_are_violations_not_crashes(out: Path) -> None:
    (out / "a").symlink_to(out / "b")
    (out / "b").symlink_to(out / "a")
    report = check(out, {"required": [{"path": "a"}]})
    assert_fails(
        report, "boundary", "a is a symlink loop", "b is a symlink loop", "required file a is a symlink loop"
    )
