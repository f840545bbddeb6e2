"""All text the model sees lives in ``orchestrator/prompts/`` and is read one way (``orchestrator.prompts``).

Pinned from both sides: what the model is offered (tool and argument descriptions) equals the prompt files, and
the source holds no model text of its own (no literal descriptions, no literal message contents, no literal notes
or hints in tool results); every prompt file is used and ships in the wheel.
"""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from pathlib import Path

import orchestrator
from orchestrator.act.tools import TOOLS
from orchestrator.prompts import load_prompt, render_prompt
from orchestrator.workflow.plan import SEARCH_SKILLS

PACKAGE = Path(orchestrator.__file__).parent
PROMPTS = PACKAGE / "prompts"
LOADER = PROMPTS / "__init__.py"
MODEL_TEXT_KEYS = {"note", "hint", "retry", "earlier_result", "error", "memo", "stdout_cut"}
"""Keys of tool-result data whose values the model reads as text (notes, hints, errors)."""


def _prompt_names() -> set[str]:
    return {p.relative_to(PROMPTS).with_suffix("").as_posix() for p in PROMPTS.rglob("*.md")}


def _sources() -> list[tuple[Path, ast.AST]]:
    return [
        (p, ast.parse(p.read_text(encoding="utf-8")))
        for p in sorted(PACKAGE.rglob("*.py"))
        if "testing" not in p.relative_to(PACKAGE).parts
    ]


def _is_text(node: ast.AST) -> bool:
    """A string literal or an f-string: text written in the code."""
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(node, ast.JoinedStr)


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"


def test_every_tool_description_the_model_sees_is_its_prompt_file():
    for tool in TOOLS:
        spec = tool.spec()
        assert spec.description == load_prompt(f"tools/{tool.name}"), tool.name
        for field, schema in spec.parameters.get("properties", {}).items():
            if "description" in schema:
                shared, own = f"tools/args.{field}", f"tools/{tool.name}.{field}"
                name = own if own in _prompt_names() else shared
                assert schema["description"] == load_prompt(name), (tool.name, field)
    assert SEARCH_SKILLS.description == load_prompt("tools/search_skills")


def test_no_tool_argument_goes_without_a_description_from_the_prompts():
    texts = {load_prompt(n) for n in _prompt_names() if n.startswith("tools/")}
    for tool in TOOLS:
        for field, info in tool.args_model.model_fields.items():
            assert info.description is None or info.description in texts, (tool.name, field)


