"""The sandbox policy: which scripts may run, with which interpreter, and the container settings that enforce it.

Everything here is decided on the host *before* a container starts. The limits themselves (network, memory, CPU,
pids, time, disk, read-only files) are enforced by the kernel through the container configuration built below.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from docker.types import LogConfig, Mount, Ulimit

from orchestrator.config import SandboxSettings
from orchestrator.errors import PathEscapeError, SandboxRefused

INTERPRETERS: dict[str, str] = {".py": "python3", ".sh": "bash", ".js": "node"}
SKILL_MOUNT = "/skill"
BUILD_DIR = "build"
INPUTS_MOUNT = "/inputs"
NODE_PATH = "/opt/node_modules"
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# The container starts before its call is known and waits on stdin. The host then writes a header: the in-container
# time limit, the number of command-line words, and the words themselves, each ended by a NUL byte (a NUL cannot
# occur inside an argument, so a newline, a quote or a leading dash in an argument stays one literal argument; no
# shell ever parses them). The rest of stdin is what the program reads (a script's args JSON). `exec` keeps the
# program under PID 1's ``timeout``, so when it exits the kernel kills every process it left behind.
# The container enforces the wall-clock limit itself (coreutils ``timeout`` as the container's first process), so a
# program cannot outlive its limit even when the orchestrator that started it dies. The host kills at the limit;
# the in-container limit is a little later so that the host normally reports the timeout first.
CONTAINER_TIMEOUT_GRACE_S = 2
_READ_CALL = (
    'set -f; IFS= read -r limit && IFS= read -r count || exit 125; argv=(); '
    'while [ "${#argv[@]}" -lt "$count" ]; do IFS= read -r -d "" word || exit 125; argv+=("$word"); done; '
)
LAUNCHER: list[str] = [
    "/bin/bash",
    "-c",
    _READ_CALL + 'exec env -u SHLVL timeout -s KILL "$limit" "${argv[@]}"',  # bash's exec re-exports SHLVL
    "orch-launch",
]
# A browser call (see sandbox/browser.py) keeps the launcher as the container's first process instead: when the
# program ends, it says on stderr whether its own time limit killed it and whether the kernel refused a new process
# or thread for the pids limit. A browser that dies of that only says "Target crashed", and one that hangs waiting
# for a thread it never got says nothing at all; so for browser calls the host waits past the in-container limit
# (BROWSER_REPORT_GRACE_S) to read the launcher's account instead of killing the container first.
PIDS_LIMIT_MARKER = "orch-sandbox: pids limit reached"
TIME_LIMIT_MARKER = "orch-sandbox: time limit reached"
BROWSER_REPORT_GRACE_S = CONTAINER_TIMEOUT_GRACE_S + 5
BROWSER_LAUNCHER: list[str] = [
    "/bin/bash",
    "-c",
    _READ_CALL + 'env -u SHLVL timeout -s KILL "$limit" "${argv[@]}"; code=$?; '
    f'if [ "$code" -eq 137 ] && [ "$SECONDS" -ge "$limit" ]; then echo "{TIME_LIMIT_MARKER}" >&2; fi; '
    "for events in /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events; do "
    'if [ -r "$events" ] && read -r _ hits < "$events" && [ "${hits:-0}" -gt 0 ]; then '
    f'echo "{PIDS_LIMIT_MARKER}: $hits processes or threads refused" >&2; break; fi; done; exit $code',
    "orch-launch",
]
MAX_ARGV_WORDS = 256
MAX_ARGV_BYTES = 128 * 1024
_SURROGATE = re.compile(r"[\ud800-\udfff]")

# C0 controls, DEL, C1 controls (U+009B is a terminal's CSI) and lone surrogates (never a real file name's text).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def has_controls(text: str) -> bool:
    """True if ``text`` holds control characters (C0, DEL, C1) or lone surrogates: not a name to pass on."""
    return _CONTROL.search(text) is not None


def escape_controls(text: str) -> str:
    """``text`` with its control characters and lone surrogates written as ``\\xNN`` / ``\\uNNNN`` escapes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def launcher(*, browser: bool) -> list[str]:
    """The container's first process: the browser launcher, which reports the limits it saw, or the plain one."""
    return BROWSER_LAUNCHER if browser else LAUNCHER


