"""Stage 1, the contract: deterministic checks of an output folder against :class:`ContractRules` (no model).

Checks: required files exist and hold their declared kind (by content, and the extension agrees); every
JSON/YAML parses and required ones match their JSON Schema; Office files open (slide counts for a pptx);
sizes and counts; allowed extensions of every produced file; every path inside the output root; sha256 of
every file.

Reading a file's content (Office packages, JSON/YAML parsing and schema checks, CSV) is untrusted work: it runs
in a child process with memory and time bounds (:mod:`orchestrator.isolation`), so a small file that expands to
gigabytes, or a YAML alias bomb, fails the contract with a violation instead of eating the host. Only problems
and counts come back, never the parsed data. Text is streamed; JSON/YAML larger than ``MAX_PARSE_BYTES`` is
reported, not parsed.
"""

from __future__ import annotations

import codecs
import csv
import json
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from jsonschema.validators import validator_for
from pydantic import BaseModel

from orchestrator.config import LayoutSettings
from orchestrator.errors import ValidationRulesError
from orchestrator.isolation import Bounded, run_bounded
from orchestrator.validate.layout import Finding, check_layout
from orchestrator.validate.office import check_office
from orchestrator.validate.output_index import build_entry, resolve_or_none, scan_outputs
from orchestrator.validate.report import Category, FileEntry, ValidationMetrics, Violation
from orchestrator.validate.rules import (
    OFFICE_KINDS,
    TEXT_KINDS,
    ContractRules,
    RequiredFile,
    kind_conflict,
    kind_of_extension,
    yaml_problem,
)

MAX_SCHEMA_ERRORS = 10
MAX_PARSE_BYTES = 32 * 1024 * 1024
CHECK_MEMORY_MB = 1024
CHECK_TIMEOUT_S = 30.0
_STREAM_BLOCK = 1 << 16
_MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "jpeg": b"\xff\xd8\xff", "pdf": b"%PDF-"}


class ContractOutcome(BaseModel):
    missing: list[str] = []
    violations: list[Violation] = []
    warnings: list[str] = []
    """Layout findings whose rule is a warning (``qa.layout.rules``): reported, never failing the contract."""
    files: list[FileEntry] = []
    metrics: ValidationMetrics = ValidationMetrics()

    @property
    def passed(self) -> bool:
        return not self.missing and not self.violations


class _Content(BaseModel):
    """What reading one file as one kind found: problems, schema errors (formatted, sorted) and the slide count."""

    problems: list[str] = []
    slides: int | None = None
    schema_errors: list[str] = []
    schema_error_count: int = 0
    rules_error: str | None = None
    findings: list[Finding] = []


class LayoutArgs(BaseModel):
    """What the layout check of Office files needs in the bounded child: the rule set and the brand file."""

    settings: dict[str, Any] = {}
    brand: str | None = None


def check_contract(
    out_dir: Path,
    rules: ContractRules,
    *,
    schema_base: Path | None = None,
    layout: LayoutSettings | None = None,
    brand: Path | None = None,
) -> ContractOutcome:
    """Run every contract rule over ``out_dir``. Raises :class:`ValidationRulesError` for unusable rules.

    ``layout`` (default: the default rule set) drives the layout check of Office files; ``brand`` is a brand.json
    whose fonts and colours they must keep to.
    """
    settings = layout or LayoutSettings()
    args = LayoutArgs(settings=settings.model_dump(), brand=str(brand) if brand else None) if settings.enabled else None
    return _Checker(out_dir, _resolved(rules, schema_base), args).run()


def _resolved(rules: ContractRules, schema_base: Path | None) -> ContractRules:
    if rules.unresolved_schemas and schema_base is None:
        raise ValidationRulesError(
            f"schema paths {rules.unresolved_schemas} cannot be resolved: no schema folder given",
            where="validate:rules",
            next_step="load the rules with ContractRules.from_yaml/from_mapping(schema_base=...) "
            "or pass schema_base to validate_outputs",
        )
    return rules.resolve_schemas(schema_base, source="expected outputs")


