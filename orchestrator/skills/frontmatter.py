"""SKILL.md bytes -> frontmatter fields, body and problems, as the Agent Skills specification defines them.

Pure functions, no I/O: the loader reads the file (confined, through the read cache) and hands the bytes here.
Nothing in here raises for bad input; every defect becomes a :class:`Problem` that names the line and field.
Values are kept exactly as YAML reads them; only the trailing newline a block scalar (``>``/``|``) adds is
removed. What a sloppy file plainly means is read with a warning (:mod:`orchestrator.skills.lenient`,
:mod:`orchestrator.skills.recover`): Unicode whitespace after a delimiter, a closer glued to the body, YAML that
breaks on a quoting slip, and, as Claude Code does, the folder's name for a missing ``name`` and the body's first
paragraph for a missing ``description``.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import unicodedata
from collections.abc import Callable
from typing import Any, cast

import jsonschema
import yaml
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.egress import declaration_problem
from orchestrator.skills import lenient
from orchestrator.skills.decode import Collector, decode_text
from orchestrator.skills.parsed import KNOWN_OPERATIONS, Declarations, Problem
from orchestrator.skills.recover import recover_fields, writes_key

SPEC_KEYS = ("name", "description", "license", "allowed-tools", "metadata", "compatibility")
DECLARATION_KEYS = ("requires-tools", "operations", "input-schema", "network", "secrets")
MAX_DECLARED = 32  # hosts (or secrets) one skill may declare; more is refused whole
#: Keys that clients of the format (Claude Code) define beyond the specification; read, not reported as unknown.
CLIENT_KEYS = ("disable-model-invocation",)
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
NAME_MAX = 64
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
SKILL_MD = "SKILL.md"


class ParsedSkillMd(BaseModel):
    """What one SKILL.md says; ``body`` is the Markdown after the frontmatter (leading blank lines cut)."""

    model_config = ConfigDict(frozen=True)

    name: str | None = None
    description: str | None = None
    license: str | None = None
    allowed_tools: list[str] | None = None
    compatibility: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    declarations: Declarations = Field(default_factory=Declarations)
    disable_model_invocation: bool = False
    body: str = ""
    body_line: int = 1  # 1-based line of SKILL.md where ``body`` starts
    problems: list[Problem] = Field(default_factory=list)


def _body(lines: list[str], start: int) -> tuple[str, int]:
    """The lines from index ``start`` on, leading blank lines dropped, and the 1-based line they start on."""
    while start < len(lines) and not lines[start].strip():
        start += 1
    return "\n".join(lines[start:]), start + 1


_ALIASES_REFUSED = "YAML aliases (*name) are not allowed in a frontmatter"


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases: a frontmatter never needs them and they allow exponential blow-ups."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            peek = cast("Callable[[], yaml.Event]", self.peek_event)  # untyped in the stubs
            mark = cast("yaml.error.Mark | None", peek().start_mark)
            raise yaml.composer.ComposerError(None, None, _ALIASES_REFUSED, mark)
        return super().compose_node(parent, index)


def parse_skill_md(data: bytes, *, folder_name: str | None, path: str = SKILL_MD) -> ParsedSkillMd:
    """Parse and check one SKILL.md. ``folder_name`` is the skill folder's name (None: do not compare)."""
    problems = Collector(path)
    if not data.strip():
        problems.add("skill_md_empty", "SKILL.md is empty" if not data else "SKILL.md holds only whitespace", "error")
        return ParsedSkillMd(problems=problems.items)
    text = decode_text(data, problems)
    if text is None:
        return ParsedSkillMd(problems=problems.items)
    lines = text.split("\n")
    blank = lenient.blank_lines_before_opener(lines)
    if blank:
        note = lenient.blank_lines_note(blank)
        problems.add(note.code, note.message, "warning", line=note.line)
        problems.lines_before = blank
        parsed = _parse_lines(lines[blank:], folder_name, problems)
        return parsed.model_copy(update={"body_line": parsed.body_line + blank})
    return _parse_lines(lines, folder_name, problems)


