"""The unified outputs validator: a deterministic contract stage, then the model's semantic stage.

The names below are imported on first use: the bounded child that parses outputs (see ``contract.py``) imports
this package too, and must not pay for the validator's logging and model machinery on every start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    "FileEntry": "report",
    "ValidationMetrics": "report",
    "ValidationReport": "report",
    "Violation": "report",
    "ContractRules": "rules",
    "ExpectedOutputs": "rules",
    "HashRule": "rules",
    "Limits": "rules",
    "RequiredFile": "rules",
    "SandboxRule": "rules",
    "ValidationStats": "stats",
    "artifacts_index": "validator",
    "validate_outputs": "validator",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


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
