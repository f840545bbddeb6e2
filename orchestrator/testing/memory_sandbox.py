"""An in-memory :class:`~orchestrator.sandbox.protocol.SandboxBackend` for unit tests of the Act loop.

``build/`` is a dict; a "script" is a Python function registered under its path that gets the args and the files
and returns what it printed (a JSON value, or a ready :class:`ScriptResult`). No container, no isolation: it is
only for specifying what the loop does with script results. The sandbox itself is tested against the real engine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.errors import SandboxError, SandboxErrorCode
from orchestrator.sandbox.egress import EgressPlan
from orchestrator.sandbox.models import BuildFile, ScriptResult
from orchestrator.sandbox.protocol import SandboxBackend, SandboxJobArea, ScriptArgs

FakeScript = Callable[[ScriptArgs, dict[str, bytes]], Any]
"""``fn(args, files) -> stdout JSON | ScriptResult``; it may add, change or remove entries of ``files``.

A script given a command line gets ``{"argv": [...], "stdin": args}`` as its args; a command (registered by program
name in ``commands``) gets ``{"argv": [...]}``.
"""


class InMemoryJob:
    """One job: ``files`` is its ``build/``; ``calls`` lists ``(script, args)`` in order."""

    def __init__(
        self, job_id: str, scripts: Mapping[str, FakeScript], disk_mb: int, commands: Mapping[str, FakeScript]
    ) -> None:
        self.job_id = job_id
        self.files: dict[str, bytes] = {}
        self.calls: list[tuple[str, ScriptArgs]] = []
        self.closed = False
        self._scripts = scripts
        self._commands = commands
        self._limit = disk_mb * 1024 * 1024

    def _open(self) -> None:
        if self.closed:
            raise SandboxError("the sandbox job is closed", code=SandboxErrorCode.JOB_CLOSED)

    def write_file(self, rel_path: str, data: bytes) -> BuildFile:
        self._open()
        used = sum(len(v) for k, v in self.files.items() if k != rel_path)
        if used + len(data) > self._limit:
            raise SandboxError(f"build/ is full: writing {len(data)} bytes", code=SandboxErrorCode.DISK_FULL)
        self.files[rel_path] = data
        return _entry(rel_path, data)

    def read_file(self, rel_path: str, *, max_bytes: int = 10 * 1024 * 1024) -> bytes:
        self._open()
        if rel_path not in self.files:
            raise SandboxError(f"build/{rel_path} does not exist", code=SandboxErrorCode.NOT_FOUND)
        return self.files[rel_path][:max_bytes]

    def list_files(self) -> list[BuildFile]:
        return [_entry(path, data) for path, data in sorted(self.files.items())]

    def export(self, dest: Path) -> list[BuildFile]:
        for path, data in self.files.items():
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return self.list_files()

    def run_script(
        self, script: str, args: ScriptArgs = None, *, argv: Sequence[str] = (), timeout_s: float = 20
    ) -> ScriptResult:
        self._open()
        if script not in self._scripts:
            raise AssertionError(f"no fake script registered for {script!r} (have: {sorted(self._scripts)})")
        given: ScriptArgs = {"argv": list(argv), "stdin": args} if argv else args
        self.calls.append((script, given))
        return self._result(script, self._scripts[script](given, self.files), [script, *argv])

    def run_command(self, argv: Sequence[str], *, timeout_s: float = 20) -> ScriptResult:
        self._open()
        program = argv[0] if argv else ""
        if program not in self._commands:
            raise AssertionError(f"no fake command registered for {program!r} (have: {sorted(self._commands)})")
        self.calls.append((program, {"argv": list(argv)}))
        return self._result(program, self._commands[program]({"argv": list(argv)}, self.files), list(argv))

    def _result(self, label: str, printed: Any, command: list[str]) -> ScriptResult:
        if isinstance(printed, ScriptResult):
            return printed
        container = f"fake-{self.job_id}"
        if isinstance(printed, str):
            return ScriptResult(ok=True, exit_code=0, stdout_text=printed, script=label, container=container,
                                command=command, stdout_bytes=len(printed.encode()))
        return ScriptResult(ok=True, exit_code=0, stdout_json=printed, script=label, container=container,
                            command=command)

    def take_pruned(self) -> list[str]:
        return []

    def close(self) -> None:
        self.closed = True


class InMemorySandbox:
    """A backend whose jobs live in memory (``jobs``, in the order opened) and whose image has ``tools``."""

    def __init__(
        self,
        scripts: Mapping[str, FakeScript] | None = None,
        *,
        tools: dict[str, str] | None = None,
        commands: Mapping[str, FakeScript] | None = None,
        image: str = "sha256:in-memory",
    ):
        self.image = image
        """The image id reported (a test changes it to stand for a rebuilt image)."""
        self.scripts = dict(scripts or {})
        self.commands = dict(commands or {})
        self.tools = dict(tools or {"python3": "3.11", "node": "18", "bash": "5"})
        self.jobs: list[InMemoryJob] = []
        self.operations: list[tuple[str, ...]] = []  # what each job was opened with
        self.egress: list[EgressPlan | None] = []
        self.goals: list[str] = []  # the goal each job was opened for

    def open_job(
        self,
        job_id: str,
        skill_root: Path,
        *,
        disk_mb: int = 50,
        inputs_dir: Path | None = None,
        operations: Sequence[str] = (),
        goal: str = "",
        egress: EgressPlan | None = None,
    ) -> InMemoryJob:
        self.egress.append(egress)
        self.operations.append(tuple(operations))
        self.goals.append(goal or job_id)
        job = InMemoryJob(job_id, self.scripts, disk_mb, self.commands)
        self.jobs.append(job)
        return job

    def image_tools(self) -> dict[str, str]:
        return dict(self.tools)

    def image_id(self) -> str:
        return self.image


def _entry(path: str, data: bytes) -> BuildFile:
    return BuildFile(path=path, size=len(data), sha256=hashlib.sha256(data).hexdigest())


if TYPE_CHECKING:  # the fake implements the one sandbox protocol (mypy checks this; nothing runs it)

    def _implements_the_protocol(backend: InMemorySandbox, job: InMemoryJob) -> tuple[SandboxBackend, SandboxJobArea]:
        return backend, job