def _parse_lines(lines: list[str], folder_name: str | None, problems: Collector) -> ParsedSkillMd:
    """The frontmatter opened on ``lines[0]`` (line numbers count from it) and the body after it."""
    opening = lenient.opener(lines[0])
    if opening is None:
        problems.add(
            "frontmatter_missing",
            "no frontmatter: line 1 must be '---', then YAML with 'name' and 'description', then '---'",
            "error",
            line=1,
        )
        body, body_line = _body(lines, 0)
        return ParsedSkillMd(body=body, body_line=body_line, problems=problems.items)
    closing = lenient.closer(lines)
    if closing is None:
        problems.add(
            "frontmatter_unterminated",
            f"frontmatter opened on line {problems.lines_before + 1} is never closed by a '---' line",
            "error",
            line=1,
        )
        body, body_line = _body(lines, 1)
        return ParsedSkillMd(body=body, body_line=body_line, problems=problems.items)
    close = closing.index
    for note in lenient.delimiter_notes(opening, closing):
        problems.add(note.code, note.message, "warning", line=note.line)
    if closing.glued:
        body, body_line = closing.glued + "\n" + "\n".join(lines[close + 1 :]), close + 1
    else:
        body, body_line = _body(lines, close + 1)
    yaml_text = "\n".join(lines[1:close]) + "\n"
    fields, recoverable = _read_yaml(yaml_text, problems)
    if fields is None and recoverable:
        fields = _recovered(yaml_text, problems)
    if fields is None:
        return ParsedSkillMd(body=body, body_line=body_line, problems=problems.items)
    asked = lenient.asks_not_to_be_picked(lines[1 : lenient.flag_scan_end(lines, closing)])
    parsed = _check_fields(fields, folder_name, body, body_line, problems, asked=None if asked is None else asked + 2)
    return parsed.model_copy(update={"body_line": body_line})


# (value, line of the key, block-scalar style) per key
_Fields = dict[str, tuple[Any, int, str | None]]


def _read_yaml(yaml_text: str, problems: Collector) -> tuple[_Fields | None, bool]:
    """The fields, or None and whether the failure was a YAML syntax error (which line-by-line reading may
    get past, :func:`_recovered`)."""
    try:
        loader = _NoAliasLoader(yaml_text)
    except yaml.reader.ReaderError as e:  # a control character the YAML reader refuses outright
        line = yaml_text.count("\n", 0, max(0, e.position)) + 2
        problems.add(
            "frontmatter_yaml_error",
            f"YAML error at line {line}: character {e.character!r} is not allowed in YAML",
            "error",
            line=line,
        )
        return None, False
    try:
        node = loader.get_single_node()
        if node is None:
            return {}, False
        if not isinstance(node, yaml.MappingNode):
            kind = {"ScalarNode": "a single value", "SequenceNode": "a list"}.get(type(node).__name__, "not a mapping")
            problems.add(
                "frontmatter_not_mapping",
                f"the frontmatter is {kind}, not 'key: value' lines",
                "error",
                line=node.start_mark.line + 2,
            )
            return None, False
        fields: _Fields = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 2
            name = key if isinstance(key, str) else str(key)
            if name in fields:
                problems.add(
                    "duplicate_key",
                    f"key '{name}' appears again on line {line}",
                    "warning",
                    line=line,
                    field=name,
                )
            style = value_node.style if isinstance(value_node, yaml.ScalarNode) else None
            value = loader.construct_object(value_node, deep=True)
            fields[name] = (value, line, style if style in ("|", ">") else None)
        return fields, False
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        at_line = mark.line + 2 if mark is not None else None
        where = f"line {at_line}, column {mark.column + 1}" if mark is not None else "frontmatter"
        detail = " ".join(filter(None, [e.context, e.problem])) or str(e)
        problems.add("frontmatter_yaml_error", f"YAML error at {where}: {detail}", "error", line=at_line)
        return None, e.problem != _ALIASES_REFUSED  # an alias is no quoting slip: the file stays refused
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as e:
        problems.add("frontmatter_yaml_error", f"YAML error: {e}", "error", line=2)
        return None, True
    finally:
        loader.dispose()