class _Checker:
    def __init__(self, out_dir: Path, rules: ContractRules, layout: LayoutArgs | None = None) -> None:
        self.out_dir = out_dir
        self.layout = layout
        self.base = resolve_or_none(out_dir) or out_dir
        self.rules = rules
        root = resolve_or_none(self.base / rules.sandbox.output_root) or self.base / rules.sandbox.output_root
        self.boundary = root if rules.sandbox.deny_outside_output_root else self.base
        self.outcome = ContractOutcome()
        self._content: dict[tuple[str, str, str], _Content] = {}

    def run(self) -> ContractOutcome:
        if not self.out_dir.is_dir():
            self._flag("missing", f"output folder {self.out_dir} does not exist")
            self.outcome.missing = [r.path for r in self.rules.required]
            return self.outcome
        scan = scan_outputs(
            self.out_dir,
            self.rules.sandbox.output_root,
            boundary=self.boundary,
            hash_files=self.rules.hash.enabled,
        )
        self.outcome.violations.extend(scan.problems)
        if not scan.root_exists and not scan.problems:
            self._flag(
                "missing", f"output root {self.rules.sandbox.output_root} does not exist in {self.out_dir}"
            )
        self.outcome.files = scan.entries
        self.outcome.metrics = ValidationMetrics(
            files=len(scan.entries), bytes=sum(e.size for e in scan.entries)
        )
        for req in self.rules.required:
            for entry in self._required_entries(req):
                self._check_required(entry, req)
        for entry in scan.entries:
            self._check_produced(entry)
        self._check_totals()
        return self.outcome

    def _flag(self, category: Category, message: str) -> None:
        violation = Violation(category=category, message=message)
        if violation not in self.outcome.violations:
            self.outcome.violations.append(violation)

    def _missing(self, path: str) -> None:
        if path not in self.outcome.missing:
            self.outcome.missing.append(path)

    # required files --------------------------------------------------------------------------------------

    def _required_entries(self, req: RequiredFile) -> list[FileEntry]:
        posix = PurePosixPath(req.path.replace("\\", "/"))
        if posix.is_absolute() or ".." in posix.parts:
            self._flag("boundary", f"required path {req.path} leaves the output folder (absolute or '..')")
            return []
        rel = posix.as_posix()
        if req.is_pattern:
            matches = [e for e in self.outcome.files if fnmatchcase(e.path, rel)]
            if not matches:
                self._missing(req.path)
            return matches
        for entry in self.outcome.files:
            if entry.path == rel:
                return [entry]
        return self._required_outside_index(req, rel)

    def _required_outside_index(self, req: RequiredFile, rel: str) -> list[FileEntry]:
        """A required path the scan did not index: missing, refused, or (when allowed) outside the root."""
        path = self.base / rel
        resolved = resolve_or_none(path)
        if resolved is None:
            self._flag("boundary", f"required file {rel} is a symlink loop")
            return []
        if not resolved.is_relative_to(self.boundary):
            how = "is a symlink pointing" if path.is_symlink() else "lies"
            where = (
                f"the output root {self.rules.sandbox.output_root}"
                if self.rules.sandbox.deny_outside_output_root
                else f"the output folder {self.out_dir}"
            )
            self._flag("boundary", f"required file {rel} {how} outside {where}")
            return []
        if not path.exists():
            self._missing(req.path)
            return []
        if not path.is_file():
            self._flag("kind", f"required file {rel} is not a regular file")
            return []
        return [build_entry(path, rel, path.stat().st_size, hash_files=self.rules.hash.enabled)]

    def _check_required(self, entry: FileEntry, req: RequiredFile) -> None:
        declared = req.kind
        conflict = kind_conflict(declared, entry.path)
        if conflict is not None:
            self._flag("kind", f"{entry.path}: declared kind {declared} but its extension is for {conflict}")
        kind = kind_of_extension(entry.path) if declared == "any" else declared
        schema = req.schema_ if isinstance(req.schema_, dict) and kind in ("json", "yaml") else None
        content = self._read_as(entry, kind, schema) if kind else _Content()
        if req.min_bytes is not None and entry.size < req.min_bytes:
            self._flag(
                "size", f"{entry.path} is {entry.size} bytes, at least {req.min_bytes} required (min_bytes)"
            )
        if req.max_bytes is not None and entry.size > req.max_bytes:
            self._flag(
                "size", f"{entry.path} is {entry.size} bytes, at most {req.max_bytes} allowed (max_bytes)"
            )
        if req.schema_ is not None and not content.problems:
            self._check_schema(entry, req, content, kind)
        if content.slides is not None:
            self._check_slides(entry, req, content.slides)

    def _check_schema(self, entry: FileEntry, req: RequiredFile, content: _Content, kind: str | None) -> None:
        if kind not in ("json", "yaml"):
            self._flag(
                "schema", f"{entry.path}: schema {req.schema_label} needs a json or yaml file, not {kind}"
            )
            return
        if content.rules_error is not None:
            raise ValidationRulesError(
                f"schema {req.schema_label} for {entry.path} cannot be applied: {content.rules_error}",
                where="validate:rules",
                next_step="make the schema self-contained (no external $ref)",
            )
        for error in content.schema_errors:
            self._flag("schema", f"{entry.path}: {error} (schema {req.schema_label})")
        if content.schema_error_count > MAX_SCHEMA_ERRORS:
            self._flag("schema", f"{entry.path}: {content.schema_error_count - MAX_SCHEMA_ERRORS} more schema errors")

    def _check_slides(self, entry: FileEntry, req: RequiredFile, slides: int) -> None:
        found = f"{entry.path} has {slides} slide{'s' if slides != 1 else ''}"
        if req.slides is not None and slides != req.slides:
            self._flag("office", f"{found}, {req.slides} required")
        if req.min_slides is not None and slides < req.min_slides:
            self._flag("office", f"{found}, at least {req.min_slides} required (min_slides)")
        if req.max_slides is not None and slides > req.max_slides:
            self._flag("office", f"{found}, at most {req.max_slides} allowed (max_slides)")

    # every produced file ---------------------------------------------------------------------------------

    def _check_produced(self, entry: FileEntry) -> None:
        limits = self.rules.limits
        if limits.max_file_bytes is not None and entry.size > limits.max_file_bytes:
            self._flag(
                "size", f"{entry.path} is {entry.size} bytes, max_file_bytes is {limits.max_file_bytes}"
            )
        allowed = self.rules.allowed_extensions
        if allowed is not None and not any(entry.name.lower().endswith(ext) for ext in allowed):
            suffix = PurePosixPath(entry.name).suffix
            found = f"extension {suffix}" if suffix else "no extension"
            self._flag("extension", f"{entry.path}: {found} is not allowed (allowed: {', '.join(allowed)})")
        kind = kind_of_extension(entry.path)
        if kind is not None:
            self._read_as(entry, kind)

    def _check_totals(self) -> None:
        limits, metrics = self.rules.limits, self.outcome.metrics
        if limits.max_files is not None and metrics.files > limits.max_files:
            self._flag("count", f"{metrics.files} files produced, max_files is {limits.max_files}")
        if limits.max_total_bytes is not None and metrics.bytes > limits.max_total_bytes:
            self._flag(
                "size",
                f"{metrics.bytes} bytes produced in total, max_total_bytes is {limits.max_total_bytes}",
            )

    # content ---------------------------------------------------------------------------------------------

    def _read_as(self, entry: FileEntry, kind: str, schema: dict[str, Any] | None = None) -> _Content:
        """Read ``entry`` as ``kind`` once (in a bounded child process); its problems are flagged the first time."""
        key = (entry.path, kind, json.dumps(schema, sort_keys=True, default=str) if schema is not None else "")
        if schema is None:  # any earlier read of this file as this kind already flagged its problems
            earlier = next((v for k, v in self._content.items() if k[:2] == key[:2]), None)
            if earlier is not None:
                return earlier
        if key not in self._content:
            content = inspect_bounded(self.base / entry.path, entry.path, kind, schema, self.layout)
            category: Category = "office" if kind in OFFICE_KINDS else "kind"
            for problem in content.problems:
                self._flag(category, problem)
            for finding in content.findings:
                if finding.severity == "error":
                    self._flag("layout", finding.text)
                elif finding.severity == "warning" and finding.text not in self.outcome.warnings:
                    self.outcome.warnings.append(finding.text)
            self._content[key] = content
        return self._content[key]


