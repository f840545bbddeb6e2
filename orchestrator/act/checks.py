"""The ``validate`` tool's schema check over untrusted data, run in a bounded child process.

A file from ``build/`` (or the model's own object) may be a YAML alias bomb or nested past any sane depth; parsing
and checking it against a JSON Schema therefore runs under :func:`orchestrator.isolation.run_bounded`, so the Act's
time budget holds whatever the data is.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import yaml

from orchestrator.isolation import run_bounded

CHECK_MEMORY_MB = 512
CHECK_TIMEOUT_S = 10.0
MAX_VIOLATIONS = 20


def schema_violations(raw: bytes | None, yaml_text: bool, instance: Any, schema: Any) -> list[str]:
    """Violations of ``schema`` by ``raw`` (parsed as YAML or JSON) or else ``instance``; raises on bad input."""
    if raw is not None:
        instance = yaml.safe_load(raw.decode("utf-8")) if yaml_text else json.loads(raw)
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    errors = sorted(validator(schema).iter_errors(instance), key=str)
    return [
        f"{'/'.join(map(str, err.absolute_path)) or '(root)'}: {err.message[:500]}" for err in errors[:MAX_VIOLATIONS]
    ]


def schema_violations_bounded(
    raw: bytes | None, yaml_text: bool, instance: Any, schema: Any, *, timeout_s: float = CHECK_TIMEOUT_S
) -> list[str]:
    """:func:`schema_violations` in a child process (memory and time bounds); raises ``Bounded``."""
    return run_bounded(
        schema_violations, raw, yaml_text, instance, schema,
        memory_mb=CHECK_MEMORY_MB, timeout_s=timeout_s, what="the schema check",
    )
