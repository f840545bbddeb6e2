"""Validation counts over the runs of a job: pass rate and violations by category."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, computed_field

from orchestrator.validate.report import ValidationReport


class ValidationStats(BaseModel):
    runs: int = 0
    passed: int = 0
    failed_by_stage: dict[str, int] = {}
    """Failed reports counted by the stage that failed them (``contract`` or ``semantic``)."""
    violations_by_category: dict[str, int] = {}
    semantic_runs: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pass_rate(self) -> float:
        return round(self.passed / self.runs, 4) if self.runs else 0.0

    def add(self, report: ValidationReport) -> None:
        """Count one report."""
        self.runs += 1
        if report.pass_:
            self.passed += 1
        else:
            self.failed_by_stage[report.stage] = self.failed_by_stage.get(report.stage, 0) + 1
        if report.stage == "semantic":
            self.semantic_runs += 1
        for category, count in report.violation_categories.items():
            self.violations_by_category[category] = self.violations_by_category.get(category, 0) + count
        self.tokens_in += report.tokens_in
        self.tokens_out += report.tokens_out

    def merge(self, other: ValidationStats) -> None:
        """Add the counts of ``other`` (e.g. one skill's validations into the goal's)."""
        self.runs += other.runs
        self.passed += other.passed
        self.semantic_runs += other.semantic_runs
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        for mine, theirs in ((self.failed_by_stage, other.failed_by_stage),
                             (self.violations_by_category, other.violations_by_category)):
            for key, count in theirs.items():
                mine[key] = mine.get(key, 0) + count

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
