"""Office files are opened for real: broken packages and wrong slide counts fail the contract stage."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from validator_helpers import RecordingModel, make_deck, make_docx, make_xlsx, rezip_without, write

from orchestrator.validate import ContractRules, ExpectedOutputs, ValidationReport, validate_outputs


def check(out: Path, **required: object) -> ValidationReport:
    rules = ContractRules.from_mapping({"required": [required]} if required else {}, source="test")
    return validate_outputs(out, ExpectedOutputs(rules=rules))


def office_violations(report: ValidationReport) -> list[str]:
    assert not report.pass_ and report.stage == "contract"
    assert report.violation_categories.get("office"), report.violation_categories
    return report.violations


def test_a_five_slide_deck_passes_a_five_slide_rule(out: Path) -> None:
    make_deck(out / "build" / "deck.pptx", 5)
    report = check(out, path="build/deck.pptx", slides=5)
    assert report.pass_, report.violations
    assert report.files[0].kind == "pptx" and report.files[0].preview is None


def test_a_four_slide_deck_where_five_were_required_is_caught_by_the_contract(out: Path) -> None:
    make_deck(out / "build" / "deck.pptx", 4)
    model = RecordingModel()
    report = validate_outputs(
        out,
        ExpectedOutputs(
            description="a 5-slide deck on Q3 results",
            rules=ContractRules.from_mapping(
                {"required": [{"path": "build/deck.pptx", "kind": "pptx", "slides": 5}]}
            ),
        ),
        model=model,
    )
    assert office_violations(report) == ["build/deck.pptx has 4 slides, 5 required"]
    assert model.calls == []


def test_min_and_max_slides_bound_the_count(out: Path) -> None:
    make_deck(out / "deck.pptx", 3)
    assert check(out, path="deck.pptx", min_slides=3, max_slides=3).pass_
    assert office_violations(check(out, path="deck.pptx", min_slides=4)) == [
        "deck.pptx has 3 slides, at least 4 required (min_slides)"
    ]
    assert office_violations(check(out, path="deck.pptx", max_slides=2)) == [
        "deck.pptx has 3 slides, at most 2 allowed (max_slides)"
    ]


def test_random_bytes_named_pptx_are_not_a_zip_package(out: Path) -> None:
    write(out / "deck.pptx", os.urandom(2048))
    assert office_violations(check(out, path="deck.pptx", slides=5)) == [
        "deck.pptx is not a valid pptx file: not a zip package"
    ]


def test_a_truncated_pptx_is_caught(out: Path) -> None:
    deck = make_deck(out / "deck.pptx", 2)
    deck.write_bytes(deck.read_bytes()[: deck.stat().st_size // 2])
    [message] = office_violations(check(out, path="deck.pptx"))
    assert message.startswith("deck.pptx is not a valid pptx file")


def test_a_pptx_with_a_corrupted_member_is_caught(tmp_path: Path, out: Path) -> None:
    deck = make_deck(tmp_path / "deck.pptx", 2)
    with zipfile.ZipFile(deck) as package:
        info = package.getinfo("ppt/presentation.xml")
        start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data = bytearray(deck.read_bytes())
    for offset in range(start, start + min(info.compress_size, 64)):
        data[offset] ^= 0xFF
    write(out / "deck.pptx", bytes(data))
    [message] = office_violations(check(out, path="deck.pptx"))
    assert message.startswith("deck.pptx is not a valid pptx file"), message


def test_a_pptx_zip_without_content_types_is_caught(tmp_path: Path, out: Path) -> None:
    rezip_without(make_deck(tmp_path / "deck.pptx", 2), out / "deck.pptx", "[Content_Types].xml")
    assert office_violations(check(out, path="deck.pptx")) == [
        "deck.pptx is not a valid pptx file: [Content_Types].xml is missing"
    ]


def test_a_pptx_zip_without_its_main_part_is_caught(tmp_path: Path, out: Path) -> None:
    rezip_without(make_deck(tmp_path / "deck.pptx", 2), out / "deck.pptx", "ppt/presentation.xml")
    assert office_violations(check(out, path="deck.pptx")) == [
        "deck.pptx is not a valid pptx file: main part ppt/presentation.xml is missing"
    ]


def test_a_word_document_renamed_pptx_does_not_open_as_a_presentation(tmp_path: Path, out: Path) -> None:
    (out / "deck.pptx").write_bytes(make_docx(tmp_path / "doc.docx").read_bytes())
    [message] = office_violations(check(out, path="deck.pptx"))
    assert message.startswith("deck.pptx does not open as a PowerPoint presentation")


def test_a_broken_office_file_fails_even_when_not_required(out: Path) -> None:
    write(out / "extra.pptx", b"PK\x03\x04 not really")
    assert office_violations(check(out))[0].startswith("extra.pptx is not a valid pptx file")


def test_docx_and_xlsx_that_open_pass(out: Path) -> None:
    make_docx(out / "report.docx")
    make_xlsx(out / "numbers.xlsx")
    report = check(out, path="report.docx", kind="docx")
    assert report.pass_, report.violations
    assert {e.kind for e in report.files} == {"docx", "xlsx"}


def test_corrupt_docx_and_xlsx_are_caught(tmp_path: Path, out: Path) -> None:
    rezip_without(make_docx(tmp_path / "r.docx"), out / "report.docx", "word/document.xml")
    write(out / "numbers.xlsx", os.urandom(512))
    violations = office_violations(check(out))
    assert violations == [
        "numbers.xlsx is not a valid xlsx file: not a zip package",
        "report.docx is not a valid docx file: main part word/document.xml is missing",
    ]