def inspect_bounded(
    path: Path, shown: str, kind: str, schema: dict[str, Any] | None = None, layout: LayoutArgs | None = None
) -> _Content:
    """:func:`inspect_file` in a child process with memory and time bounds; a bound hit is a problem."""
    if kind not in OFFICE_KINDS and kind not in TEXT_KINDS:
        return inspect_file(path, shown, kind, schema)  # a magic-number check reads 16 bytes
    try:
        return run_bounded(
            inspect_file, path, shown, kind, schema, MAX_PARSE_BYTES, layout,
            memory_mb=CHECK_MEMORY_MB, timeout_s=CHECK_TIMEOUT_S, what=f"checking {shown}", returns=_Content,
        )
    except Bounded as e:
        return _Content(problems=[f"{shown} could not be checked within limits: {e.message}"])


def inspect_file(
    path: Path,
    shown: str,
    kind: str,
    schema: dict[str, Any] | None = None,
    max_parse_bytes: int = MAX_PARSE_BYTES,
    layout: LayoutArgs | None = None,
) -> _Content:
    """Read ``path`` as ``kind``: its problems, slide count, layout findings and errors against ``schema``."""
    if kind in OFFICE_KINDS:
        office = check_office(path, kind, shown)
        findings = []
        if office.ok and layout is not None:
            findings = check_layout(str(path), kind, shown, layout.settings, layout.brand)
        return _Content(problems=office.problems, slides=office.slides, findings=findings)
    if kind in _MAGIC:
        with path.open("rb") as fh:
            head = fh.read(16)
        if head.startswith(_MAGIC[kind]):
            return _Content()
        return _Content(problems=[f"{shown} is not a {kind} file (its first bytes do not match)"])
    if kind not in TEXT_KINDS:
        return _Content()
    problem = _stream_text_problem(path, shown, kind)
    if problem is not None:
        return _Content(problems=[problem])
    if kind == "csv":
        return _csv_content(path, shown)
    if kind not in ("json", "yaml"):
        return _Content()
    size = path.stat().st_size
    if size > max_parse_bytes:
        return _Content(problems=[f"{shown} is {size} bytes, more than the {max_parse_bytes}-byte limit for "
                                  f"parsing {kind}"])
    with path.open("rb") as fh:
        text = fh.read(max_parse_bytes + 1).decode("utf-8-sig")
    content, data = _parse_text(text, shown, kind)
    if schema is not None and not content.problems:
        documents = data if kind == "yaml" else [data]
        return _schema_content(documents, schema)
    return content