def _model_text_written_in(path: Path, tree: ast.AST) -> list[str]:
    """Places where ``tree`` writes model text itself: a literal message content, tool or argument description,
    or a literal note/hint in a tool result."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            for kw in node.keywords:
                if name in ("Message", "ToolSpec") and kw.arg in ("content", "description") and _is_text(kw.value):
                    found.append(f"{_where(path, kw.value)}: {name}({kw.arg}=<literal>)")
                if name == "tool" and kw.arg == "description" and _is_text(kw.value):
                    found.append(f"{_where(path, kw.value)}: {name}(description=<literal>)")
                if kw.arg in MODEL_TEXT_KEYS and _is_text(kw.value):
                    found.append(f"{_where(path, kw.value)}: {kw.arg}=<literal>")
            if name == "tool" and any(_is_text(a) for a in node.args):
                found.append(f"{_where(path, node)}: @tool(<literal description>)")
            if name in ("fail", "violation") and node.args and _is_text(node.args[0]):
                found.append(f"{_where(path, node)}: {name}(<literal error the model reads>)")
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in MODEL_TEXT_KEYS and _is_text(value):
                    found.append(f"{_where(path, value)}: {{{key.value!r}: <literal>}}")
        if isinstance(node, ast.Assign) and _is_text(node.value):
            for target in node.targets:
                key = target.slice if isinstance(target, ast.Subscript) else None
                if isinstance(key, ast.Constant) and key.value in MODEL_TEXT_KEYS:
                    found.append(f"{_where(path, node)}: [{key.value!r}] = <literal>")
        if isinstance(node, ast.ClassDef) and any(getattr(b, "id", "").endswith("Args") for b in node.bases):
            found += [  # a tool's argument model: its field descriptions are in the tool's JSON schema
                f"{_where(path, kw.value)}: {node.name}: Field(description=<literal>)"
                for field in ast.walk(node)
                if isinstance(field, ast.Call) and getattr(field.func, "id", "") == "Field"
                for kw in field.keywords
                if kw.arg == "description" and _is_text(kw.value)
            ]
    return found


def test_the_source_holds_no_model_text_of_its_own():
    found = [hit for path, tree in _sources() for hit in _model_text_written_in(path, tree)]
    assert not found, "model text written in the code instead of orchestrator/prompts/:\n" + "\n".join(found)


def test_the_text_check_can_fail():
    bad = ast.parse(
        'Message(role="user", content=f"Goal: {goal}")\n'
        'data = {"note": "call read_ref next"}\n'
        'data["hint"] = "write less"\n'
        'fail("full", hint="write less")\n'
        'fail(f"cannot read {path}")\n'
        '@tool("Read a file.")\ndef read(ctx, args): ...\n'
        'class A(ToolArgs):\n    path: str = Field(description="a path")\n'
        'class Settings(BaseModel):\n    path: str = Field(description="not for the model")\n'
    )
    assert len(_model_text_written_in(PACKAGE / "bad.py", bad)) == 8


def test_the_prompts_loader_is_the_only_reader_of_the_prompt_files():
    readers = []
    for path, tree in _sources():
        if path == LOADER:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if text.endswith(".md") and "/" not in text and (PROMPTS / text).exists():
                    readers.append(_where(path, node))
                if "orchestrator.prompts" in text or text.startswith("prompts/"):
                    readers.append(_where(path, node))
            if isinstance(node, ast.ImportFrom) and node.module == "orchestrator.prompts":
                names = {a.name for a in node.names}
                assert names <= {"load_prompt", "render_prompt", "tool_text"}, (_where(path, node), names)
    assert not readers, f"prompt files read around the loader: {readers}"


def test_every_prompt_file_is_used():
    tool_files = set()
    for spec in [*(t.spec() for t in TOOLS), SEARCH_SKILLS]:
        fields = spec.parameters.get("properties", {})
        tool_files |= {f"tools/{spec.name}", *(f"tools/{spec.name}.{f}" for f in fields)}
        tool_files |= {f"tools/args.{f}" for f in fields}
    literals = {
        node.value
        for _, tree in _sources()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    unused = sorted(n for n in _prompt_names() if n not in tool_files and n not in literals)
    assert not unused, f"prompt files nothing reads: {unused}"


def test_every_prompt_file_ships_in_the_wheel():
    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    globs = pyproject["tool"]["setuptools"]["package-data"]["orchestrator"]
    for path in PROMPTS.rglob("*.md"):
        rel = path.relative_to(PACKAGE).as_posix()
        assert any(fnmatch.fnmatch(rel, g) and rel.count("/") == g.count("/") for g in globs), rel


def test_rendering_is_strict_and_exact():
    assert render_prompt("act_validation_failed", report="{}", may_retry=False, never_made=[]) == (
        "Validation failed: {}"
    )
    assert render_prompt("act_validation_failed", report="{}", may_retry=True, never_made=[]) == (
        "Validation failed: {}\nFix it, then call finish again."
    )
    # A value is never rendered as a template itself, and a field the template needs may not be left out.
    assert render_prompt("plan_retry", problem="{{ 7 * 7 }}").startswith("That plan cannot be used: {{ 7 * 7 }}.")
    try:
        render_prompt("plan_retry")
    except Exception as e:  # noqa: BLE001 - jinja2's UndefinedError
        assert "problem" in str(e)
    else:
        raise AssertionError("a missing field rendered silently")
