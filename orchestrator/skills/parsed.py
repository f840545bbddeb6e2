"""The skills library's data: what a SKILL.md becomes once it has been parsed and checked.

Every finding about a skill is a :class:`Problem` with a stable ``code`` (listed in :data:`PROBLEM_CODES`), so
callers branch on codes, never on message text. ``error`` means the Agent Skills specification (or our own
rule for declarations) is broken; ``warning`` means the skill still works but something deserves a look.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Severity = Literal["error", "warning"]
Via = Literal["link", "path", "glob"]

#: Operation kinds a skill may declare (from the ADR); anything else is reported as a warning.
KNOWN_OPERATIONS: frozenset[str] = frozenset(
    {"fs-temp", "fs-project", "process-single", "process-chain", "browser-automation"}
)

#: Every problem code the library emits, with what it means.
PROBLEM_CODES: dict[str, str] = {
    # the SKILL.md file itself
    "skill_md_unreadable": "SKILL.md could not be read (permission denied, dangling symlink, I/O error)",
    "skill_md_not_a_file": "SKILL.md is a directory or another non-regular file",
    "skill_md_escape": "SKILL.md is a symlink that points outside its skill folder; it was not read",
    "skill_md_empty": "SKILL.md is empty",
    "skill_md_binary": "SKILL.md holds binary data (NUL bytes)",
    "skill_md_too_large": "SKILL.md is larger than the read limit; only its beginning was parsed",
    # encoding and layout
    "encoding_bom": "the file starts with a byte-order mark (removed before parsing)",
    "encoding_utf16": "the file is UTF-16 (decoded, but UTF-8 is expected)",
    "invalid_utf8": "bytes that are not UTF-8 were replaced by U+FFFD",
    "crlf_line_endings": "CRLF (or CR) line endings (normalised to LF before parsing)",
    # frontmatter
    "frontmatter_missing": "the file does not start with a '---' frontmatter block",
    "frontmatter_unterminated": "the '---' frontmatter block is never closed",
    "frontmatter_yaml_error": "the frontmatter is not valid YAML, and name and description cannot be read line by line",
    "frontmatter_recovered": "the frontmatter is not valid YAML; name and description were read line by line",
    "frontmatter_delimiter_whitespace": "a '---' line ends in Unicode whitespace such as U+00A0 or U+3000 (read as a "
    "delimiter)",
    "frontmatter_after_blank_lines": "blank lines before the opening '---' (skipped; the frontmatter is read after "
    "them)",
    "frontmatter_closer_joined": "the closing '---' is joined to the body's first line ('---# Title'); read as the "
    "closing line",
    "continuation_unindented": "after a YAML error, a plain name or description continues on lines that are not "
    "indented; read up to the next 'key:' line",
    "frontmatter_not_mapping": "the frontmatter is valid YAML but not a mapping of keys to values",
    "duplicate_key": "a frontmatter key appears more than once (the last one wins)",
    "unknown_key": "a frontmatter key that the Agent Skills specification does not define",
    "block_scalar": "a field uses a YAML block scalar ('>' or '|'); read correctly, but some clients do not",
    "name_missing": "no 'name' (and no usable folder name to stand in)",
    "name_from_folder": "no 'name' (or an empty one); the skill folder's name stands in, checked like a written name",
    "name_not_string": "'name' is not a string",
    "name_invalid": "'name' is not 1-64 characters of a-z, 0-9 and single inner hyphens",
    "name_folder_mismatch": "'name' differs from the skill folder's name",
    "duplicate_name": "another skill in the library has the same 'name'",
    "description_missing": "no 'description' and no paragraph of prose in the body to stand in",
    "description_from_body": "no 'description' (or an empty one); the body's first paragraph stands in (at most 1024 "
    "characters)",
    "description_not_string": "'description' is not a string",
    "description_invalid": "'description' is empty, longer than 1024 characters, or contains '<' or '>'",
    "field_invalid": "license, allowed-tools, compatibility or metadata has the wrong shape",
    "declaration_invalid": "requires-tools / operations / input-schema is malformed",
    # references
    "reference_missing": "a referenced file does not exist inside the skill folder",
    "reference_escape": "a reference leaves the skill folder ('..', an absolute path); refused, never read",
    "symlink_escape": "a reference is a symlink (or under one) pointing outside the skill folder; refused",
    "reference_unreadable": "a referenced Markdown document could not be read while following references",
    "reference_cycle": "referenced Markdown documents form a cycle (reported once, never followed forever)",
    "reference_limit": "following references stopped at the depth or document limit",
    "glob_no_match": "a glob in the text matched no file inside the skill folder",
    "glob_truncated": "a glob matched more files than are listed",
    # the library as a whole (SkillLibrary.scan_problems)
    "folder_unreadable": "a folder under the root could not be listed; skills in it are not found",
    "duplicate_id": "two folders have the same id once Unicode-normalised (NFC); the first is kept",
    "scan_limit": "discovery stopped at the folder limit",
}


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class Problem(_Model):
    """One finding about a skill; ``path`` is relative to the skill folder, ``line`` is 1-based."""

    code: str
    message: str
    severity: Severity
    path: str | None = None
    line: int | None = None
    field: str | None = None
    cycle: tuple[str, ...] | None = None
    """For ``reference_cycle``: the documents on the cycle, in order (the first is repeated last)."""


class Reference(_Model):
    """A file or folder that a skill document points at.

    ``path`` is the reference relative to the skill folder (POSIX, normalised). It is ``None`` when the
    reference was refused (it leaves the folder) and for a glob that matched nothing. ``exists`` is true only
    for a file or folder that is really inside the skill folder, symlinks resolved. ``source`` is the document
    (relative path) that contains the reference.
    """

    ref: str
    path: str | None
    exists: bool
    via: Via
    source: str


class Declarations(_Model):
    """Optional frontmatter of ours (SPEC req. 9): what a skill needs before it can run.

    Read from top-level keys ``requires-tools`` / ``operations`` / ``input-schema`` or from ``metadata:``
    sub-keys of the same names; a top-level key wins over a ``metadata`` one.
    """

    requires_tools: list[str] = Field(default_factory=list)
    operations: list[str] = Field(default_factory=list)
    input_schema: dict[str, Any] | None = None
    network: list[str] = Field(default_factory=list)
    """``HOST[:PORT]`` the skill's scripts call (HTTPS); granted only by the operator's ``egress`` settings."""
    secrets: list[str] = Field(default_factory=list)
    """Names of secrets the skill's calls need; the egress proxy injects their values, the sandbox never sees them."""


class SkillSummary(_Model):
    """L1 view of a skill: identity, the two fields a model sees, and everything wrong with it."""

    id: str
    name: str | None
    description: str | None
    path: str
    problems: list[Problem] = Field(default_factory=list)
    l1_tokens: int = 0
    disable_model_invocation: bool = False
    """``disable-model-invocation: true``: the skill is only used when a goal names it."""

    @property
    def usable_at_l1(self) -> bool:
        return bool(self.name) and bool(self.description)


class Skill(_Model):
    """A fully loaded skill: frontmatter, body (L2 source) and resolved references (L3 candidates)."""

    id: str
    root: Path
    name: str | None
    description: str | None
    license: str | None = None
    allowed_tools: list[str] | None = None
    compatibility: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    body: str = ""
    body_tokens: int = 0
    references: list[Reference] = Field(default_factory=list)
    problems: list[Problem] = Field(default_factory=list)
    declarations: Declarations = Field(default_factory=Declarations)
    disable_model_invocation: bool = False
    skill_md_sha256: str = ""

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


class DisclosedText(_Model):
    """Text as it is put in front of a model: maybe cut, with the marker inside ``text``."""

    text: str
    tokens: int
    truncated: bool
    cut_tokens: int
    sha256: str
