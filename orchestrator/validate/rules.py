"""Contract rules and expected outputs, parsed once at the edge.

The YAML rules file follows the seed's appendix B (``required``, ``limits``, ``allowed_extensions``,
``sandbox``, ``hash``) and adds ``slides`` / ``min_slides`` / ``max_slides`` for a ``.pptx`` and
``min_bytes`` / ``max_bytes`` for any required file. A malformed file raises :class:`ValidationRulesError`
naming the file and the field: rules that cannot be read are never treated as a pass. See
``docs/validation.md``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from orchestrator.errors import ValidationRulesError

Kind = Literal[
    "json",
    "yaml",
    "text",
    "markdown",
    "csv",
    "pptx",
    "docx",
    "xlsx",
    "pdf",
    "png",
    "jpeg",
    "html",
    "binary",
    "any",
]

EXTENSION_KINDS: dict[str, str] = {
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".txt": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".csv": "csv",
    ".pptx": "pptx",
    ".docx": "docx",
    ".xlsx": "xlsx",
    ".pdf": "pdf",
    ".png": "png",
    ".jpg": "jpeg",
    ".jpeg": "jpeg",
    ".html": "html",
    ".htm": "html",
}
TEXT_KINDS = frozenset({"json", "yaml", "text", "markdown", "csv", "html"})
OFFICE_KINDS = frozenset({"pptx", "docx", "xlsx"})
GLOB_CHARS = frozenset("*?[")


def kind_of_extension(path: str) -> str | None:
    """The kind a file name's extension stands for, or ``None`` for an extension we do not know."""
    return EXTENSION_KINDS.get(PurePosixPath(path).suffix.lower())


def slide_counts_apply(kind: str, path: str) -> bool:
    """Slide counts (``slides``, ``min_slides``, ``max_slides``) are rules for a deck only: kind ``pptx``, or kind
    ``any`` with a ``.pptx`` path. One rule for the contract and for the planner's expected outputs."""
    return kind == "pptx" or (kind == "any" and path.lower().endswith(".pptx"))


def kind_conflict(declared: str, path: str) -> str | None:
    """The kind ``path``'s extension stands for when it disagrees with the ``declared`` kind (the contract flags such
    a file), else None. ``any`` and ``binary`` agree with every extension, ``text`` with every text kind."""
    by_extension = kind_of_extension(path)
    if declared in ("any", "binary") or by_extension in (None, declared):
        return None
    if declared == "text" and by_extension in TEXT_KINDS:
        return None
    return by_extension


def _relative_parts(value: str, what: str) -> str:
    """``value`` as a normalised relative POSIX path; ``ValueError`` when absolute or containing ``..``."""
    path = PurePosixPath(value.replace("\\", "/"))
    if path.is_absolute():
        raise ValueError(f"{what} must be a relative path, got {value!r}")
    if ".." in path.parts:
        raise ValueError(f"{what} must not contain '..', got {value!r}")
    return path.as_posix()


class _Rules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True)


class RequiredFile(_Rules):
    """One file that must exist in the output folder (``path`` may be a glob: at least one must match)."""

    path: str = Field(min_length=1)
    kind: Kind = "any"
    schema_: str | dict[str, Any] | None = Field(None, alias="schema")
    slides: int | None = Field(None, ge=0)
    min_slides: int | None = Field(None, ge=0)
    max_slides: int | None = Field(None, ge=0)
    min_bytes: int | None = Field(None, ge=0)
    max_bytes: int | None = Field(None, ge=0)

    # The file a path schema was loaded from, kept for messages once ``schema_`` holds the loaded mapping.
    _schema_origin: str | None = PrivateAttr(None)

    @property
    def is_pattern(self) -> bool:
        return any(ch in GLOB_CHARS for ch in self.path)

    @property
    def schema_label(self) -> str:
        if self._schema_origin:
            return self._schema_origin
        return self.schema_ if isinstance(self.schema_, str) else "inline schema"

    @model_validator(mode="after")
    def _coherent(self) -> RequiredFile:
        counts = {"slides": self.slides, "min_slides": self.min_slides, "max_slides": self.max_slides}
        given = [name for name, value in counts.items() if value is not None]
        if given and not slide_counts_apply(self.kind, self.path):
            if self.kind != "any":
                raise ValueError(f"{', '.join(given)} only apply to kind pptx, not {self.kind}")
            raise ValueError(f"{', '.join(given)} only apply to a .pptx path (or kind: pptx)")
        if self.min_slides is not None and self.max_slides is not None and self.min_slides > self.max_slides:
            raise ValueError(f"min_slides {self.min_slides} is greater than max_slides {self.max_slides}")
        if self.min_bytes is not None and self.max_bytes is not None and self.min_bytes > self.max_bytes:
            raise ValueError(f"min_bytes {self.min_bytes} is greater than max_bytes {self.max_bytes}")
        if self.schema_ is not None and self.kind not in ("json", "yaml", "any"):
            raise ValueError(f"a schema only applies to kind json or yaml, not {self.kind}")
        return self


