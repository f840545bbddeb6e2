"""The contract of a job's sandbox, as the Act sees it: one ``LazyJob`` over either backend behaves the same.

Every check runs against the in-memory fake (``orchestrator.testing.InMemorySandbox``) and the real Docker runner:
staging files, the lazy start, running a script and a program, reading results back, deletions carried back, the
path rules, the disk limit, clean-up. Each check is a plain function; ``test_each_check_catches_a_broken_job`` runs
it against a job broken in exactly that behaviour, so every one of them can fail.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import leftovers

from orchestrator.errors import PathEscapeError, SandboxError, SandboxErrorCode
from orchestrator.sandbox.lazy import HostBuild, LazyJob
from orchestrator.sandbox.models import ScriptResult
from orchestrator.sandbox.protocol import SandboxBackend
from orchestrator.testing import InMemorySandbox

# -- the skill every check runs: real scripts for Docker, the same behaviour as fake scripts for the fake ---------

UPPER = """
import json, pathlib, sys
args = json.load(sys.stdin)
dest = pathlib.Path("build") / args["dest"]
dest.parent.mkdir(parents=True, exist_ok=True)
dest.write_bytes((pathlib.Path("build") / args["src"]).read_bytes().upper())
print(json.dumps({"wrote": args["dest"]}))
"""
REMOVE = """
import json, os, sys
name = json.load(sys.stdin)["name"]
os.remove(os.path.join("build", name))
print(json.dumps({"removed": name}))
"""
ECHO = """
import json, sys
given = sys.stdin.read()
print(json.dumps({"argv": sys.argv[1:], "stdin": json.loads(given) if given.strip() else None}))
"""
FAIL = """
import sys
print("no such thing", file=sys.stderr)
sys.exit(3)
"""


def _upper(args: Any, files: dict[str, bytes]) -> Any:
    files[args["dest"]] = files[args["src"]].upper()
    return {"wrote": args["dest"]}


def _remove(args: Any, files: dict[str, bytes]) -> Any:
    del files[args["name"]]
    return {"removed": args["name"]}


def _echo(given: Any, files: dict[str, bytes]) -> Any:
    return given  # the fake's convention: {"argv": [...], "stdin": args} when given a command line


def _fail(args: Any, files: dict[str, bytes]) -> Any:
    return ScriptResult(ok=False, exit_code=3, script="scripts/fail.py", stderr_summary="no such thing")


def _python3(given: Any, files: dict[str, bytes]) -> Any:
    """``python3 SCRIPT ARG…`` as a program (stdin empty): the fake script, with the rest of the line as its argv."""
    argv = given["argv"]
    return FAKE_SCRIPTS[argv[1]]({"argv": argv[2:], "stdin": None}, files)


SOURCES = {"scripts/upper.py": UPPER, "scripts/remove.py": REMOVE, "scripts/echo.py": ECHO, "scripts/fail.py": FAIL}


def _crashes_like_python(fn: Callable[[Any, dict[str, bytes]], Any]) -> Callable[[Any, dict[str, bytes]], Any]:
    """A fake script that meets a missing file fails as the real one does: a result with exit code 1."""

    def run(args: Any, files: dict[str, bytes]) -> Any:
        try:
            return fn(args, files)
        except KeyError as e:
            return ScriptResult(ok=False, exit_code=1, script="fake", stderr_summary=f"FileNotFoundError: {e}")

    return run


FAKE_SCRIPTS = {"scripts/upper.py": _crashes_like_python(_upper), "scripts/remove.py": _crashes_like_python(_remove),
                "scripts/echo.py": _echo, "scripts/fail.py": _fail}


# -- the two backends ------------------------------------------------------------------------------------------


@dataclass
class Harness:
    """Opens lazy jobs over one backend and says what of that backend is alive."""

    kind: str
    backend: SandboxBackend
    live: Callable[[], list[str]]
    skill_root: Path
    make_job: Callable[..., LazyJob] = LazyJob
    jobs: list[LazyJob] = field(default_factory=list)

    def open(self, *, disk_mb: int = 5, **kwargs: Any) -> LazyJob:
        job = self.make_job(self.backend, f"contract-{len(self.jobs)}", self.skill_root, disk_mb=disk_mb, **kwargs)
        self.jobs.append(job)
        return job


def _skill(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: contract\ndescription: contract checks\n---\n\nRun the scripts.\n")
    for rel, source in SOURCES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(source).lstrip())
    return root


def _memory_harness(skill_root: Path) -> Harness:
    backend = InMemorySandbox(FAKE_SCRIPTS, commands={"python3": _python3})
    return Harness("memory", backend, lambda: [j.job_id for j in backend.jobs if not j.closed], skill_root)


@pytest.fixture(params=["memory", "docker"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    skill_root = _skill(tmp_path / "skill")
    if request.param == "memory":
        made = _memory_harness(skill_root)
    else:
        client = request.getfixturevalue("docker_client")
        made = Harness("docker", request.getfixturevalue("runner"), lambda: leftovers(client), skill_root)
    yield made
    for job in made.jobs:
        job.close()


# -- the checks ------------------------------------------------------------------------------------------------


def check_writes_are_staged_until_a_script_runs(h: Harness) -> None:
    job = h.open()
    job.write_file("notes/a.txt", b"alpha")
    job.write_file("/skill/build/b.txt", b"beta")  # build/ as scripts see it is the same folder
    assert sorted(f.path for f in job.list_files()) == ["b.txt", "notes/a.txt"]
    assert job.read_file("build/notes/a.txt") == b"alpha"
    assert not job.started and h.live() == []  # nothing of the backend exists yet
    job.close()
    assert h.live() == []


def check_a_script_sees_the_staged_files_and_its_outputs_come_back(h: Harness) -> None:
    job = h.open()
    job.write_file("in.txt", b"hello")
    result = job.run_script("scripts/upper.py", {"src": "in.txt", "dest": "out/up.txt"})
    assert job.started and h.live() != []
    assert result.ok and result.exit_code == 0 and result.stdout_json == {"wrote": "out/up.txt"}
    assert job.read_file("out/up.txt") == b"HELLO" and job.read_file("in.txt") == b"hello"
    files = {f.path: f for f in job.list_files()}
    assert sorted(files) == ["in.txt", "out/up.txt"] and files["out/up.txt"].size == 5
    job.write_file("later.txt", b"after the start")  # writes after the start go to the backend's build/
    assert job.read_file("/build/later.txt") == b"after the start"


def check_the_command_line_and_stdin_reach_the_script(h: Harness) -> None:
    job = h.open()
    result = job.run_script("scripts/echo.py", {"n": 1}, argv=["build/x.pptx", "--flag", "two words"])
    assert result.ok and result.stdout_json == {"argv": ["build/x.pptx", "--flag", "two words"], "stdin": {"n": 1}}


def check_a_program_runs_like_a_script(h: Harness) -> None:
    job = h.open()
    job.write_file("in.txt", b"abc")
    result = job.run_command(["python3", "scripts/echo.py", "a", "b c"], timeout_s=30)
    assert job.started and result.ok and result.stdout_json == {"argv": ["a", "b c"], "stdin": None}
    assert job.read_file("in.txt") == b"abc"


def check_a_failing_script_is_a_result(h: Harness) -> None:
    job = h.open()
    result = job.run_script("scripts/fail.py")
    assert result.ok is False and result.exit_code == 3 and "no such thing" in (result.stderr_summary or "")


def check_deletions_by_a_script_are_carried_back(h: Harness, tmp_path: Path) -> None:
    job = h.open()
    job.write_file("keep.txt", b"keep")
    job.write_file("drafts/old.txt", b"old")
    result = job.run_script("scripts/remove.py", {"name": "drafts/old.txt"})
    assert result.ok and [f.path for f in job.list_files()] == ["keep.txt"]
    with pytest.raises(SandboxError) as gone:
        job.read_file("drafts/old.txt")
    assert gone.value.code is SandboxErrorCode.NOT_FOUND
    exported = job.export(tmp_path / "out")
    assert [f.path for f in exported] == ["keep.txt"] and not (tmp_path / "out" / "drafts" / "old.txt").exists()
    assert (tmp_path / "out" / "keep.txt").read_bytes() == b"keep"


def check_export_before_any_script_gives_the_staged_files(h: Harness, tmp_path: Path) -> None:
    job = h.open()
    job.write_file("deck/outline.json", b'{"title": "Q3"}')
    exported = job.export(tmp_path / "out")
    assert [f.path for f in exported] == ["deck/outline.json"]
    assert (tmp_path / "out" / "deck" / "outline.json").read_bytes() == b'{"title": "Q3"}'
    assert h.live() == []


def check_paths_stay_inside_build(h: Harness) -> None:
    job = h.open()
    for hostile in ("../escape.txt", "/etc/passwd", "build/../../x", "a/../../x"):
        with pytest.raises(PathEscapeError):
            job.write_file(hostile, b"x")
    with pytest.raises(ValueError):
        job.write_file("build/", b"x")
    job.run_script("scripts/echo.py", {})
    with pytest.raises(PathEscapeError):
        job.write_file("../escape.txt", b"x")
    with pytest.raises(PathEscapeError):
        job.read_file("../SKILL.md")
    assert job.list_files() == []


def check_reading_a_missing_file_says_not_found(h: Harness) -> None:
    job = h.open()
    for started in (False, True):
        with pytest.raises(SandboxError) as missing:
            job.read_file("nothing.txt")
        assert missing.value.code is SandboxErrorCode.NOT_FOUND
        if not started:
            job.run_script("scripts/echo.py", {})


def check_the_disk_limit_holds_before_and_after_the_start(h: Harness) -> None:
    job = h.open(disk_mb=1)
    job.write_file("small.bin", b"s" * 1000)
    with pytest.raises(SandboxError) as staged:
        job.write_file("big.bin", b"b" * (2 * 1024 * 1024))
    assert staged.value.code is SandboxErrorCode.DISK_FULL
    job.run_script("scripts/echo.py", {})
    with pytest.raises(SandboxError) as started:
        job.write_file("big.bin", b"b" * (2 * 1024 * 1024))
    assert started.value.code is SandboxErrorCode.DISK_FULL
    assert [f.path for f in job.list_files()] == ["small.bin"]  # a write that does not fit leaves nothing


def check_close_leaves_nothing_and_a_closed_job_refuses(h: Harness) -> None:
    job = h.open()
    job.write_file("a.txt", b"a")
    job.run_script("scripts/echo.py", {})
    assert h.live() != []
    job.close()
    assert h.live() == []
    for use in (lambda: job.write_file("b.txt", b"b"), lambda: job.run_script("scripts/echo.py", {}),
                lambda: job.read_file("a.txt")):
        with pytest.raises(SandboxError) as closed:
            use()
        assert closed.value.code is SandboxErrorCode.JOB_CLOSED
    job.close()  # twice is fine


CHECKS: dict[str, Callable[..., None]] = {
    name.removeprefix("check_"): fn for name, fn in list(globals().items()) if name.startswith("check_")
}


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_contract(check: str, harness: Harness, tmp_path: Path) -> None:
    _run(CHECKS[check], harness, tmp_path)


def _run(check: Callable[..., None], harness: Harness, tmp_path: Path) -> None:
    if "tmp_path" in check.__code__.co_varnames[: check.__code__.co_argcount]:
        check(harness, tmp_path)
    else:
        check(harness)


# -- every check can fail: a job broken in its behaviour, and only there, fails it ------------------------------


class _Eager(LazyJob):
    """Starts the backend's job at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._started_job("scripts")


