"""The toolchain policy: which programs ``run_command`` may start, decided on the host before any container exists.

"Allowed" means: the *first word* of the command line names a program of the allowlist (``sandbox.allowed_commands``)
by its bare name, which the container looks up on its fixed ``PATH``. The other words reach that program as they
are, one argument each, never through a shell. The allowlist chooses entry points, it is not the security boundary:
an allowed interpreter (``bash``, ``python3``, ``node``) runs whatever code it is given, so allowing ``bash`` means
allowing ``bash -c ANYTHING`` — inside the same container, with no network, a read-only skill, ``build/`` as the
only writable place and the same limits. Remove the interpreters from the list to allow only the named tools.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.errors import SandboxRefused
from orchestrator.sandbox.limits import check_argv, launcher_header

_PROGRAM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


@dataclass(frozen=True)
class ProgramCommand:
    """An allowed program and its arguments, ready to be handed to a container."""

    program: str
    args: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return self.program

    @property
    def argv(self) -> list[str]:
        return [self.program, *self.args]

    @property
    def expects_json(self) -> bool:
        return False

    @property
    def in_build(self) -> bool:
        return False

    def launcher_header(self, timeout_s: float) -> bytes:
        return launcher_header(self.argv, timeout_s)


def resolve_command(argv: Sequence[str], allowed: Sequence[str]) -> ProgramCommand:
    """``argv`` as a :class:`ProgramCommand`, or :class:`SandboxRefused` naming the allowed programs."""
    words = check_argv(argv, where="tool:run_command")
    listed = ", ".join(allowed) or "(none)"
    if not words or not words[0].strip():
        raise SandboxRefused(
            "no program given",
            where="tool:run_command",
            next_step=f"give a command line whose first word is one of: {listed}",
            retryable=False,
            violation="empty_command",
            allowed=list(allowed),
        )
    program = words[0]
    if program not in allowed or not _PROGRAM.match(program):
        raise SandboxRefused(
            f"program {program!r} is not allowed (allowed: {listed})",
            where="tool:run_command",
            next_step=f"use one of: {listed} (by bare name, no path)",
            retryable=False,
            violation="command_not_allowed",
            program=program,
            allowed=list(allowed),
        )
    return ProgramCommand(program=program, args=words[1:])