def _recovered(yaml_text: str, problems: Collector) -> _Fields | None:
    """After a YAML syntax error: name and description read line by line, the error turned into a warning that
    says what was recovered; None when either cannot be read (the error stands and the skill is not listed). A name
    that is not written at all is the folder's, as in a readable frontmatter."""
    last = problems.items[-1]
    found = recover_fields(yaml_text)
    if "description" not in found or ("name" not in found and writes_key(yaml_text, "name")):
        return None
    problems.items.pop()
    keys = ", ".join(f"'{k}'" for k in found)
    keys = " and ".join(keys.rsplit(", ", 1))
    problems.add(
        "frontmatter_recovered",
        f"{last.message}; read {keys} line by line (other keys ignored)",
        "warning",
        line=last.line,
    )
    for key, got in found.items():
        if got.loose_to is not None:
            problems.add(
                "continuation_unindented",
                f"'{key}' on line {got.line} continues on lines {got.line + 1}-{got.loose_to} without indentation; "
                "read them as part of its value (up to the next 'key:' line)",
                "warning",
                line=got.line,
                field=key,
            )
    return {key: (got.value, got.line, None) for key, got in found.items()}


def _check_fields(
    fields: _Fields,
    folder_name: str | None,
    body: str,
    body_line: int,
    problems: Collector,
    *,
    asked: int | None = None,
) -> ParsedSkillMd:
    """The checked fields; ``asked`` is the file line that sets ``disable-model-invocation`` to true in some
    spelling (None: no such line)."""
    for key, (_, line, _) in fields.items():
        if key not in SPEC_KEYS and key not in DECLARATION_KEYS and key not in CLIENT_KEYS:
            problems.add(
                "unknown_key",
                f"unknown frontmatter key '{key}' (the specification defines {', '.join(SPEC_KEYS)})",
                "warning",
                line=line,
                field=key,
            )
    name = _name(fields, folder_name, problems)
    description = _description(fields, body, body_line, problems)
    license_ = _optional_text(fields, "license", problems)
    allowed_tools = _allowed_tools(fields, problems)
    compatibility = _compatibility(fields, problems)
    metadata = _metadata(fields, problems)
    return ParsedSkillMd(
        name=name,
        description=description,
        license=license_,
        allowed_tools=allowed_tools,
        compatibility=compatibility,
        metadata=metadata,
        declarations=_declarations(fields, metadata, problems),
        disable_model_invocation=_flag(fields, "disable-model-invocation", problems, asked),
        body=body,
        problems=problems.items,
    )


def _blank(fields: _Fields, key: str) -> bool:
    value = fields[key][0] if key in fields else None
    return value is None or (isinstance(value, str) and not value.strip())


def _name(fields: _Fields, folder_name: str | None, problems: Collector) -> str | None:
    """The written name, or when there is none the skill folder's name (as Claude Code does), checked alike."""
    line = fields["name"][1] if "name" in fields else None
    note = lenient.name_from_folder(folder_name, line) if _blank(fields, "name") else None
    if note is not None and folder_name is not None:
        problems.add(note.code, note.message, "warning", line=line, field="name")
        _check_name(folder_name, line, folder_name, problems)
        return folder_name
    name = _required_text(fields, "name", problems)
    if name is not None:
        _check_name(name, line, folder_name, problems)
    return name


def _description(fields: _Fields, body: str, body_line: int, problems: Collector) -> str | None:
    """The written description, or when there is none the body's first paragraph (as Claude Code does)."""
    key_line = fields["description"][1] if "description" in fields else None
    found = lenient.description_from_body(body, body_line, key_line) if _blank(fields, "description") else None
    if found is None:
        description = _required_text(fields, "description", problems)
        if description is not None:
            _check_description(description, key_line, problems)
        return description
    text, note = found
    problems.add(note.code, note.message, "warning", line=note.line, field="description")
    _check_description(text, note.line, problems)
    return text