def launcher_header(argv: Sequence[str], timeout_s: float) -> bytes:
    """What the launcher reads before the program's own stdin: the limit in whole seconds, then ``argv``."""
    limit = math.ceil(timeout_s) + CONTAINER_TIMEOUT_GRACE_S
    words = b"".join(word.encode() + b"\0" for word in argv)
    return f"{limit}\n{len(argv)}\n".encode() + words


@dataclass(frozen=True)
class ScriptCommand:
    """A script that passed every host-side check, ready to be handed to a container."""

    script: str  # as given, relative to the skill root
    target: str  # the resolved file, relative to the skill root (symlinks inside the root followed)
    interpreter: str
    args: tuple[str, ...] = ()  # the script's command line (after the script path)
    python_path: str | None = None  # a package script: the folder its package imports resolve from


    @property
    def container_path(self) -> str:
        return f"{SKILL_MOUNT}/{self.target}"

    @property
    def in_build(self) -> bool:
        """Model-written code under ``build/``: its existence is checked in the job, not on the host."""
        return self.target.split("/", 1)[0] == BUILD_DIR

    @property
    def label(self) -> str:
        return self.script

    @property
    def argv(self) -> list[str]:
        run = [self.interpreter, self.container_path, *self.args]
        return ["env", f"PYTHONPATH={self.python_path}", *run] if self.python_path else run

    @property
    def expects_json(self) -> bool:
        """Scripts driven by stdin JSON answer in JSON; a script given a command line may print plain text."""
        return not self.args

    def launcher_header(self, timeout_s: float) -> bytes:
        return launcher_header(self.argv, timeout_s)


def check_argv(argv: Sequence[str], *, where: str) -> tuple[str, ...]:
    """``argv`` as a tuple of plain strings, or :class:`SandboxRefused` (NUL bytes, too many or too long words)."""
    words = tuple(argv)
    problem = None
    if any(not isinstance(word, str) for word in words):
        problem = "every command-line argument must be a string"
    elif any("\0" in word for word in words):
        problem = "a command-line argument cannot contain a NUL byte"
    elif any(_SURROGATE.search(word) for word in words):
        problem = "a command-line argument cannot contain lone surrogates (it must be UTF-8 text)"
    elif len(words) > MAX_ARGV_WORDS:
        problem = f"{len(words)} command-line arguments (at most {MAX_ARGV_WORDS})"
    elif sum(len(word.encode()) + 1 for word in words) > MAX_ARGV_BYTES:
        problem = f"the command line is longer than {MAX_ARGV_BYTES} bytes"
    if problem:
        raise SandboxRefused(
            problem, where=where, next_step="pass shorter, plain-text arguments", retryable=False, violation="bad_argv"
        )
    return words


