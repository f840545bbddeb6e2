"""Building the sandbox image, and reading the tool list it carries.

One definition (``sandbox-image/Dockerfile``, ``ARG BASE_IMAGE``) serves two bases: a public Debian image where a
registry can be reached, or a Debian rootfs made with ``debootstrap`` and ``docker import`` where it cannot. Python
libraries always come from a wheelhouse made on the host, never from PyPI inside the build. The build is skipped
when the image made from the same content (definition files + base + uid) already exists: found by its tag and
content hash together with its own fingerprint, never by a label alone (an image built FROM it inherits labels).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any, Literal

import docker
import docker.errors
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from orchestrator.config import Settings
from orchestrator.errors import ConfigError, ImageToolMissing, SandboxError, SandboxErrorCode
from orchestrator.logs import get_logger
from orchestrator.sandbox.engine import BUILD_IMAGE_HINT, docker_errors
from orchestrator.sandbox.image_sources import ensure_node_modules, ensure_wheelhouse
from orchestrator.sandbox.models import ImageBuild

log = get_logger(__name__)

BaseChoice = Literal["auto", "debootstrap", "public"]
PUBLIC_BASE = "debian:bookworm-slim"
DEBOOTSTRAP_BASE = "orchestrator-sandbox-base:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
LABEL_HASH = "org.orchestrator.sandbox.content-hash"
LABEL_TOOLS = "org.orchestrator.sandbox.tools"
LABEL_BASE = "org.orchestrator.sandbox.base"
LABEL_FINGERPRINT = "org.orchestrator.image.fingerprint"
SHARED_ROOTFS = Path("/var/cache/orch/rootfs")
TOOL_ALIASES = {
    "python": "python3",
    "nodejs": "node",
    "pil": "pillow",
    "pptx": "python-pptx",
    "docx": "python-docx",
    "jinja": "jinja2",
}

Progress = Callable[[str], None]


def definition_dir() -> Path:
    """``sandbox-image/`` next to the package (``ORCH_SANDBOX_IMAGE_DIR`` overrides)."""
    override = os.environ.get("ORCH_SANDBOX_IMAGE_DIR")
    folder = Path(override) if override else Path(__file__).resolve().parents[2] / "sandbox-image"
    if not (folder / "Dockerfile").is_file():
        raise ConfigError(
            f"the sandbox image definition is not at {folder}",
            where="sandbox:build-image",
            next_step="run from a checkout of the repository or set ORCH_SANDBOX_IMAGE_DIR",
        )
    return folder


def definition_files(folder: Path) -> list[Path]:
    """The files that shape the image: everything in the folder except documentation and the local wheelhouse."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix != ".md" and not p.name.startswith("."))


def content_hash(folder: Path, *, base: str, base_image: str, uid: int) -> str:
    digest = hashlib.sha256()
    for path in definition_files(folder):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(f"base={base};image={base_image};uid={uid}".encode())
    return digest.hexdigest()[:32]


# -- tools --------------------------------------------------------------------------------------------------------


def _norm(name: str) -> str:
    key = name.strip().lower().replace("_", "-")
    return TOOL_ALIASES.get(key, key)


def image_tools(client: docker.DockerClient, image: str) -> dict[str, str]:
    """The image's tool list ({"python3": "3.11.2", "node": "18.20.4", "python-pptx": "1.0.2", ...})."""
    with docker_errors("sandbox:image"):
        try:
            attrs = client.api.inspect_image(image)
        except docker.errors.ImageNotFound as e:
            raise SandboxError(
                f"sandbox image {image} is missing",
                where="sandbox:image",
                next_step=f"build it: {BUILD_IMAGE_HINT}",
                retryable=False,
                code=SandboxErrorCode.IMAGE_MISSING,
            ) from e
    raw = ((attrs.get("Config") or {}).get("Labels") or {}).get(LABEL_TOOLS)
    if not raw:
        raise SandboxError(
            f"image {image} carries no tool list (label {LABEL_TOOLS})",
            where="sandbox:image",
            next_step=f"rebuild it: {BUILD_IMAGE_HINT} --force",
            retryable=False,
            code=SandboxErrorCode.NO_TOOL_LIST,
        )
    return {str(k): str(v) for k, v in json.loads(raw).items()}


