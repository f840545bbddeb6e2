"""The one validation report, and the entries of the artifacts index it carries."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PREVIEW_CHARS = 400

Category = Literal[
    "missing", "kind", "schema", "size", "count", "extension", "boundary", "office", "layout", "semantic"
]


class FileEntry(BaseModel):
    """One produced file. ``preview``: at most 400 characters of a text file, ``None`` for binaries."""

    model_config = ConfigDict(frozen=True)

    name: str
    path: str
    """Relative to the validated folder, POSIX separators."""
    size: int
    kind: str
    sha256: str
    """Empty when hashing is disabled by the rules."""
    preview: str | None = Field(None, max_length=PREVIEW_CHARS)


class Violation(BaseModel):
    model_config = ConfigDict(frozen=True)

    category: Category
    message: str


class ValidationMetrics(BaseModel):
    files: int = 0
    bytes: int = 0


class ValidationReport(BaseModel):
    """``model_dump()`` gives the SPEC keys: ``pass``, ``stage``, ``missing``, ``violations``, ``rationale``,
    ``metrics`` — plus the index (``files``), usage and the violation counts by category."""

    model_config = ConfigDict(serialize_by_alias=True, validate_by_name=True, validate_by_alias=True)

    pass_: bool = Field(alias="pass")
    stage: Literal["contract", "semantic"]
    missing: list[str] = []
    violations: list[str] = []
    warnings: list[str] = []
    """Layout findings that are warnings only (``qa.layout.rules``); they never fail the report."""
    rationale: str = ""
    metrics: ValidationMetrics = ValidationMetrics()
    files: list[FileEntry] = []
    violation_categories: dict[str, int] = {}
    tokens_in: int = 0
    tokens_out: int = 0
    model_calls: int = 0
    """Model requests of the semantic check (a reply from the response cache is none)."""
    response_cache_hits: int = 0
    cached_tokens: int = 0
    """Prompt tokens of the semantic check the provider served from its own prompt cache."""
    duration_ms: int = 0
    skipped_semantic: bool = False

    @property
    def passed(self) -> bool:
        return self.pass_
