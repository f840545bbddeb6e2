"""The unified validator: one entry point, two stages, one report.

Stage 1 (contract) never calls a model. Only when it passes, a model is given and ``qa_mode`` is not ``off``,
stage 2 (semantic) asks the model for a verdict. When to validate (``final``: once at the end, ``step``: after
each artifact) is the caller's decision; the mode is accepted here for the logs.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Literal

from orchestrator.config import LayoutSettings
from orchestrator.llm.image_input import ImageLimits, ImageRefused, ViewedImage, check_image
from orchestrator.llm.interface import ChatModel
from orchestrator.logs import get_logger
from orchestrator.validate.contract import ContractOutcome, check_contract
from orchestrator.validate.output_index import artifacts_index
from orchestrator.validate.report import FileEntry, ValidationMetrics, ValidationReport, Violation
from orchestrator.validate.rules import ExpectedOutputs
from orchestrator.validate.semantic_stage import SemanticOutcome, semantic_check

__all__ = [
    "FileEntry",
    "ValidationMetrics",
    "ValidationReport",
    "artifacts_index",
    "validate_outputs",
]

QAMode = Literal["final", "step", "off"]
_LOGGED_FAILURES = 20
# Contact sheets of the Office outputs, as the Act's thumbnails write them (orchestrator/sandbox/thumbnails.py).
SHEET_PREFIX, SHEET_NAME = ".thumbnails/", "/contact.png"
MAX_SHEETS = 4

log = get_logger("orchestrator.validate")


def validate_outputs(
    out_dir: Path,
    expected: ExpectedOutputs,
    *,
    model: ChatModel | None = None,
    qa_mode: QAMode = "final",
    schema_base: Path | None = None,
    layout: LayoutSettings | None = None,
    brand: Path | None = None,
    images: ImageLimits | None = None,
) -> ValidationReport:
    """Validate ``out_dir`` against ``expected``: the contract, then (if it passed) the semantic check.

    ``schema_base`` resolves schema paths that the rules still hold unresolved. ``layout`` is the layout check's
    rule set (default: the defaults) and ``brand`` a brand.json the Office files must keep to. With ``images``
    the semantic check also receives the contact sheets of the Office files (``.thumbnails/*/contact.png``) as
    image parts, each checked against those limits. Raises :class:`~orchestrator.errors.ValidationRulesError` for
    unusable rules and :class:`~orchestrator.errors.ModelError` when the model cannot be reached; a failed check
    is a report.
    """
    started = time.perf_counter()
    contract = check_contract(out_dir, expected.rules, schema_base=schema_base, layout=layout, brand=brand)
    contract_ms = _ms_since(started)
    _log_contract(out_dir, contract, contract_ms, qa_mode)
    if not contract.passed:
        return _contract_report(contract, contract_ms, passed=False, rationale=_contract_failed(contract))
    if model is None or qa_mode == "off":
        why = "qa mode is off" if qa_mode == "off" else "no model was given"
        rationale = f"contract passed ({_size_text(contract)}); semantic check not run: {why}"
        return _contract_report(contract, contract_ms, passed=True, rationale=rationale, skipped=True)
    semantic = semantic_check(model, expected, contract.files, images=_sheets(out_dir, contract, images))
    report = _semantic_report(contract, semantic, _ms_since(started))
    _log_semantic(out_dir, model, semantic, report, qa_mode)
    return report


def _sheets(out_dir: Path, contract: ContractOutcome, limits: ImageLimits | None) -> list[ViewedImage]:
    """The contact sheets among the indexed files that pass the image checks (at most ``MAX_SHEETS``)."""
    if limits is None:
        return []
    sheets: list[ViewedImage] = []
    for entry in contract.files:
        is_sheet = entry.path.startswith(SHEET_PREFIX) and entry.path.endswith(SHEET_NAME)
        if not is_sheet or entry.size > limits.max_bytes:
            continue
        try:
            with (out_dir / entry.path).open("rb") as handle:
                sheets.append(check_image(entry.path, handle.read(limits.max_bytes + 1), limits))
        except (OSError, ImageRefused) as e:
            log.info("validate.sheet_skipped", path=entry.path, why=str(e)[:200])
        if len(sheets) >= MAX_SHEETS:
            break
    return sheets


def _contract_report(
    contract: ContractOutcome, duration_ms: int, *, passed: bool, rationale: str, skipped: bool = False
) -> ValidationReport:
    return ValidationReport.model_validate(
        {
            "pass": passed,
            "stage": "contract",
            "missing": list(contract.missing),
            "violations": [v.message for v in contract.violations],
            "warnings": list(contract.warnings),
            "rationale": rationale,
            "metrics": contract.metrics,
            "files": contract.files,
            "violation_categories": _categories(contract.violations, len(contract.missing)),
            "duration_ms": duration_ms,
            "skipped_semantic": skipped,
        }
    )


def _semantic_report(
    contract: ContractOutcome, semantic: SemanticOutcome, duration_ms: int
) -> ValidationReport:
    verdict = semantic.verdict
    if verdict is None:
        violations = [
            Violation(category="semantic", message=f"semantic verdict malformed: {semantic.problem}")
        ]
        missing: list[str] = []
        passed = False
        rationale = f"the model's verdict stayed malformed after {semantic.attempts} attempts"
    else:
        violations = [Violation(category="semantic", message=text) for text in verdict.violations]
        missing = list(verdict.missing)
        passed = verdict.pass_
        rationale = verdict.rationale
    return ValidationReport.model_validate(
        {
            "pass": passed,
            "stage": "semantic",
            "missing": missing,
            "violations": [v.message for v in violations],
            "warnings": list(contract.warnings),
            "rationale": rationale,
            "metrics": contract.metrics,
            "files": contract.files,
            "violation_categories": _categories(violations, len(missing)),
            "tokens_in": semantic.spent.tokens_in,
            "tokens_out": semantic.spent.tokens_out,
            "model_calls": semantic.spent.model_calls,
            "response_cache_hits": semantic.spent.cache_hits,
            "cached_tokens": semantic.spent.cached_tokens,
            "duration_ms": duration_ms,
        }
    )


def _categories(violations: list[Violation], missing: int) -> dict[str, int]:
    counts = Counter(v.category for v in violations)
    if missing:
        counts["missing"] += missing
    return dict(sorted(counts.items()))


def _contract_failed(contract: ContractOutcome) -> str:
    parts = []
    if contract.missing:
        parts.append(f"{len(contract.missing)} required file(s) missing")
    if contract.violations:
        parts.append(f"{len(contract.violations)} violation(s)")
    return f"contract failed: {', '.join(parts)} ({_size_text(contract)}); semantic check not run"


def _size_text(contract: ContractOutcome) -> str:
    return f"{contract.metrics.files} files, {contract.metrics.bytes} bytes"


def _ms_since(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def _log_contract(out_dir: Path, contract: ContractOutcome, duration_ms: int, qa_mode: str) -> None:
    failures = [f"missing: {path}" for path in contract.missing] + [v.message for v in contract.violations]
    log.info(
        "validate.contract",
        out_dir=str(out_dir),
        qa_mode=qa_mode,
        result="pass" if contract.passed else "fail",
        failures=failures[:_LOGGED_FAILURES],
        failure_count=len(failures),
        categories=_categories(contract.violations, len(contract.missing)),
        boundary_violation=any(v.category == "boundary" for v in contract.violations),
        files=contract.metrics.files,
        bytes=contract.metrics.bytes,
        duration_ms=duration_ms,
    )


def _log_semantic(
    out_dir: Path, model: ChatModel, semantic: SemanticOutcome, report: ValidationReport, qa_mode: str
) -> None:
    log.info(
        "validate.semantic",
        out_dir=str(out_dir),
        qa_mode=qa_mode,
        model=getattr(model, "name", ""),
        result="pass" if report.pass_ else "fail",
        malformed=semantic.verdict is None,
        attempts=semantic.attempts,
        failures=(report.missing + report.violations)[:_LOGGED_FAILURES],
        rationale=report.rationale[:300],
        files=report.metrics.files,
        bytes=report.metrics.bytes,
        tokens_in=semantic.spent.tokens_in,
        tokens_out=semantic.spent.tokens_out,
        latency_ms=semantic.latency_ms,
    )