def missing_tools(tools: dict[str, str], required: Iterable[str]) -> list[str]:
    """The entries of ``required`` (names, optionally with a version specifier: ``python-pptx>=1.0``) not met."""
    available = {_norm(name): version for name, version in tools.items()}
    missing: list[str] = []
    for entry in required:
        try:
            req = Requirement(entry.strip())
            name, spec = req.name, req.specifier
        except InvalidRequirement:
            name, spec = entry.strip(), None
        version = available.get(_norm(name))
        if version is None:
            missing.append(entry)
            continue
        if spec:
            try:
                if not spec.contains(Version(version), prereleases=True):
                    missing.append(f"{entry} (image has {version})")
            except InvalidVersion:
                pass  # a tool that only says "present" satisfies any version
    return missing


def require_tools(client: docker.DockerClient, image: str, required: Iterable[str], *, skill: str = "") -> None:
    """Raise :class:`ImageToolMissing` when the image lacks a tool a skill declares."""
    required = list(required)
    if not required:
        return
    tools = image_tools(client, image)
    missing = missing_tools(tools, required)
    if missing:
        raise ImageToolMissing(
            f"skill {skill or '?'} needs {', '.join(missing)}, which the sandbox image {image} does not provide "
            f"(it has: {', '.join(f'{k} {v}' for k, v in sorted(tools.items()))})",
            where=f"skill:{skill}" if skill else "sandbox:image",
            next_step="add the tool to sandbox-image/ and rebuild, or choose another skill",
            retryable=False,
            missing=missing,
        )


# -- base images --------------------------------------------------------------------------------------------------


