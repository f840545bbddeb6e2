"""Each rule of a goal has one home, and the goal machine and the worker shell stay small.

Read from the source: a phase token or an ``X-Orch-*`` header name spelt as a string (docstrings aside) stands only
in the module that owns it, each single-home rule is defined once, and the modules keep to their sizes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import orchestrator

PACKAGE = Path(orchestrator.__file__).parent
SPELLINGS: dict[str, tuple[re.Pattern[str], str, str]] = {
    "an Act token": (re.compile(r"^act:"), "workflow/phases.py", ""),
    "a phase token": (re.compile(r"^(plan|reflect|end)$"), "workflow/phases.py", "worker/"),
    "an X-Orch-* header name": (re.compile(r"(?i)^x-orch-[a-z-]*$"), "llm/headers.py", ""),
}
"""What may be spelt as a string in its home only, within a scope (the worker keeps and queues phases by token;
elsewhere ``plan``/``reflect`` also name a model call's purpose)."""
HOMES = {
    "MAX_GOAL_CHARS": "workflow/request.py",
    "JOB_ID_PATTERN": "workflow/request.py",
    "job_id_ok": "workflow/request.py",
    "check_job_id": "workflow/request.py",
    "GoalRequest": "workflow/request.py",
    "budgeted": "workflow/request.py",
    "check_out": "worker/tenancy.py",
    "save_evidence": "workflow/evidence.py",
    "write_evidence": "workflow/evidence.py",
    "Runtimes": "workflow/runtime.py",
    "UsageLedger": "llm/usage_ledger.py",
    "LedgerModel": "llm/usage_ledger.py",
    "Spending": "llm/usage_ledger.py",
    "TimeBudget": "time_budget.py",
    "TIME_UP_MARGIN_S": "time_budget.py",
    "act_time_s": "time_budget.py",
    "JobRecord": "worker/records.py",
    "Ledger": "worker/ledger.py",
    "jobs_folder": "workflow/folders.py",
    "work_folder": "workflow/folders.py",
    "out_folder": "workflow/folders.py",
    "evidence_folder": "workflow/folders.py",
}
"""The one definition of each single-home rule: a second ``def``/``class``/assignment of the name anywhere fails."""
MAX_LINES = {"workflow/machine.py": 100, "worker/phases.py": 300}
MODULE_MAX_LINES = 600
FUNCTION_MAX_LINES = 90
"""From ``def`` to the last line of the body: a longer function is split into named steps."""


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(p.relative_to(PACKAGE)), ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(PACKAGE.rglob("*.py"))
    ]


def _strings(tree: ast.Module) -> list[tuple[str, int]]:
    """String constants, less docstrings and field names (dict keys, subscripts, ``.get`` keys)."""
    passed = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                passed.add(id(body[0].value))
        elif isinstance(node, ast.Dict):
            passed |= {id(k) for k in node.keys if k is not None}
        elif isinstance(node, ast.Subscript):
            passed.add(id(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            passed |= {id(a) for a in node.args[:1]}
    return [
        (node.value, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in passed
    ]


def _spelt_outside_home(modules: list[tuple[str, ast.Module]]) -> list[str]:
    found = []
    for name, tree in modules:
        for text, line in _strings(tree):
            for what, (pattern, home, scope) in SPELLINGS.items():
                if name != home and name.startswith(scope) and pattern.search(text):
                    found.append(f"{name}:{line} spells {what} ({text!r}); use {home}")
    return found


def _definitions(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_phase_tokens_and_header_names_are_spelt_in_their_home_only() -> None:
    assert _spelt_outside_home(_modules()) == []


def test_each_single_home_rule_is_defined_once_where_it_belongs() -> None:
    modules = _modules()
    for rule, home in HOMES.items():
        where = [name for name, tree in modules if rule in _definitions(tree)]
        assert where == [home], (rule, where)


def test_the_goal_machine_and_the_worker_shell_stay_small_and_no_module_grows_past_the_limit() -> None:
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines())
             for p in PACKAGE.rglob("*.py")}
    assert {m: n for m, n in sizes.items() if n > MAX_LINES.get(m, MODULE_MAX_LINES)} == {}


def _long_functions(modules: list[tuple[str, ast.Module]]) -> list[str]:
    return [
        f"{name}:{node.lineno} {node.name} is {node.end_lineno - node.lineno + 1} lines"
        for name, tree in modules
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > FUNCTION_MAX_LINES
    ]


def test_no_function_grows_past_the_limit() -> None:
    assert _long_functions(_modules()) == []


def test_the_checks_can_fail() -> None:
    tree = ast.parse('"""doc: act:1, end and X-Orch-Job are fine here"""\nA = f"act:{1}"\nB = {"end": "end"}\n'
                     'H = "X-Orch-Job"\n')
    assert sorted(f.split(" spells ")[1].split(" (")[0] for f in _spelt_outside_home([("worker/x.py", tree)])) == [
        "a phase token", "an Act token", "an X-Orch-* header name"
    ]
    assert "job_id_ok" in _definitions(ast.parse("def job_id_ok(x):\n    return x\n"))
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_MAX_LINES))
    long = ast.parse(f"def long():\n{body}\n\nclass C:\n    async def short(self):\n        return 1\n")
    assert _long_functions([("x.py", long)]) == [f"x.py:1 long is {FUNCTION_MAX_LINES + 1} lines"]


