"""A tool call reaches a container through a handful of files a newcomer can follow, and stays so.

Read from the source: the Act sees a job's sandbox only through the one protocol (``sandbox/protocol.py``) and the
one lazy layer (``sandbox/lazy.py``); no second protocol of a job, no forwarder (``__getattr__``), no staging module;
one class opens a backend's job on first use. The sandbox page's numbered path names files that exist, in order.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import orchestrator

PACKAGE = Path(orchestrator.__file__).parent
REPO = PACKAGE.parent
SANDBOX_PAGE = REPO / "docs" / "concepts" / "sandbox.md"
PATH_HEADING = "## How a tool call becomes a container"
ACT_MAY_IMPORT = {"protocol", "lazy", "models", "egress", "image", "thumbnails"}
"""What of ``sandbox/`` the Act uses: the protocol and the lazy layer, results, the egress grant, the image's tools,
thumbnails (calls of the protocol). Never the Docker runner, its job or ``build/`` plumbing."""
JOB_METHODS = {"write_file", "read_file", "run_script", "run_command"}
OPENS_JOBS = {"sandbox/lazy.py": "LazyJob", "cli/sandbox.py": "", "sandbox/call_bench.py": ""}
"""Who calls ``open_job``: the lazy layer (inside its class), and the CLI's ``sandbox run`` and ``bench sandbox``,
which use the runner on their own."""
GONE = {"staging.py", "workspace.py", "forwarding.py"}


def _modules(root: Path = PACKAGE) -> dict[str, ast.Module]:
    return {str(p.relative_to(root)): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(root.rglob("*.py"))}


def _sandbox_imports(tree: ast.Module) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found |= {n.split(".")[2] for n in names if n.startswith("orchestrator.sandbox.") and len(n.split(".")) > 2}
    return found


def _job_protocols(modules: dict[str, ast.Module]) -> list[str]:
    """Protocol classes that describe a job (any of its methods)."""
    found = []
    for name, tree in modules.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases
            ):
                methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
                if methods & JOB_METHODS:
                    found.append(f"{name}:{node.name}")
    return found


def _forwarders(modules: dict[str, ast.Module]) -> list[str]:
    return [
        f"{name}:{node.lineno}"
        for name, tree in modules.items()
        if name.startswith(("act/", "sandbox/", "workflow/", "testing/"))
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__getattribute__")
    ]


def _job_openers(modules: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Modules that call ``…open_job(…)``, with the classes the calls stand in ("" at module level)."""
    found: dict[str, set[str]] = {}
    for name, tree in modules.items():
        for cls in [tree, *[n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]]:
            owner = cls.name if isinstance(cls, ast.ClassDef) else ""
            inner = [n for n in ast.walk(cls)]
            if owner == "":  # module level: leave out calls inside classes
                inside = {id(m) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for m in ast.walk(c)}
                inner = [n for n in inner if id(n) not in inside]
            if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "open_job"
                   for n in inner):
                found.setdefault(name, set()).add(owner)
    return found


def _documented_path(page: str) -> list[str]:
    section = page.split(PATH_HEADING, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. `(orchestrator/[\w/]+\.py)`", section, flags=re.MULTILINE)


def test_the_act_sees_a_job_through_the_protocol_and_the_lazy_layer_only() -> None:
    modules = _modules()
    used = {name: _sandbox_imports(tree) for name, tree in modules.items() if name.startswith("act/")}
    wrong = {name: sorted(found - ACT_MAY_IMPORT) for name, found in used.items() if found - ACT_MAY_IMPORT}
    assert wrong == {}
    assert [name for name, found in used.items() if "lazy" in found] == ["act/engine.py"]
    assert [name for name, found in used.items() if "protocol" in found]  # the tools type their job by it


def test_one_protocol_of_a_job_and_no_forwarders_or_staging_modules() -> None:
    modules = _modules()
    assert _job_protocols(modules) == ["sandbox/protocol.py:SandboxJobArea"]
    assert _forwarders(modules) == []
    assert sorted(n for n in modules if Path(n).name in GONE) == []


def test_one_class_opens_a_backends_job_lazily() -> None:
    assert _job_openers(_modules()) == {name: {owner} for name, owner in OPENS_JOBS.items()}


def test_the_sandbox_page_walks_the_path_in_a_handful_of_files_that_exist() -> None:
    path = _documented_path(SANDBOX_PAGE.read_text(encoding="utf-8"))
    assert 4 <= len(path) <= 7, path
    assert [p for p in path if not (REPO / p).is_file()] == []
    assert path.index("orchestrator/act/engine.py") < path.index("orchestrator/sandbox/lazy.py") < path.index(
        "orchestrator/sandbox/docker.py"
    )
    assert "sandbox/protocol.py" in SANDBOX_PAGE.read_text(encoding="utf-8").split(PATH_HEADING, 1)[1]


def test_the_checks_can_fail() -> None:
    second = ast.parse(
        "from typing import Protocol\nclass BuildArea(Protocol):\n    def write_file(self, p, d): ...\n"
        "class Thumbs(Protocol):\n    def render(self): ...\n"
    )
    assert _job_protocols({"act/workspace.py": second}) == ["act/workspace.py:BuildArea"]
    forwarder = ast.parse("class StagedJob:\n    def __getattr__(self, name):\n        return name\n")
    assert _forwarders({"act/staging.py": forwarder}) == ["act/staging.py:2"]
    opener = ast.parse("class A:\n    def f(self):\n        self.b.open_job(1)\n\ndef g(r):\n    r.open_job(2)\n")
    assert _job_openers({"x.py": opener}) == {"x.py": {"A", ""}}
    reach = ast.parse("from orchestrator.sandbox.docker_job import SandboxJob\nfrom orchestrator.sandbox import lazy\n")
    assert _sandbox_imports(reach) == {"docker_job", "lazy"}
    page = f"{PATH_HEADING}\n\n1. `orchestrator/a.py` — x\n2. `orchestrator/b/c.py` — y\n\n## Next\n"
    page += "3. `orchestrator/d.py`"
    assert _documented_path(page) == ["orchestrator/a.py", "orchestrator/b/c.py"]