class Limits(_Rules):
    max_total_bytes: int | None = Field(None, ge=0)
    max_files: int | None = Field(None, ge=0)
    max_file_bytes: int | None = Field(None, ge=0)


class SandboxRule(_Rules):
    output_root: str = "."
    deny_outside_output_root: bool = True

    @field_validator("output_root")
    @classmethod
    def _relative_root(cls, value: str) -> str:
        return _relative_parts(value or ".", "output_root")


class HashRule(_Rules):
    enabled: bool = True
    algorithm: Literal["sha256"] = "sha256"


def _stricter(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


class ContractRules(_Rules):
    """Deterministic rules for an output folder. Paths are relative to the folder being validated."""

    required: list[RequiredFile] = []
    limits: Limits = Limits()
    allowed_extensions: list[str] | None = None
    sandbox: SandboxRule = SandboxRule()
    hash: HashRule = HashRule()

    @field_validator("allowed_extensions")
    @classmethod
    def _dotted(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        out: list[str] = []
        for ext in value:
            ext = ext.strip().lower()
            if not ext or ext == ".":
                raise ValueError("an allowed extension must not be empty")
            dotted = ext if ext.startswith(".") else f".{ext}"
            if dotted not in out:
                out.append(dotted)
        return out

    @classmethod
    def from_yaml(cls, path: Path, *, schema_base: Path | None = None) -> ContractRules:
        """Rules from a YAML file; path schemas resolve inside ``schema_base`` (default: its folder)."""
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except FileNotFoundError as e:
            raise ValidationRulesError(
                f"rules file not found: {path}", where="validate:rules", next_step="check the --rules path"
            ) from e
        except (OSError, UnicodeDecodeError) as e:
            raise ValidationRulesError(
                f"rules file cannot be read: {path}: {e}", where="validate:rules"
            ) from e
        except yaml.YAMLError as e:
            raise ValidationRulesError(
                f"rules file is not valid YAML: {path}: {yaml_problem(e)}",
                where="validate:rules",
                next_step="fix the YAML syntax at the position shown",
            ) from e
        if data is None:
            data = {}
        return cls.from_mapping(data, source=str(path), schema_base=schema_base or path.parent)

    @classmethod
    def from_mapping(
        cls, data: Any, source: str = "<rules>", *, schema_base: Path | None = None
    ) -> ContractRules:
        """Rules from a mapping (e.g. expected outputs of a skill); errors name ``source`` and the field."""
        if not isinstance(data, Mapping):
            raise ValidationRulesError(
                f"{source}: rules must be a mapping, got {type(data).__name__}",
                where="validate:rules",
                next_step="write the rules as YAML keys: required, limits, allowed_extensions, sandbox, hash",
            )
        try:
            rules = cls.model_validate(dict(data))
        except ValidationError as e:
            raise ValidationRulesError(
                f"{source}: invalid rules: {describe_errors(e)}",
                where="validate:rules",
                next_step="fix the named field (see docs/validation.md for the rules format)",
                source=source,
            ) from e
        return rules.resolve_schemas(schema_base, source=source)

    @property
    def unresolved_schemas(self) -> list[str]:
        return [r.schema_ for r in self.required if isinstance(r.schema_, str)]

    def resolve_schemas(self, schema_base: Path | None, *, source: str = "<rules>") -> ContractRules:
        """Load every path schema from inside ``schema_base`` and check every schema is itself valid.

        Inline schemas are checked too. A path schema with no base stays unresolved (``validate_outputs`` then
        needs a ``schema_base``).
        """
        required: list[RequiredFile] = []
        for index, req in enumerate(self.required):
            where = f"{source}: required[{index}].schema"
            if isinstance(req.schema_, str) and schema_base is not None:
                loaded = _load_schema(req.schema_, schema_base, where)
                resolved = req.model_copy(update={"schema_": loaded})
                resolved._schema_origin = req.schema_
                req = resolved
            if isinstance(req.schema_, dict):
                _check_schema(req.schema_, f"{where} ({req.schema_label})")
            required.append(req)
        return self.model_copy(update={"required": required})

    def merged(self, other: ContractRules) -> ContractRules:
        """Both sets of rules at once: every required file of both, and the stricter of each limit."""
        if self.sandbox.output_root != other.sandbox.output_root and "." not in (
            self.sandbox.output_root,
            other.sandbox.output_root,
        ):
            raise ValidationRulesError(
                f"conflicting output roots: {self.sandbox.output_root!r} and {other.sandbox.output_root!r}",
                where="validate:rules",
                next_step="declare one sandbox.output_root",
            )
        required = list(self.required)
        required += [r for r in other.required if r not in required]
        if self.allowed_extensions is None or other.allowed_extensions is None:
            allowed = (
                self.allowed_extensions if other.allowed_extensions is None else other.allowed_extensions
            )
        else:
            allowed = [ext for ext in self.allowed_extensions if ext in other.allowed_extensions]
        root = other.sandbox.output_root if self.sandbox.output_root == "." else self.sandbox.output_root
        return ContractRules(
            required=required,
            limits=Limits(
                max_total_bytes=_stricter(self.limits.max_total_bytes, other.limits.max_total_bytes),
                max_files=_stricter(self.limits.max_files, other.limits.max_files),
                max_file_bytes=_stricter(self.limits.max_file_bytes, other.limits.max_file_bytes),
            ),
            allowed_extensions=allowed,
            sandbox=SandboxRule(
                output_root=root,
                deny_outside_output_root=self.sandbox.deny_outside_output_root
                or other.sandbox.deny_outside_output_root,
            ),
            hash=HashRule(enabled=self.hash.enabled or other.hash.enabled),
        )


class ExpectedOutputs(_Rules):
    """What a run should produce: contract rules, and natural-language expectations for the semantic stage."""

    description: str = ""
    rules: ContractRules = ContractRules()


def describe_errors(error: ValidationError) -> str:
    """``required.0.kind: Input should be ...; limits.max_files: ...`` — one clause per field."""
    parts = []
    for err in error.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def yaml_problem(error: yaml.YAMLError) -> str:
    """A one-line description of a YAML error with its 1-based line and column."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or " ".join(str(error).split())
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else problem


def _load_schema(name: str, base: Path, where: str) -> dict[str, Any]:
    try:
        relative = _relative_parts(name, "schema path")
    except ValueError as e:
        raise ValidationRulesError(
            f"{where}: {e}",
            where="validate:rules",
            next_step=f"give the schema path relative to {base} (schemas stay inside that folder)",
        ) from e
    root = base.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise ValidationRulesError(
            f"{where}: schema {name!r} resolves outside the schema folder {root}",
            where="validate:rules",
            next_step="keep schemas inside the rules file's folder",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise ValidationRulesError(
            f"{where}: schema file not found: {path}",
            where="validate:rules",
            next_step=f"create the schema or fix the path (relative to {root})",
        ) from e
    except (OSError, UnicodeDecodeError) as e:
        raise ValidationRulesError(f"{where}: schema file cannot be read: {path}: {e}") from e
    try:
        data = yaml.safe_load(text) if path.suffix.lower() in (".yaml", ".yml") else json.loads(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        detail = yaml_problem(e) if isinstance(e, yaml.YAMLError) else f"{e.msg} at line {e.lineno}"
        raise ValidationRulesError(f"{where}: schema file {name!r} does not parse: {detail}") from e
    if not isinstance(data, dict):
        raise ValidationRulesError(f"{where}: schema file {name!r} must hold an object")
    return data


def _check_schema(schema: dict[str, Any], where: str) -> None:
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as e:
        raise ValidationRulesError(
            f"{where}: not a valid JSON Schema: {e.message}",
            where="validate:rules",
            next_step="fix the schema (it is checked against its $schema meta-schema)",
        ) from e