def check_timeout(timeout_s: float) -> float:
    """The call's time limit, or ``ValueError`` unless it is a finite number (the cap is applied afterwards)."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not math.isfinite(timeout_s):
        raise ValueError(f"a time limit must be a finite number of seconds, not {timeout_s!r}")
    return float(timeout_s)


def _refuse(script: str, violation: str, message: str, next_step: str) -> SandboxRefused:
    shown = escape_controls(script)
    return SandboxRefused(
        message,
        where=f"tool:run_script:{shown}",
        next_step=next_step,
        retryable=False,
        violation=violation,
        script=shown,
    )


def resolve_script(
    skill_root: Path, script: str, allowed_extensions: Iterable[str], argv: Sequence[str] = ()
) -> ScriptCommand:
    """Check ``script`` against the policy and resolve it inside ``skill_root``, or raise :class:`SandboxRefused`.

    Refused: empty or absolute paths, any ``..`` component, control characters, an extension that is not allowed or
    has no interpreter, a path that resolves outside the root (symlinks included), a missing or non-regular file,
    and a command line that cannot be passed (see :func:`check_argv`). A path under ``build/`` is code the model
    wrote: it runs under the same rules, and the job checks that it exists (``build/`` is not on the host).
    """
    args = check_argv(argv, where=f"tool:run_script:{script!r}")
    allowed = {ext.lower() for ext in allowed_extensions}
    if not script or not script.strip():
        raise _refuse(script, "empty_path", "no script path given", "name a script relative to the skill root")
    if _CONTROL.search(script) or "\\" in script:
        raise _refuse(
            script,
            "bad_path",
            f"script path {script!r} holds control characters or backslashes",
            "use a plain path",
        )
    pure = PurePosixPath(script)
    if pure.is_absolute() or ".." in pure.parts or re.match(r"^[A-Za-z]:", script):
        raise _refuse(
            script,
            "path_escape",
            f"script path {script!r} must be relative to the skill root, without '..'",
            "name a script inside the skill folder",
        )
    parts = [p for p in pure.parts if p != "."]
    if not parts:
        raise _refuse(script, "empty_path", "no script path given", "name a script relative to the skill root")
    extension = pure.suffix.lower()
    if extension not in allowed:
        raise _refuse(
            script,
            "extension_not_allowed",
            f"script {script!r}: extension {extension or '(none)'!r} is not allowed (allowed: {sorted(allowed)})",
            "use a .py, .sh or .js script of the skill",
        )
    interpreter = INTERPRETERS.get(extension)
    if interpreter is None:
        raise _refuse(
            script,
            "no_interpreter",
            f"script {script!r}: no interpreter is known for {extension!r}",
            f"use one of {sorted(INTERPRETERS)}",
        )
    if parts[0] == BUILD_DIR:
        if len(parts) == 1:
            raise _refuse(script, "not_a_file", f"script {script!r} is a folder", "name a script file under build/")
        return ScriptCommand(script=script, target="/".join(parts), interpreter=interpreter, args=args)
    root = skill_root.resolve()
    try:
        resolved = (root / PurePosixPath(*parts)).resolve()
        exists, is_file = resolved.exists(), resolved.is_file()
    except (OSError, RuntimeError) as e:  # a name too long for the file system, a symlink loop
        raise _refuse(
            script, "bad_path", f"script {script!r} cannot be resolved: {getattr(e, 'strerror', None) or e}",
            "name a script file of the skill",
        ) from e
    if not resolved.is_relative_to(root):
        raise _refuse(
            script,
            "path_escape",
            f"script {script!r} resolves outside the skill root (symlink to {resolved})",
            "run a script that lives inside the skill folder",
        )
    if not exists:
        raise _refuse(script, "not_found", f"script {script!r} does not exist in the skill", "list the skill's files")
    if not is_file:
        raise _refuse(script, "not_a_file", f"script {script!r} is not a regular file", "name a script file")
    target = resolved.relative_to(root).as_posix()
    if _CONTROL.search(target) or "\\" in target:
        raise _refuse(
            script,
            "bad_path",
            f"script {script!r} resolves to {target!r}, which holds control characters or backslashes",
            "run a script whose real path is plain",
        )
    if target.split("/", 1)[0] == BUILD_DIR:
        raise _refuse(
            script,
            "build_script",
            f"script {script!r} is a link of the skill into build/",
            "name the file under build/ directly",
        )
    return ScriptCommand(
        script=script, target=target, interpreter=interpreter, args=args, python_path=_package_path(root, resolved)
    )


def _package_path(root: Path, script: Path) -> str | None:
    """For a ``.py`` file inside a package of the skill whose top package is not at the skill root (which is always
    on ``PYTHONPATH``), the folder holding that package first: ``from pkg.x import y`` works when the file is run by
    its path as well as with ``python -m``; the script's own folder stays first on ``sys.path`` (sibling imports)."""
    if script.suffix.lower() != ".py":
        return None
    folder = script.parent
    if folder == root or not (folder / "__init__.py").is_file():
        return None
    while folder.parent != root and (folder.parent / "__init__.py").is_file():
        folder = folder.parent
    above = folder.parent.relative_to(root).as_posix()
    if above == "." or ":" in above:  # the skill root is on PYTHONPATH already; ':' is PYTHONPATH's separator
        return None
    return f"{SKILL_MOUNT}/{above}:{SKILL_MOUNT}"


def safe_build_path(rel_path: str) -> str:
    """``rel_path`` normalised to a POSIX path inside ``build/``, or :class:`PathEscapeError`."""
    if not rel_path or _CONTROL.search(rel_path) or "\\" in rel_path:
        raise PathEscapeError(f"bad build path {rel_path!r}", where="sandbox:build", path=rel_path)
    pure = PurePosixPath(rel_path)
    parts = [p for p in pure.parts if p not in (".", "")]
    if pure.is_absolute() or ".." in parts or not parts:
        raise PathEscapeError(
            f"build path {rel_path!r} must be relative, inside build/, without '..'",
            where="sandbox:build",
            next_step="use a path like 'deck/slides.pptx'",
            path=rel_path,
        )
    if parts[0] == BUILD_DIR and len(parts) > 1:  # tolerate "build/x" as well as "x"
        parts = parts[1:]
    return "/".join(parts)


