"""The browser: its own image (the sandbox image plus Playwright and Debian's headless Chromium) and the calls that
run in it.

Calls that need no browser run in the sandbox image and pay nothing for one. A call runs in the browser image, with
the limits of the ``browser-automation`` profile, when its skill declares that operation or when the call itself
starts a browser: a word of its command line, or a file of the skill or of ``build/`` named on it (the script
first), mentions Playwright, Puppeteer or Chromium. A crash of the browser is then reported by the limit it hit.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

import docker
import docker.errors

from orchestrator.config import SandboxSettings, Settings
from orchestrator.errors import OrchestratorError, SandboxError, SandboxErrorCode
from orchestrator.logs import get_logger
from orchestrator.sandbox.buildfolder import BuildFolder
from orchestrator.sandbox.engine import BUILD_IMAGE_HINT, docker_errors
from orchestrator.sandbox.image import (
    LABEL_TOOLS,
    Progress,
    _split_ref,
    _stream_build,
    definition_dir,
    definition_files,
    find_own_image,
    label_image,
    probe_tools,
)
from orchestrator.sandbox.image_sources import ensure_wheelhouse
from orchestrator.sandbox.limits import BUILD_DIR, SKILL_MOUNT
from orchestrator.sandbox.models import ImageBuild
from orchestrator.sandbox.profiles import apply_operations

log = get_logger(__name__)

BROWSER_OPERATION = "browser-automation"
LABEL_BROWSER_HASH = "org.orchestrator.sandbox.browser-hash"
BROWSER_MARKERS = re.compile(rb"playwright|puppeteer|chromium|chrome-headless|headless_shell", re.IGNORECASE)
SCAN_MAX_BYTES = 2 * 1024 * 1024
SCAN_MAX_FILES = 8

ReadBuild = Callable[[str], bytes | None]


# -- which calls need the browser -----------------------------------------------------------------------------------


def call_needs_browser(skill_root: Path, words: Iterable[str], read_build: ReadBuild) -> bool:
    """True when a call's command line starts a browser: a word mentions one, or a file it names does.

    ``words`` is the container's command line (the script's path included); a token naming a file of the skill
    (relative, or under ``/skill``) is read on the host, one under ``build/`` through ``read_build``. Files outside
    the skill root, larger than 2 MiB, or past the eighth are not read.
    """
    root = skill_root.resolve()
    scanned = 0
    for word in words:
        if BROWSER_MARKERS.search(word.encode("utf-8", "replace")):
            return True
        for token in word.split():
            if scanned >= SCAN_MAX_FILES:
                return False
            rel = _skill_relative(token.strip("\"'"))
            if rel is None:
                continue
            data = _read_skill_file(root, rel) if rel.split("/", 1)[0] != BUILD_DIR else read_build(rel)
            if data is None:
                continue
            scanned += 1
            if BROWSER_MARKERS.search(data[:SCAN_MAX_BYTES]):
                return True
    return False


def _skill_relative(token: str) -> str | None:
    if token.startswith(f"{SKILL_MOUNT}/"):
        token = token[len(SKILL_MOUNT) + 1 :]
    pure = PurePosixPath(token)
    if not token or pure.is_absolute() or ".." in pure.parts or token.startswith("-"):
        return None
    parts = [part for part in pure.parts if part != "."]
    return "/".join(parts) if parts and "." in parts[-1] else None  # a file name, not a bare word


def _read_skill_file(root: Path, rel: str) -> bytes | None:
    try:
        path = (root / rel).resolve()
        if not path.is_relative_to(root) or not path.is_file() or path.stat().st_size > SCAN_MAX_BYTES:
            return None
        return path.read_bytes()
    except (OSError, RuntimeError):
        return None


def browser_call_settings(
    client: docker.DockerClient, settings: SandboxSettings, skill_root: Path, words: Iterable[str], build: BuildFolder
) -> SandboxSettings | None:
    """The settings of a call that starts a browser (the browser image's id, the browser profile's limits over
    ``settings``), or None for a call that does not (see :func:`call_needs_browser`)."""

    def read_build(rel_path: str) -> bytes | None:
        try:
            return build.read_file(rel_path, max_bytes=SCAN_MAX_BYTES)
        except OrchestratorError:
            return None

    if not call_needs_browser(skill_root, words, read_build):
        return None
    image = browser_image_id(client, settings.browser_image)
    return apply_operations(settings, [BROWSER_OPERATION]).model_copy(update={"image": image})


def browser_image_id(client: docker.DockerClient, image: str) -> str:
    """The id of the browser image, or :class:`SandboxError` (``image_missing``) saying how to build it."""
    with docker_errors("sandbox:image"):
        try:
            return str(client.api.inspect_image(image)["Id"])
        except docker.errors.ImageNotFound as e:
            raise SandboxError(
                f"browser image {image} is missing: this call starts a browser (Playwright/Chromium)",
                where="sandbox:image",
                next_step=f"build it: {BUILD_IMAGE_HINT} (it builds the browser image after the sandbox image)",
                retryable=False,
                code=SandboxErrorCode.IMAGE_MISSING,
            ) from e


# -- building the browser image -------------------------------------------------------------------------------------


def browser_definition_dir() -> Path:
    return definition_dir() / "browser"


def browser_content_hash(folder: Path, *, sandbox_image_id: str, uid: int) -> str:
    digest = hashlib.sha256()
    for path in definition_files(folder):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(f"sandbox={sandbox_image_id};uid={uid}".encode())
    return digest.hexdigest()[:32]


def build_browser_image(
    client: docker.DockerClient,
    settings: Settings,
    sandbox: ImageBuild,
    *,
    force: bool = False,
    wheelhouse: Path | None = None,
    say: Progress = lambda _text: None,
) -> ImageBuild:
    """Build (or find) the browser image FROM the sandbox image ``sandbox`` and tag it ``sandbox.browser_image``."""
    started = time.perf_counter()
    folder = browser_definition_dir()
    image = settings.sandbox.browser_image
    uid = settings.sandbox.uid
    with docker_errors("sandbox:build-image"):
        # the full id, however the sandbox build reported it (a fresh build may name it short): a stable hash
        sandbox_id = str(client.api.inspect_image(sandbox.image_id)["Id"])
        digest = browser_content_hash(folder, sandbox_image_id=sandbox_id, uid=uid)
        outcome = {"image": image, "content_hash": digest, "base": sandbox.base, "base_image": sandbox_id}
        existing = None if force else find_own_image(client, image, LABEL_BROWSER_HASH, digest)
        if existing is not None:
            client.api.tag(existing, *_split_ref(image))
            say(f"{image} is up to date (content hash {digest})")
            tools = json.loads(client.api.inspect_image(existing)["Config"]["Labels"][LABEL_TOOLS])
            return ImageBuild(**outcome, image_id=existing, built=False, duration_ms=_ms(started), tools=tools)
        wheels = ensure_wheelhouse(folder, settings.cache_dir, say, wheelhouse)
        with tempfile.TemporaryDirectory(prefix="browser-image-") as context:
            for path in definition_files(folder):
                shutil.copy2(path, Path(context) / path.name)
            (Path(context) / "wheelhouse").mkdir()
            for wheel in locked_wheels(folder / "requirements.txt", wheels):
                shutil.copy2(wheel, Path(context) / "wheelhouse" / wheel.name)
            say(f"building {image} on {sandbox.image} ({sandbox.image_id[:19]})")
            built = _stream_build(
                client,
                say,
                path=context,
                buildargs={"SANDBOX_IMAGE": sandbox_id, "SANDBOX_UID": str(uid)},
                pull=False,
                nocache=force,
            )
        tools = probe_tools(client, built)
        labels = {LABEL_BROWSER_HASH: digest, LABEL_TOOLS: json.dumps(tools, sort_keys=True)}
        final = label_image(client, built, image, labels, say, hash_label=LABEL_BROWSER_HASH)
    log.info("sandbox.browser_image_built", image=image, duration_ms=_ms(started))
    return ImageBuild(**outcome, image_id=final, built=True, duration_ms=_ms(started), tools=tools)


def locked_wheels(requirements: Path, wheelhouse: Path) -> list[Path]:
    """The wheels of ``wheelhouse`` that ``requirements`` pins (``name==version`` lines), or :class:`SandboxError`
    naming a pin with no wheel (a shared wheelhouse holds the sandbox image's wheels too: those must stay out)."""
    found: list[Path] = []
    for line in requirements.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, version = line.partition("==")
        stem = f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-"
        matches = [wheel for wheel in sorted(wheelhouse.glob("*.whl")) if wheel.name.lower().startswith(stem)]
        if not matches:
            raise SandboxError(
                f"no wheel for {line} in {wheelhouse}",
                where="sandbox:build-image",
                next_step="add the browser image's wheels (sandbox-image/browser/requirements.txt) to the wheelhouse",
                retryable=False,
            )
        found.append(matches[0])
    return found


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
