"""Stage 2, the semantic check: only after a passing contract; a structured verdict; one repair round."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from PIL import Image
from validator_helpers import RecordingModel, make_deck, verdict, write

from orchestrator.errors import ModelError
from orchestrator.llm.image_input import ImageLimits
from orchestrator.validate import ContractRules, ExpectedOutputs, ValidationStats, validate_outputs
from orchestrator.validate.semantic_stage import MAX_INDEX_ENTRIES, index_lines, parse_verdict

EXPECTED = ExpectedOutputs(
    description="A summary in Markdown that names the Q3 revenue.",
    rules=ContractRules.from_mapping({"required": [{"path": "summary.md", "kind": "markdown"}]}),
)


def test_a_failed_contract_never_calls_the_model(out: Path) -> None:
    model = RecordingModel(verdict(True))
    report = validate_outputs(out, EXPECTED, model=model)
    assert not report.pass_ and report.stage == "contract" and report.missing == ["summary.md"]
    assert model.calls == []
    assert report.tokens_in == report.tokens_out == 0
    assert "semantic check not run" in report.rationale


def test_qa_mode_off_checks_the_contract_only(out: Path) -> None:
    write(out / "summary.md", "Q3 revenue: 12M")
    model = RecordingModel()
    report = validate_outputs(out, EXPECTED, model=model, qa_mode="off")
    assert report.pass_ and report.stage == "contract" and report.skipped_semantic
    assert "qa mode is off" in report.rationale
    assert model.calls == []


def test_a_passing_semantic_verdict_gives_a_semantic_pass_with_usage(out: Path) -> None:
    write(out / "summary.md", "# Q3\nRevenue was 12M.")
    model = RecordingModel(verdict(True, rationale="The summary names the Q3 revenue."), prompt_tokens=321)
    report = validate_outputs(out, EXPECTED, model=model, qa_mode="step")
    assert report.pass_ and report.stage == "semantic" and not report.skipped_semantic
    assert report.rationale == "The summary names the Q3 revenue."
    assert (report.tokens_in, report.tokens_out) == (321, 20)
    assert report.metrics.files == 1
    [call] = model.calls
    assert call["purpose"] == "semantic" and call["json_response"] is True and call["tools"] == []
    system, user = call["messages"]  # type: ignore[misc]
    assert system.role == "system" and "strict QA reviewer" in system.content
    assert "A summary in Markdown that names the Q3 revenue." in user.content
    assert '"path": "summary.md"' in user.content and "Revenue was 12M." in user.content


def test_a_failing_semantic_verdict_reports_its_missing_items_and_violations(out: Path) -> None:
    write(out / "summary.md", "# Q3\nNo figures here.")
    model = RecordingModel(
        verdict(
            False,
            missing=["the Q3 revenue figure"],
            violations=["summary.md: does not name the revenue"],
            rationale="Revenue is not named.",
        )
    )
    report = validate_outputs(out, EXPECTED, model=model)
    assert not report.pass_ and report.stage == "semantic"
    assert report.missing == ["the Q3 revenue figure"]
    assert report.violations == ["summary.md: does not name the revenue"]
    assert report.violation_categories == {"missing": 1, "semantic": 1}


def test_a_malformed_verdict_is_retried_once_with_the_reason(out: Path) -> None:
    write(out / "summary.md", "Revenue 12M")
    model = RecordingModel("Looks fine to me!", "```json\n" + verdict(True) + "\n```")
    report = validate_outputs(out, EXPECTED, model=model)
    assert report.pass_ and report.stage == "semantic"
    assert len(model.calls) == 2
    retry = model.calls[1]["messages"]
    assert [m.role for m in retry] == ["system", "user", "assistant", "user"]  # type: ignore[attr-defined]
    assert retry[2].content == "Looks fine to me!"  # type: ignore[index]
    assert "not a valid verdict: the answer is not JSON" in retry[3].content  # type: ignore[index]
    assert report.tokens_in == 200 and report.tokens_out == 40


def test_a_verdict_still_malformed_after_the_retry_is_a_failed_report(out: Path) -> None:
    write(out / "summary.md", "Revenue 12M")
    model = RecordingModel('{"pass": "yes"}', '{"verdict": true}')
    report = validate_outputs(out, EXPECTED, model=model)
    assert len(model.calls) == 2
    assert not report.pass_ and report.stage == "semantic"
    [violation] = report.violations
    assert violation.startswith(
        "semantic verdict malformed: the verdict does not fit the schema (pass: Field required"
    )
    assert "after 2 attempts" in report.rationale
    assert report.violation_categories == {"semantic": 1}


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (None, "the answer was empty"),
        ("[]", "JSON list, not an object"),
        ('{"pass": "yes", "rationale": "x"}', "pass: Input should be a valid boolean"),
        ('{"pass": true}', "rationale: Field required"),
        ('{"pass": true, "missing": ["x"], "rationale": "r"}', '"pass" is true but "missing" is not empty'),
    ],
)
def test_malformed_verdicts_are_explained(answer: str | None, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        parse_verdict(answer)


def test_extra_keys_in_a_verdict_are_ignored() -> None:
    parsed = parse_verdict('{"pass": false, "stage": "semantic", "violations": ["v"], "rationale": "r"}')
    assert not parsed.pass_ and parsed.violations == ["v"]


def test_a_model_error_reaches_the_caller(out: Path) -> None:
    write(out / "summary.md", "Revenue 12M")

    class Unreachable(RecordingModel):
        def complete(self, messages, **kwargs):  # type: ignore[no-untyped-def]
            raise ModelError("connection refused", where="model", retryable=True)

    with pytest.raises(ModelError):
        validate_outputs(out, EXPECTED, model=Unreachable())


def test_the_model_never_sees_binary_bodies_or_more_than_the_preview(out: Path) -> None:
    tail = "TAIL-OF-THE-LONG-FILE"
    write(out / "summary.md", "Revenue 12M " + "x" * 1000 + tail)
    deck = make_deck(out / "deck.pptx", 2)
    model = RecordingModel(verdict(True))
    validate_outputs(out, EXPECTED, model=model)
    sent = model.sent_text()
    assert tail not in sent
    assert "Slide 1" not in sent and "ppt/slides" not in sent
    deck_line = next(line for line in sent.splitlines() if '"deck.pptx"' in line)
    entry = json.loads(deck_line)
    assert entry["kind"] == "pptx" and entry["size"] == deck.stat().st_size and len(entry["sha256"]) == 64
    assert "preview" not in entry


def test_the_index_sent_to_the_model_is_capped(out: Path) -> None:
    for number in range(MAX_INDEX_ENTRIES + 5):
        write(out / f"f{number:03}.txt", "x")
    from orchestrator.validate import artifacts_index

    lines = index_lines(artifacts_index(out)).splitlines()
    assert len(lines) == MAX_INDEX_ENTRIES + 1
    assert json.loads(lines[-1]) == {"omitted_entries": 5}


def test_stats_count_pass_rate_and_violations_by_category(out: Path) -> None:
    stats = ValidationStats()
    stats.add(validate_outputs(out, EXPECTED))  # contract: missing
    write(out / "summary.md", "Revenue 12M")
    write(out / "bad.json", "{")
    stats.add(validate_outputs(out, EXPECTED))  # contract: kind
    (out / "bad.json").unlink()
    stats.add(validate_outputs(out, EXPECTED, model=RecordingModel(verdict(False, violations=["a", "b"]))))
    stats.add(validate_outputs(out, EXPECTED, model=RecordingModel(verdict(True))))
    data = stats.as_dict()
    assert data["runs"] == 4 and data["passed"] == 1 and data["pass_rate"] == 0.25
    assert data["failed_by_stage"] == {"contract": 2, "semantic": 1}
    assert data["violations_by_category"] == {"missing": 1, "kind": 1, "semantic": 2}
    assert data["semantic_runs"] == 2 and data["tokens_in"] == 200


def test_the_contact_sheets_of_office_outputs_reach_the_model_as_image_parts_only_when_asked(out):
    make_deck(out / "deck.pptx", 2)
    buffer = io.BytesIO()
    Image.new("RGB", (820, 250), "white").save(buffer, "PNG")
    write(out / ".thumbnails" / "deck.pptx" / "contact.png", buffer.getvalue())
    write(out / ".thumbnails" / "other.pptx" / "contact.png", b"\x89PNG\r\n\x1a\n but not an image")
    model = RecordingModel(verdict(True))
    report = validate_outputs(out, ExpectedOutputs(description="a 2-slide deck"), model=model, images=ImageLimits())
    assert report.pass_
    [request] = [m for m in model.calls[0]["messages"] if m.role == "user"]
    assert [part.url[:22] for part in request.images] == ["data:image/png;base64,"]  # the broken sheet is left out
    assert ".thumbnails/deck.pptx/contact.png" in (request.content or "").split("Rendered pages follow")[1]
    blind = RecordingModel(verdict(True))
    validate_outputs(out, ExpectedOutputs(description="a 2-slide deck"), model=blind)
    assert all(not m.images for m in blind.calls[0]["messages"]) and "Rendered pages" not in blind.sent_text()