class _LosesStagedFiles(LazyJob):
    """Opens the backend's job without copying what was staged."""

    def _started_job(self, what: str) -> Any:
        if self._job is None:
            self._staged = HostBuild(self._staged.root.parent / "empty", disk_mb=self._disk_mb)
        return super()._started_job(what)


class _DropsTheCommandLine(LazyJob):
    def run_script(self, script: str, args: Any = None, *, argv: Any = (), timeout_s: float = 20) -> Any:
        return super().run_script(script, args, timeout_s=timeout_s)


class _CutsTheProgramLine(LazyJob):
    def run_command(self, argv: Any, *, timeout_s: float = 20) -> Any:
        return super().run_command(list(argv)[:2], timeout_s=timeout_s)


class _CallsFailuresSuccess(LazyJob):
    def run_script(self, script: str, args: Any = None, *, argv: Any = (), timeout_s: float = 20) -> Any:
        result = super().run_script(script, args, argv=argv, timeout_s=timeout_s)
        return result.model_copy(update={"ok": True, "exit_code": 0})


class _KeepsListingStagedFiles(LazyJob):
    def list_files(self) -> Any:
        started = super().list_files()
        return sorted({f.path: f for f in [*self._staged.list_files(), *started]}.values(), key=lambda f: f.path)


