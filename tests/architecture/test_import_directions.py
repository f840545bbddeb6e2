"""The package's imports point one way: cli/worker → workflow → act → {validate, sandbox, llm, skills, select} → base.

Read from the source (every ``import`` statement, at any depth), so a new module cannot quietly add an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import orchestrator

PACKAGE = Path(orchestrator.__file__).parent
BASE = {"config", "errors", "logs", "tokens", "prompts", "tracing", "isolation"}
LEAVES = {"skills", "sandbox", "llm", "validate", "select"}
ALLOWED: dict[str, set[str]] = {
    "__main__": {"cli"},
    "cli": {"worker", "deploy", "workflow", "act", *LEAVES, *BASE},
    "deploy": {"sandbox", *BASE},  # the compose stack's images, built like the sandbox image
    "worker": {"workflow", "act", *LEAVES, *BASE},
    "workflow": {"act", *LEAVES, *BASE},
    "act": {*LEAVES, *BASE},
    "validate": {"llm", *BASE},  # the semantic check asks a ChatModel
    "llm": set(BASE),
    "sandbox": set(BASE),
    "skills": set(BASE),
    "select": {"skills", *BASE},  # skill selection ranks the skills library's summaries
    "testing": {"llm", "sandbox", *BASE},
    "config": {"errors"},
    "prompts": set(),
    "errors": set(),
    "isolation": {"errors"},  # bounded child processes for parsing untrusted data
    "logs": set(),
    "tokens": set(),
    "tracing": set(),
    "__init__": set(),
}


def _area(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def _imported_areas(path: Path) -> set[tuple[str, int]]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "orchestrator" and len(parts) > 1:
                found.add((parts[1], node.lineno))
    return found


def _edges() -> list[tuple[str, str, str]]:
    edges = []
    for path in sorted(PACKAGE.rglob("*.py")):
        area = _area(path)
        for target, line in _imported_areas(path):
            if target != area:
                edges.append((area, target, f"{path.relative_to(PACKAGE.parent)}:{line}"))
    return edges


def test_every_area_of_the_package_has_a_place_in_the_layers():
    areas = {_area(p) for p in PACKAGE.rglob("*.py")}
    assert areas <= set(ALLOWED), f"areas without a rule: {sorted(areas - set(ALLOWED))}"


def test_imports_only_point_down_the_layers():
    wrong = [f"{where}: {area} imports {target}" for area, target, where in _edges() if target not in ALLOWED[area]]
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_nothing_in_the_package_imports_the_test_fakes():
    users = [where for area, target, where in _edges() if target == "testing"]
    assert not users, f"orchestrator.testing is for tests only, imported at: {users}"


def test_the_rules_can_fail_on_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from orchestrator.workflow.run import run_goal\nimport orchestrator.cli\n")
    assert {area for area, _ in _imported_areas(bad)} == {"workflow", "cli"}
    assert "workflow" not in ALLOWED["act"] and "cli" not in ALLOWED["workflow"]


def _deferred_on_purpose(lines: list[str], lineno: int) -> bool:
    """An import inside a function is allowed under a ``# Deferred: why`` comment (imports may follow it)."""
    index = lineno - 2
    while index >= 0 and lines[index].strip().startswith(("from ", "import ")):
        index -= 1
    while index >= 0 and lines[index].strip().startswith("#"):
        if lines[index].strip().startswith("# Deferred"):
            return True
        index -= 1
    return False


def test_imports_are_at_module_top_unless_deferred_on_purpose():
    inner = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE.parent))
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                inner += [
                    f"{rel}:{n.lineno}"
                    for n in ast.walk(node)
                    if isinstance(n, ast.Import | ast.ImportFrom) and not _deferred_on_purpose(lines, n.lineno)
                ]
    assert not inner, f"imports inside functions without a '# Deferred: why' comment: {inner}"
