"""The unified outputs validator: a deterministic contract stage, then the model's semantic stage."""

from orchestrator.validate.report import FileEntry, ValidationMetrics, ValidationReport, Violation
from orchestrator.validate.rules import (
    ContractRules,
    ExpectedOutputs,
    HashRule,
    Limits,
    RequiredFile,
    SandboxRule,
)
from orchestrator.validate.stats import ValidationStats
from orchestrator.validate.validator import artifacts_index, validate_outputs

__all__ = [
    "ContractRules",
    "ExpectedOutputs",
    "FileEntry",
    "HashRule",
    "Limits",
    "RequiredFile",
    "SandboxRule",
    "ValidationMetrics",
    "ValidationReport",
    "ValidationStats",
    "Violation",
    "artifacts_index",
    "validate_outputs",
]
