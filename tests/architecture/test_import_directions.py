"""The package's imports point one way, one layer at a time:

    __main__ → cli → worker → workflow → act → {validate, select} → {llm, sandbox, skills} → base

Each area may import the layer right below it and the base modules (config, errors, logs, tokens, prompts,
tracing, isolation, time_budget). An upper layer that reaches further down needs a reason, written next to its
exception in ``SKIPS``; an exception no longer used fails too. Read from the source (every ``import`` statement, at
any depth), so a new module cannot quietly add an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import orchestrator

PACKAGE = Path(orchestrator.__file__).parent
BASE = {"config", "errors", "logs", "tokens", "prompts", "tracing", "isolation", "egress", "time_budget"}
BELOW: dict[str, set[str]] = {
    "__main__": {"cli"},
    "cli": {"api", "worker"},  # operators reach the ledger directly; producers' commands go through the api
    "api": {"worker"},  # the producers' front door: a shell over the ledger, like the workers
    "worker": {"workflow"},  # a shell: what it knows of the program comes through the workflow
    "workflow": {"act"},
    "act": {"validate", "select"},
    "validate": {"llm", "sandbox", "skills"},
    "select": {"llm", "sandbox", "skills"},
    "llm": set(),
    "sandbox": set(),
    "skills": set(),
    "deploy": {"sandbox"},  # the compose stack's images, built like the sandbox image
    "testing": {"llm", "sandbox"},  # fakes of the model and of the sandbox, for tests only
}
BASE_RULES: dict[str, set[str]] = {
    "config": {"errors", "egress"},
    "egress": set(),  # the operator's egress grants: a settings section of its own
    "prompts": set(),
    "errors": set(),
    "isolation": {"errors"},  # bounded child processes for parsing untrusted data
    "logs": set(),
    "tokens": set(),
    "tracing": set(),
    "time_budget": {"config"},  # the one rule for "the Act's time is up", read by the Act and the worker
    "__init__": set(),
}
SKIPS: dict[tuple[str, str], str] = {
    ("api", "workflow"): "job ids are made and checked by the workflow's request rules, one home for both",
    ("cli", "workflow"): "`run` is the embedded driver: it runs the goal machine in this process, with no worker",
    ("cli", "deploy"): "`compose …` builds the stack's images and writes its .env",
    ("cli", "sandbox"): "`sandbox …` and `bench sandbox` use the sandbox on its own, with no goal around it",
    ("cli", "skills"): "`skills list/show` read a library on their own",
    ("cli", "validate"): "`validate` checks an output folder on its own",
    ("cli", "llm"): "`scripted-llm`/`record-llm` serve and record models on their own; `validate --model` asks one",
    ("workflow", "llm"): "the runtime factory opens the model and the planner asks it (the Act is not involved)",
    ("workflow", "sandbox"): "the runtime factory builds the sandbox runner the Act's tools run in",
    ("worker", "sandbox"): "readiness pings the engine and looks up the images; a job's containers are removed",
    ("worker", "llm"): "readiness asks the worker's model server which models it serves (GET /models)",
    ("worker", "skills"): "readiness checks the worker's skills folder holds a skill",
    ("workflow", "skills"): "the runtime opens the skills library; results name skill versions",
    ("workflow", "select"): "the planner shortlists skills before any Act",
    ("workflow", "validate"): "Reflect validates the goal's whole output; plans state expected outputs as rules",
    ("act", "llm"): "the Act loop asks the model each turn",
    ("act", "sandbox"): "the Act's tools run scripts and programs in the sandbox",
    ("act", "skills"): "the Act reads its skill (L2, L3)",
}


def _allowed(area: str, target: str) -> bool:
    if area in BASE_RULES:
        return target in BASE_RULES[area]
    return target in BASE or target in BELOW.get(area, set()) or (area, target) in SKIPS


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
    known = set(BELOW) | set(BASE_RULES)
    assert areas <= known, f"areas without a rule: {sorted(areas - known)}"


def test_imports_only_point_down_one_layer_unless_a_reason_says_why():
    wrong = [f"{where}: {area} imports {target}" for area, target, where in _edges() if not _allowed(area, target)]
    assert not wrong, "imports against the layers (add a reason to SKIPS only if it is one):\n" + "\n".join(wrong)


def test_every_exception_has_a_reason_and_is_still_needed():
    used = {(area, target) for area, target, _ in _edges()}
    assert all(len(reason) >= 20 for reason in SKIPS.values())
    stale = sorted(set(SKIPS) - used)
    assert not stale, f"exceptions nothing needs any more (remove them): {stale}"


WORKER_ENVIRONMENT = {"orchestrator/worker/readiness.py", "orchestrator/worker/containers.py"}
"""The worker's own environment (is this machine able to run phases; the job's containers on its engine): the only
modules of the worker that reach below the workflow, and only to the layers ``SKIPS`` names for the worker."""


def _worker_below_the_workflow(edges: list[tuple[str, str, str]]) -> list[str]:
    """Where a worker module other than the environment's reaches below the workflow."""
    return [
        where
        for area, target, where in edges
        if area == "worker" and target not in {"workflow", *BASE} and where.rsplit(":", 1)[0] not in WORKER_ENVIRONMENT
    ]


def test_the_worker_is_a_shell_over_the_workflow():
    assert not _worker_below_the_workflow(_edges()), f"only {sorted(WORKER_ENVIRONMENT)} reach below the workflow"
    assert {key[1] for key in SKIPS if key[0] == "worker"} == {"sandbox", "llm", "skills"}


def test_nothing_in_the_package_imports_the_test_fakes():
    users = [where for area, target, where in _edges() if target == "testing"]
    assert not users, f"orchestrator.testing is for tests only, imported at: {users}"


def test_the_rules_can_fail_on_an_upward_import_and_on_a_skip_without_a_reason(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from orchestrator.workflow.embedded import run_goal\nimport orchestrator.cli\n")
    assert {area for area, _ in _imported_areas(bad)} == {"workflow", "cli"}
    assert not _allowed("act", "workflow") and not _allowed("workflow", "cli")
    assert not _allowed("worker", "act") and not _allowed("worker", "validate")  # no skipping to the bottom
    assert _worker_below_the_workflow([("worker", "sandbox", "orchestrator/worker/tasks.py:3")]) == [
        "orchestrator/worker/tasks.py:3"
    ]
    assert not _worker_below_the_workflow([("worker", "sandbox", "orchestrator/worker/readiness.py:3")])
    assert not _allowed("cli", "act")  # a skip nobody gave a reason for
    assert _allowed("workflow", "act") and _allowed("worker", "config")


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