def _stream_text_problem(path: Path, shown: str, kind: str) -> str | None:
    """Why ``path`` is not UTF-8 text without NUL bytes, read block by block (never whole), or ``None``."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    with path.open("rb") as fh:
        while True:
            block = fh.read(_STREAM_BLOCK)
            try:
                text = decoder.decode(block, final=not block)
            except UnicodeDecodeError as e:
                return f"{shown} is not UTF-8 {kind} text (byte {offset + e.start} cannot be decoded)"
            if "\x00" in text:
                return f"{shown} is not {kind} text (it contains NUL bytes)"
            if not block:
                return None
            offset += len(block)


def _csv_content(path: Path, shown: str) -> _Content:
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            for _row in csv.reader(fh, strict=True):
                pass
    except csv.Error as e:
        return _Content(problems=[f"{shown} is not valid CSV: {e}"])
    return _Content()


def _schema_content(documents: list[Any], schema: dict[str, Any]) -> _Content:
    validator = validator_for(schema)(schema)
    errors = []
    try:
        for number, document in enumerate(documents):
            prefix = f"document {number + 1} " if len(documents) > 1 else ""
            for error in validator.iter_errors(document):
                errors.append((prefix, error.json_path, error.message[:500]))
    except Exception as e:  # noqa: BLE001 - an unresolvable $ref surfaces only while validating
        return _Content(rules_error=str(e)[:500])
    errors.sort(key=lambda item: (item[0], item[1]))
    return _Content(
        schema_errors=[f"{prefix}{path}: {message}" for prefix, path, message in errors[:MAX_SCHEMA_ERRORS]],
        schema_error_count=len(errors),
    )


def _parse_text(text: str, shown: str, kind: str) -> tuple[_Content, Any]:
    if kind == "json":
        try:
            return _Content(), json.loads(text)
        except json.JSONDecodeError as e:
            return _Content(problems=[f"{shown} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}"]), None
        except RecursionError:
            return _Content(problems=[f"{shown} is not valid JSON: nested too deeply"]), None
    try:
        # An empty file is one empty document, so a schema still applies to it.
        return _Content(), list(yaml.safe_load_all(text)) or [None]
    except yaml.YAMLError as e:
        return _Content(problems=[f"{shown} is not valid YAML: {yaml_problem(e)}"]), None
    except RecursionError:
        return _Content(problems=[f"{shown} is not valid YAML: nested too deeply"]), None