def _flag(fields: _Fields, key: str, problems: Collector, asked: int | None = None) -> bool:
    """A boolean client key; anything but a YAML boolean is reported and read as false, except that text YAML
    read as ``true``/``yes``/``on`` (quoted, in a flow mapping) or a line (``asked``) setting it to true in another
    spelling (after a no-break space) makes it true: a skill that asks not to be picked on its own is never picked
    on its own because of how it wrote that."""
    value, line = (fields[key][0], fields[key][1]) if key in fields else (None, None)
    if value is True:
        return True
    if asked is None and isinstance(value, str) and value.strip().lower() in lenient.TRUE_WORDS:
        asked = line
    if asked is not None:
        problems.add(
            "field_invalid",
            f"line {asked} sets '{key}' to true in a spelling YAML did not read as true; read as true",
            "warning",
            line=asked,
            field=key,
        )
        return True
    if value is None or value is False:
        return False
    message = f"'{key}' should be true or false, found {_kind(value)}"
    problems.add("field_invalid", message, "warning", line=line, field=key)
    return False


def _required_text(fields: _Fields, key: str, problems: Collector) -> str | None:
    if key not in fields or fields[key][0] is None:
        line = fields[key][1] if key in fields else None
        problems.add(f"{key}_missing", f"required field '{key}' is missing or empty", "error", line=line, field=key)
        return None
    value, line, style = fields[key]
    if not isinstance(value, str):
        problems.add(
            f"{key}_not_string",
            f"'{key}' must be a string, found {_kind(value)} ({_short(value)}); quote it",
            "error",
            line=line,
            field=key,
        )
        return None
    if style:
        problems.add(
            "block_scalar",
            f"'{key}' is a YAML block scalar ('{style}'); read as {'folded' if style == '>' else 'literal'} text",
            "warning",
            line=line,
            field=key,
        )
    return value  # exactly the YAML value (a clipped block scalar keeps its final newline)


def _check_name(name: str, line: int | None, folder_name: str | None, problems: Collector) -> None:
    if not (1 <= len(name) <= NAME_MAX) or not NAME_RE.match(name):
        problems.add(
            "name_invalid",
            f"name {name!r} must be 1-{NAME_MAX} characters of a-z, 0-9 and single hyphens "
            "(not first, not last, never two in a row)",
            "error",
            line=line,
            field="name",
        )
    if folder_name is not None and unicodedata.normalize("NFC", name) != unicodedata.normalize("NFC", folder_name):
        problems.add(
            "name_folder_mismatch",
            f"name {name!r} differs from the skill folder's name {folder_name!r}",
            "error",
            line=line,
            field="name",
        )


def _check_description(description: str, line: int | None, problems: Collector) -> None:
    reasons = []
    if not description.strip():
        reasons.append("it is empty")
    if len(description) > DESCRIPTION_MAX:
        reasons.append(f"it has {len(description)} characters (at most {DESCRIPTION_MAX})")
    if "<" in description or ">" in description:
        reasons.append("it contains '<' or '>'")
    if reasons:
        problems.add(
            "description_invalid",
            f"description is invalid: {'; '.join(reasons)}",
            "error",
            line=line,
            field="description",
        )


def _optional_text(fields: _Fields, key: str, problems: Collector) -> str | None:
    if key not in fields or fields[key][0] is None:
        return None
    value, line, style = fields[key]
    if isinstance(value, str):
        return value
    problems.add("field_invalid", f"'{key}' should be a string, found {_kind(value)}", "warning", line=line, field=key)
    return None


def _compatibility(fields: _Fields, problems: Collector) -> str | None:
    value = _optional_text(fields, "compatibility", problems)
    if value is not None and not (1 <= len(value) <= COMPATIBILITY_MAX):
        problems.add(
            "field_invalid",
            f"'compatibility' must be 1-{COMPATIBILITY_MAX} characters (has {len(value)})",
            "warning",
            line=fields["compatibility"][1],
            field="compatibility",
        )
    return value