def sandbox_environment() -> dict[str, str]:
    """The whole environment of a script: built from nothing, no host variables, no secrets."""
    return {
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "PATH": SANDBOX_PATH,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "NODE_PATH": NODE_PATH,  # require("pptxgenjs") from any working directory
        # The skill's own modules import from code anywhere, build/ included (slack-gif-creator's SKILL.md has the
        # model write `from core.gif_builder import GIFBuilder`); the runtime's own python3 runs with -I, never this.
        "PYTHONPATH": SKILL_MOUNT,
    }


def _common_hardening() -> dict[str, Any]:
    return {
        "network_mode": "none",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "privileged": False,
        # json-file logging would copy every byte of output to the host's disk (a stdout flood would fill it).
        "log_config": LogConfig(type=LogConfig.types.NONE),
        "ulimits": [Ulimit(name="nofile", soft=1024, hard=1024), Ulimit(name="core", soft=0, hard=0)],
    }


def script_host_config(settings: SandboxSettings, mounts: list[Mount], *, network: str = "none") -> dict[str, Any]:
    """Keyword arguments of ``APIClient.create_host_config`` for one script container.

    ``network`` is ``none`` unless the skill was granted egress: then the job's internal network, whose only other
    member is the job's egress proxy (``egress_proxy.py``). This is the one place a call's network is chosen.
    """
    memory = f"{settings.memory_mb}m"
    return {
        **_common_hardening(),
        "network_mode": network,
        "mem_limit": memory,
        "memswap_limit": memory,  # equal to the memory limit: no swap
        "nano_cpus": int(settings.cpus * 1_000_000_000),
        "pids_limit": settings.pids_limit,
        "read_only": True,
        "tmpfs": {
            "/tmp": f"rw,nosuid,nodev,size={settings.tmp_size_mb}m,nr_inodes={inode_limit(settings.tmp_size_mb)},"
            "mode=1777"
        },
        "shm_size": f"{settings.tmp_size_mb}m",
        "mounts": mounts,
    }


def holder_host_config(mounts: list[Mount]) -> dict[str, Any]:
    """The per-job holder only keeps the volumes mounted and serves put/get_archive; it runs nothing else."""
    return {
        **_common_hardening(),
        "mem_limit": "32m",
        "memswap_limit": "32m",
        "nano_cpus": 200_000_000,
        "pids_limit": 16,
        # Still read-only: the daemon accepts put_archive into a read-write *volume* of a read-only container,
        # and a symlink planted in build/ by a script then cannot redirect a write into the holder's own files.
        "read_only": True,
        "mounts": mounts,
    }


def build_volume_options(disk_mb: int, uid: int) -> dict[str, str]:
    """``local`` driver options of the size-limited tmpfs that is the job's ``build/`` (ENOSPC at the limit)."""
    options = f"size={disk_mb}m,nr_inodes={inode_limit(disk_mb)},uid={uid},gid={uid},mode=0755"
    return {"type": "tmpfs", "device": "tmpfs", "o": options}


def inode_limit(size_mb: int) -> int:
    """Files (and folders) a tmpfs of ``size_mb`` may hold: empty files cost no blocks, only kernel memory, so the
    count is capped too (about one per 10 KiB, at least 1024)."""
    return max(1024, size_mb * 100)


def overlay_volume_options(stub_dir: Path, skill_root: Path) -> dict[str, str] | None:
    """A read-only overlay: ``stub_dir`` (only an empty ``build/``) over the skill root; None if paths can't be used.

    With two lower layers and no upper layer the kernel mounts the overlay read-only, so the host skill folder is
    never written and no per-job folders are needed; ``build/`` exists as a mountpoint for the tmpfs volume.
    """
    text = f"{stub_dir}{skill_root}"
    if any(ch in text for ch in ",:=") or _CONTROL.search(text):
        return None  # mount(2) option syntax cannot carry these characters
    return {"type": "overlay", "device": "overlay", "o": f"lowerdir={stub_dir}:{skill_root}"}