RECORD_WRITER = ("worker/records.py", {"write", "read", "rerun"})
"""A job's record key is built only by ``worker/records.py``, and there only in the one writer, the one reader and
``rerun`` (which names the archive of the run before, for the writer's script to copy the record into)."""
FOLDERS_HOME = "workflow/folders.py"
"""A job's folders (``<cache>/jobs/…``, ``<output root>/<job id>``) are joined there only."""


def _record_key_uses(modules: list[tuple[str, ast.Module]]) -> list[str]:
    """Where the record key is named (``_record_key``, or a ``…:job:…`` key spelt), outside its writer and reader."""
    home, functions = RECORD_WRITER
    found = []
    for name, tree in modules:
        allowed: set[int] = set()
        if name == home:
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and node.name in functions | {"_record_key"}:
                    allowed |= {id(n) for n in ast.walk(node)}
        for node in ast.walk(tree):
            named = isinstance(node, ast.Name) and node.id == "_record_key"
            spelt = isinstance(node, ast.JoinedStr) and any(
                isinstance(v, ast.Constant) and ":job:" in str(v.value) for v in node.values
            )
            if (named or spelt) and id(node) not in allowed:
                found.append(f"{name}:{node.lineno}")
    return found


def _last_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return _last_name(node.func)
    return ""


def _job_folder_joins(modules: list[tuple[str, ast.Module]]) -> list[str]:
    """``cache_dir / "jobs"`` and ``output_root / …`` written anywhere but the folders' home."""
    found = []
    for name, tree in modules:
        for node in ast.walk(tree):
            if name == FOLDERS_HOME or not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
                continue
            jobs = _last_name(node.left) == "cache_dir" and isinstance(node.right, ast.Constant) and (
                node.right.value == "jobs")
            if jobs or _last_name(node.left) == "output_root":
                found.append(f"{name}:{node.lineno}")
    return found


def test_only_the_records_module_writes_a_job_record_and_through_one_function() -> None:
    assert _record_key_uses(_modules()) == []


def test_a_job_folder_path_is_built_in_one_home() -> None:
    assert _job_folder_joins(_modules()) == []


def test_the_record_and_folder_checks_can_fail() -> None:
    writer = ast.parse('def update(r, j):\n    r.hset(_record_key(j), "a", 1)\n\n'
                       'def f(j):\n    return f"orch:job:{j}"\n')
    assert sorted(_record_key_uses([("worker/records.py", writer)])) == ["worker/records.py:2", "worker/records.py:5"]
    assert _record_key_uses([("worker/records.py", ast.parse("def write(j):\n    return _record_key(j)\n"))]) == []
    joins = ast.parse('a = settings.cache_dir / "jobs" / job_id\nb = settings.output_root / job_id\nc = x / "jobs"\n')
    assert sorted(_job_folder_joins([("worker/x.py", joins)])) == ["worker/x.py:1", "worker/x.py:2"]