class _ExportsNothingBeforeTheStart(LazyJob):
    def export(self, dest: Path) -> Any:
        return super().export(dest) if self.started else []


class _TrustsPaths(LazyJob):
    def write_file(self, rel_path: str, data: bytes) -> Any:
        if self.started:
            return super().write_file(rel_path, data)
        return self._staged.write_file(rel_path.removeprefix("build/"), data)


class _ReadsWithoutLooking(LazyJob):
    def read_file(self, rel_path: str, *, max_bytes: int = 10 * 1024 * 1024) -> bytes:
        if self._job is not None:
            return self._job.read_file(rel_path, max_bytes=max_bytes)
        return self._staged.read_file(rel_path, max_bytes=max_bytes)


class _StagesWithoutALimit(LazyJob):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._staged = HostBuild(self._staged.root, disk_mb=1024)


class _LeavesTheJobOpen(LazyJob):
    def close(self) -> None:
        self._closed = True
        self._job = None


BROKEN: dict[str, type[LazyJob]] = {
    "writes_are_staged_until_a_script_runs": _Eager,
    "a_script_sees_the_staged_files_and_its_outputs_come_back": _LosesStagedFiles,
    "the_command_line_and_stdin_reach_the_script": _DropsTheCommandLine,
    "a_program_runs_like_a_script": _CutsTheProgramLine,
    "a_failing_script_is_a_result": _CallsFailuresSuccess,
    "deletions_by_a_script_are_carried_back": _KeepsListingStagedFiles,
    "export_before_any_script_gives_the_staged_files": _ExportsNothingBeforeTheStart,
    "paths_stay_inside_build": _TrustsPaths,
    "reading_a_missing_file_says_not_found": _ReadsWithoutLooking,
    "the_disk_limit_holds_before_and_after_the_start": _StagesWithoutALimit,
    "close_leaves_nothing_and_a_closed_job_refuses": _LeavesTheJobOpen,
}


def test_every_check_has_a_broken_job_to_catch() -> None:
    assert sorted(BROKEN) == sorted(CHECKS)


@pytest.mark.parametrize("check", sorted(BROKEN))
def test_each_check_catches_a_broken_job(check: str, tmp_path: Path) -> None:
    broken = _memory_harness(_skill(tmp_path / "skill"))
    broken.make_job = BROKEN[check]
    try:
        with pytest.raises((AssertionError, pytest.fail.Exception, FileNotFoundError)):
            _run(CHECKS[check], broken, tmp_path)
    finally:
        for job in broken.jobs:
            job.close()
    sound = _memory_harness(_skill(tmp_path / "sound"))
    _run(CHECKS[check], sound, tmp_path / "again")  # the same check passes on the sound job