def _image_exists(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.api.inspect_image(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def _try_pull(client: docker.DockerClient, ref: str, say: Progress) -> bool:
    say(f"pulling {ref}")
    try:
        client.api.pull(ref)
        return True
    except docker.errors.APIError as e:
        say(f"cannot pull {ref}: {e.explanation or e}")
        return False


def resolve_base(client: docker.DockerClient, choice: BaseChoice, say: Progress) -> tuple[str, str]:
    """(kind, image reference) of the base to build on, without creating anything yet."""
    if choice == "public":
        return "public", PUBLIC_BASE
    if choice == "debootstrap":
        return "debootstrap", DEBOOTSTRAP_BASE
    if _image_exists(client, PUBLIC_BASE):
        return "public", PUBLIC_BASE
    if _image_exists(client, DEBOOTSTRAP_BASE):
        return "debootstrap", DEBOOTSTRAP_BASE
    if _try_pull(client, PUBLIC_BASE, say):
        return "public", PUBLIC_BASE
    return "debootstrap", DEBOOTSTRAP_BASE


def _rootfs_ready(path: Path) -> bool:
    return (path / "usr" / "bin" / "python3").exists() and (path / "etc" / "debian_version").is_file()


def ensure_rootfs(cache_dir: Path, say: Progress, rootfs: Path | None = None) -> Path:
    """A Debian bookworm minbase rootfs with python3: the given one, a ready one, or a fresh debootstrap."""
    candidates = [rootfs] if rootfs else [cache_dir / "rootfs-bookworm", SHARED_ROOTFS]
    for path in candidates:
        if path is not None and _rootfs_ready(path):
            return path
    target = rootfs or cache_dir / "rootfs-bookworm"
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        raise SandboxError(
            "no Debian rootfs to import and debootstrap cannot run here (it needs root and the debootstrap package)",
            where="sandbox:build-image",
            next_step="run as root with debootstrap installed, or use --base public on a machine with a registry",
            retryable=False,
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".rootfs-", dir=target.parent))  # same filesystem: rename is atomic
    say(f"debootstrap bookworm into {staging} (about a minute)")
    argv = ["debootstrap", "--variant=minbase", "--include=python3", "bookworm", str(staging), DEBIAN_MIRROR]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise SandboxError(
            f"debootstrap failed: {done.stderr.strip()[-2000:] or done.stdout.strip()[-2000:]}",
            where="sandbox:build-image",
            next_step=f"check that {DEBIAN_MIRROR} is reachable",
            retryable=True,
        )
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    return target


def ensure_debootstrap_base(
    client: docker.DockerClient, cache_dir: Path, say: Progress, rootfs: Path | None = None
) -> None:
    """Import the rootfs as ``orchestrator-sandbox-base:bookworm`` unless that image exists."""
    if _image_exists(client, DEBOOTSTRAP_BASE):
        return
    path = ensure_rootfs(cache_dir, say, rootfs)
    say(f"importing {path} as {DEBOOTSTRAP_BASE}")
    repository, tag = DEBOOTSTRAP_BASE.split(":")
    with subprocess.Popen(["tar", "-C", str(path), "-c", "."], stdout=subprocess.PIPE) as tar:
        assert tar.stdout is not None
        with docker_errors("sandbox:build-image"):
            client.api.import_image_from_data(tar.stdout, repository=repository, tag=tag)
    if tar.returncode != 0:
        raise SandboxError(f"tar of {path} failed", where="sandbox:build-image", retryable=False)


def ensure_public_base(client: docker.DockerClient, say: Progress) -> None:
    if not _image_exists(client, PUBLIC_BASE) and not _try_pull(client, PUBLIC_BASE, say):
        raise SandboxError(
            f"cannot get {PUBLIC_BASE}: no registry reachable",
            where="sandbox:build-image",
            next_step="use --base debootstrap (or --base auto)",
            retryable=False,
        )


# -- build --------------------------------------------------------------------------------------------------------


def image_fingerprint(attrs: dict[str, Any], hash_label: str, digest: str) -> str:
    """What makes an image the one made from content ``digest``, rather than a copy of its labels: its layers and
    how it starts, bound to that content hash.

    An image built FROM another inherits all of its labels, so a label alone cannot say "this is the image": the
    fingerprint, stored as a label when the image is made and compared with the image's own layers and start-up
    settings when it is looked up, tells the image from any child that added a layer or changed its command, and
    from a child we labelled with a fingerprint of its own for another hash (the browser image).
    """
    config = attrs.get("Config") or {}
    own = {
        "identity": f"{hash_label}={digest}",
        "layers": (attrs.get("RootFS") or {}).get("Layers") or [],
        **{key: config.get(key) for key in ("User", "Env", "Cmd", "Entrypoint", "WorkingDir")},
    }
    return hashlib.sha256(json.dumps(own, sort_keys=True).encode()).hexdigest()[:32]


def find_own_image(client: docker.DockerClient, tag: str, hash_label: str, digest: str) -> str | None:
    """The id of the image made from content ``digest``: the image tagged ``tag`` first, then any other carrying
    the hash, each taken only if its stored fingerprint is its own (see :func:`image_fingerprint`)."""
    candidates = [tag, *(image["Id"] for image in client.api.images(filters={"label": f"{hash_label}={digest}"}))]
    for ref in candidates:
        try:
            attrs = client.api.inspect_image(ref)
        except docker.errors.ImageNotFound:
            continue
        labels = (attrs.get("Config") or {}).get("Labels") or {}
        fingerprint = image_fingerprint(attrs, hash_label, digest)
        if labels.get(hash_label) == digest and labels.get(LABEL_FINGERPRINT) == fingerprint:
            return str(attrs["Id"])
    return None


def label_image(
    client: docker.DockerClient, built: str, tag: str, labels: dict[str, str], say: Progress, *, hash_label: str
) -> str:
    """Tag ``built`` as ``tag`` with ``labels`` (``hash_label`` among them) and its own fingerprint for that content
    hash (a label-only step: no layer is added)."""
    fingerprint = image_fingerprint(client.api.inspect_image(built), hash_label, labels[hash_label])
    dockerfile = io.BytesIO(f"FROM {built}\n".encode())
    return _stream_build(client, say, fileobj=dockerfile, tag=tag, labels={**labels, LABEL_FINGERPRINT: fingerprint})


def _stream_build(client: docker.DockerClient, say: Progress, **kwargs: Any) -> str:
    image_id: str | None = None
    tail: list[str] = []
    for event in client.api.build(decode=True, rm=True, forcerm=True, **kwargs):
        if "error" in event:
            raise SandboxError(
                f"image build failed: {event['error'].strip()}\n" + "".join(tail[-20:]),
                where="sandbox:build-image",
                next_step="read the build output above; fix sandbox-image/ and retry",
                retryable=False,
            )
        if text := event.get("stream"):
            tail.append(text)
            if text.strip():
                say(text.rstrip())
            if m := re.match(r"Successfully built ([0-9a-f]+)", text):
                image_id = m.group(1)
        if aux := event.get("aux"):
            image_id = aux.get("ID", image_id)
    if image_id is None:
        raise SandboxError("image build produced no image", where="sandbox:build-image", retryable=False)
    return image_id


def probe_tools(client: docker.DockerClient, image_id: str) -> dict[str, str]:
    """Run the image's probe (its default command) with no network and read its JSON tool list."""
    return {str(k): str(v) for k, v in _probe(client, image_id, None, "tool probe").items()}


FONT_PROBE = ["python3", "-I", "/opt/sandbox/font_probe.py"]


def probe_fonts(client: docker.DockerClient, image: str) -> dict[str, Any]:
    """The image's fonts (``sandbox-image/font_probe.py``): every fontconfig family and Latin families' widths."""
    return _probe(client, image, FONT_PROBE, "font probe")


def _probe(client: docker.DockerClient, image_id: str, command: list[str] | None, what: str) -> dict[str, Any]:
    api = client.api
    with docker_errors("sandbox:build-image"):
        container = api.create_container(
            image_id,
            command=command,
            host_config=api.create_host_config(
                network_mode="none", read_only=True, cap_drop=["ALL"], tmpfs={"/tmp": "size=64m,mode=1777"}
            ),
            environment={"HOME": "/tmp"},
            use_config_proxy=False,
        )["Id"]
        try:
            api.start(container)
            code = api.wait(container, timeout=120).get("StatusCode")
            out = api.logs(container, stdout=True, stderr=False)
            err = api.logs(container, stdout=False, stderr=True)
        finally:
            api.remove_container(container, force=True)
    try:
        if code != 0:
            raise ValueError(f"exit code {code}")
        found = json.loads(out)
        if not isinstance(found, dict):
            raise ValueError("not a JSON object")
        return found
    except ValueError as e:
        raise SandboxError(
            f"the image's {what} failed ({e}): {out[:300]!r} {err[-1000:]!r}",
            where="sandbox:build-image",
            retryable=False,
        ) from e


def build_image(
    client: docker.DockerClient,
    settings: Settings,
    *,
    base: BaseChoice = "auto",
    force: bool = False,
    wheelhouse: Path | None = None,
    node_modules: Path | None = None,
    rootfs: Path | None = None,
    say: Progress = lambda _text: None,
) -> ImageBuild:
    """Build (or find) the sandbox image and tag it as ``settings.sandbox.image``."""
    started = time.perf_counter()
    folder = definition_dir()
    image = settings.sandbox.image
    uid = settings.sandbox.uid
    with docker_errors("sandbox:build-image"):
        kind, base_image = resolve_base(client, base, say)
        digest = content_hash(folder, base=kind, base_image=base_image, uid=uid)
        existing = None if force else find_own_image(client, image, LABEL_HASH, digest)
        if existing is not None:
            client.api.tag(existing, *_split_ref(image))
            say(f"{image} is up to date (content hash {digest})")
            return ImageBuild(
                image=image,
                image_id=existing,
                content_hash=digest,
                base=kind,
                base_image=base_image,
                built=False,
                duration_ms=_ms(started),
                tools=image_tools(client, existing),
            )
        if kind == "debootstrap":
            ensure_debootstrap_base(client, settings.cache_dir, say, rootfs)
        else:
            ensure_public_base(client, say)
        wheels = ensure_wheelhouse(folder, settings.cache_dir, say, wheelhouse)
        modules = ensure_node_modules(folder, settings.cache_dir, say, node_modules)
        with tempfile.TemporaryDirectory(prefix="sandbox-image-") as context:
            for path in definition_files(folder):
                shutil.copy2(path, Path(context) / path.name)
            shutil.copytree(wheels, Path(context) / "wheelhouse", ignore=shutil.ignore_patterns(".*"))
            shutil.copytree(modules, Path(context) / "node_modules", symlinks=True)
            say(f"building on {base_image} ({kind})")
            built = _stream_build(
                client,
                say,
                path=context,
                buildargs={"BASE_IMAGE": base_image, "SANDBOX_UID": str(uid)},
                pull=False,
                nocache=force,
            )
        tools = probe_tools(client, built)
        labels = {LABEL_HASH: digest, LABEL_TOOLS: json.dumps(tools, sort_keys=True), LABEL_BASE: kind}
        previous = _image_id(client, image)
        final = label_image(client, built, image, labels, say, hash_label=LABEL_HASH)
        if previous and previous != final:
            _remove_quietly(client, previous)
    result = ImageBuild(
        image=image,
        image_id=final,
        content_hash=digest,
        base=kind,
        base_image=base_image,
        built=True,
        duration_ms=_ms(started),
        tools=tools,
    )
    log.info("sandbox.image_built", image=image, base=kind, duration_ms=result.duration_ms)
    return result


def _split_ref(ref: str) -> tuple[str, str]:
    repository, _, tag = ref.rpartition(":")
    if not repository or "/" in tag:
        return ref, "latest"
    return repository, tag


def _image_id(client: docker.DockerClient, ref: str) -> str | None:
    try:
        return str(client.api.inspect_image(ref)["Id"])
    except docker.errors.ImageNotFound:
        return None


def _remove_quietly(client: docker.DockerClient, image_id: str) -> None:
    with suppress(docker.errors.APIError):  # still used by a container or another tag: leave it
        client.api.remove_image(image_id)


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