def _allowed_tools(fields: _Fields, problems: Collector) -> list[str] | None:
    if "allowed-tools" not in fields or fields["allowed-tools"][0] is None:
        return None
    value, line, _ = fields["allowed-tools"]
    if isinstance(value, str):
        return split_tools(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    problems.add(
        "field_invalid",
        f"'allowed-tools' should be a space-separated string of tool names, found {_kind(value)}",
        "warning",
        line=line,
        field="allowed-tools",
    )
    return None


def split_tools(text: str) -> list[str]:
    """Tool names from a space- (spec) or comma-separated (common) list; ``Bash(git add:*)`` stays one."""
    names, current, depth = [], "", 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth <= 0 and (ch.isspace() or ch == ","):
            depth = 0
            if current:
                names.append(current)
            current = ""
        else:
            current += ch
    if current:
        names.append(current)
    return names


def _metadata(fields: _Fields, problems: Collector) -> dict[str, Any]:
    if "metadata" not in fields or fields["metadata"][0] is None:
        return {}
    value, line, _ = fields["metadata"]
    if not isinstance(value, dict):
        problems.add(
            "field_invalid",
            f"'metadata' should be a mapping, found {_kind(value)}",
            "warning",
            line=line,
            field="metadata",
        )
        return {}
    metadata = {str(k): _jsonable(v) for k, v in value.items()}
    odd = [k for k, v in metadata.items() if not isinstance(v, str) and k not in DECLARATION_KEYS]
    if odd:
        problems.add(
            "field_invalid",
            f"'metadata' values should be strings; not strings: {', '.join(sorted(odd))}",
            "warning",
            line=line,
            field="metadata",
        )
    return metadata


def _declarations(fields: _Fields, metadata: dict[str, Any], problems: Collector) -> Declarations:
    def pick(key: str) -> tuple[Any, int | None, str]:
        if key in fields and fields[key][0] is not None:
            return _jsonable(fields[key][0]), fields[key][1], key
        if metadata.get(key) is not None:
            return metadata[key], fields["metadata"][1], f"metadata.{key}"
        return None, None, key

    def names(key: str) -> list[str]:
        value, line, label = pick(key)
        if value is None:
            return []
        if isinstance(value, str):
            return [v for v in re.split(r"[\s,]+", value) if v]
        if isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value):
            return [v.strip() for v in value]
        problems.add(
            "declaration_invalid",
            f"'{label}' should be a list of names, found {_kind(value)}",
            "error",
            line=line,
            field=label,
        )
        return []

    requires_tools = names("requires-tools")
    operations = names("operations")
    unknown_ops = [op for op in operations if op not in KNOWN_OPERATIONS]
    if unknown_ops:
        problems.add(
            "declaration_invalid",
            f"unknown operation(s) {', '.join(unknown_ops)} (known: {', '.join(sorted(KNOWN_OPERATIONS))})",
            "warning",
            line=pick("operations")[1],
            field="operations",
        )
    network = _checked(names("network"), pick("network"), "network", problems)
    secrets = _checked(names("secrets"), pick("secrets"), "secrets", problems)
    schema, line, label = pick("input-schema")
    if schema is not None:
        if not isinstance(schema, dict):
            problems.add(
                "declaration_invalid",
                f"'{label}' should be a JSON Schema object",
                "error",
                line=line,
                field=label,
            )
            schema = None
        else:
            try:
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as e:
                problems.add(
                    "declaration_invalid",
                    f"'{label}' is not a valid JSON Schema: {e.message}",
                    "error",
                    line=line,
                    field=label,
                )
                schema = None
    return Declarations(
        requires_tools=requires_tools, operations=operations, input_schema=schema, network=network, secrets=secrets
    )


def _checked(values: list[str], where: tuple[Any, int | None, str], kind: str, problems: Collector) -> list[str]:
    """``values`` if few enough and each well-formed, else a problem and nothing: a declaration that cannot be read
    whole cannot be granted either."""
    found = [p for p in (declaration_problem(kind, v) for v in values[:MAX_DECLARED]) if p]
    if len(values) > MAX_DECLARED:
        found.insert(0, f"{len(values)} entries (at most {MAX_DECLARED})")
    if found:
        label = where[2]
        problems.add("declaration_invalid", f"'{label}': {'; '.join(found[:3])}", "error", line=where[1], field=label)
        return []
    return list(dict.fromkeys(values))


def _jsonable(value: Any, depth: int = 0) -> Any:
    """YAML values made JSON-safe (dates as ISO text, bytes as base64, sets as lists, keys as strings)."""
    if depth > 20:
        return None
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [_jsonable(v, depth + 1) for v in items]
    return str(value)


def _kind(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        list: "a list",
        dict: "a mapping",
        dt.date: "a date",
        dt.datetime: "a date-time",
        bytes: "binary data",
    }.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
    text = json.dumps(_jsonable(value), ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
