"""What the sandbox image's build takes from outside: the wheelhouse (Python libraries, made on the host for the
image's CPython) and ``node_modules`` (``npm ci`` on the host from the committed lockfile), each cached by the hash of
its lock so a build never reaches a registry itself.
"""

from __future__ import annotations

import hashlib
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from orchestrator.errors import ConfigError, SandboxError

Progress = Callable[[str], None]
IMAGE_PYTHON = ("3.11", "cp311")  # bookworm's python3: the wheelhouse must match it


# -- wheelhouse ---------------------------------------------------------------------------------------------------


def wheel_platforms() -> list[str]:
    """Wheel tags the image's glibc (bookworm: 2.36) accepts: manylinux_2_28 first (some wheels, e.g. onnxruntime,
    exist only there), then manylinux2014 (= manylinux_2_17)."""
    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return [f"manylinux_2_28_{arch}", f"manylinux2014_{arch}"]


def ensure_wheelhouse(folder: Path, cache_dir: Path, say: Progress, given: Path | None = None) -> Path:
    """Wheels for ``requirements.txt``: a given folder, ``sandbox-image/wheelhouse``, or a cached download."""
    if given is not None:
        if not any(given.glob("*.whl")):
            raise ConfigError(f"no wheels in {given}", where="sandbox:build-image")
        return given
    local = folder / "wheelhouse"
    if any(local.glob("*.whl")):
        return local
    requirements = folder / "requirements.txt"
    platforms = wheel_platforms()
    key = hashlib.sha256(requirements.read_bytes() + " ".join(platforms).encode()).hexdigest()[:16]
    target = cache_dir / "wheelhouse" / key
    if (target / ".complete").exists():
        return target
    version, abi = IMAGE_PYTHON

    def pip_download(staging: Path) -> list[str]:
        return [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            *[arg for tag in platforms for arg in ("--platform", tag)],
            "--python-version",
            version,
            "--implementation",
            "cp",
            "--abi",
            abi,
            "-r",
            str(requirements),
            "-d",
            str(staging),
        ]

    say("downloading wheels for the image (pip download)")
    _fill_cache(
        target,
        pip_download,
        tool="pip download",
        next_step="make a wheelhouse on a connected machine and pass --wheelhouse DIR",
    )
    return target


# -- node modules -------------------------------------------------------------------------------------------------

NODE_LOCK_FILES = ("package.json", "package-lock.json")


def ensure_node_modules(folder: Path, cache_dir: Path, say: Progress, given: Path | None = None) -> Path:
    """``node_modules`` for the committed lockfile: a given folder, ``sandbox-image/node_modules``, or ``npm ci``.

    npm runs on the host (the registry is reachable from here, never from inside a build or a sandbox), with
    ``--ignore-scripts``: no package code runs while installing. The result is cached by the lockfile's hash.
    """
    if given is not None:
        if not given.is_dir() or not any(given.iterdir()):
            raise ConfigError(f"no node modules in {given}", where="sandbox:build-image")
        return given
    local = folder / "node_modules"
    if local.is_dir() and any(local.iterdir()):
        return local
    digest = hashlib.sha256()
    for name in NODE_LOCK_FILES:
        digest.update((folder / name).read_bytes() + b"\0")
    target = cache_dir / "node" / digest.hexdigest()[:16]
    if (target / ".complete").exists():
        return target / "node_modules"
    npm = shutil.which("npm")
    if npm is None:
        raise SandboxError(
            "npm is not installed on this host: the image's Node libraries are installed with `npm ci` here",
            where="sandbox:build-image",
            next_step="install npm (apt-get install npm), or pass --node-modules DIR made by `npm ci` elsewhere",
            retryable=False,
        )
    say("installing the image's Node libraries (npm ci)")
    _fill_cache(
        target,
        lambda _staging: [npm, "ci", "--ignore-scripts", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error"],
        tool="npm ci",
        next_step="check that the npm registry is reachable, or pass --node-modules DIR",
        seed=[folder / name for name in NODE_LOCK_FILES],
    )
    return target / "node_modules"


def _fill_cache(
    target: Path,
    argv: Callable[[Path], list[str]],
    *,
    tool: str,
    next_step: str,
    seed: Sequence[Path] = (),
) -> None:
    """Run ``argv(staging)`` in a fresh staging folder holding copies of ``seed``, then move the folder to ``target``
    marked ``.complete``: a failed or interrupted download never leaves a cache entry that looks finished."""
    staging = Path(tempfile.mkdtemp(prefix=f"{target.parent.name}-"))
    for path in seed:
        shutil.copy2(path, staging / path.name)
    done = subprocess.run(argv(staging), cwd=staging, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise SandboxError(
            f"{tool} failed: {done.stderr.strip()[-2000:]}",
            where="sandbox:build-image",
            next_step=next_step,
            retryable=True,
        )
    publish_staged(staging, target)


def publish_staged(staging: Path, target: Path) -> None:
    """Mark the finished ``staging`` folder ``.complete`` and move it to the cache entry ``target`` (replacing it)."""
    (staging / ".complete").touch()
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        shutil.rmtree(target)
    shutil.move(str(staging), target)
