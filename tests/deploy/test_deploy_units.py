"""The compose stack's host settings (.env) and the image build's content hash and wheelhouse closure."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest

from orchestrator.deploy import hostenv, images
from orchestrator.errors import DeployError

ROOT = Path(__file__).resolve().parents[2]


# -- .env ----------------------------------------------------------------------------------------------------------


def test_host_env_holds_absolute_paths_the_user_and_the_socket_group(tmp_path: Path) -> None:
    env = hostenv.compute(ROOT, cache_dir=tmp_path / "cache", output_root=tmp_path / "out")
    assert str(ROOT / "skills") == env.ORCH_SKILLS_DIR
    assert str(tmp_path / "out") == env.ORCH_OUTPUT_ROOT
    assert str(tmp_path / "cache") == env.ORCH_CACHE_DIR
    assert (tmp_path / "out").is_dir() and (tmp_path / "cache").is_dir()  # made by the user, not by dockerd as root
    assert (os.getuid(), os.getgid()) == (env.ORCH_UID, env.ORCH_GID)
    assert Path(env.ORCH_DOCKER_SOCKET).stat().st_gid == env.DOCKER_GID
    assert all(Path(p).is_absolute() for p in (env.ORCH_SKILLS_DIR, env.ORCH_SCENARIOS_DIR, env.ORCH_HOST_ROOT))


@pytest.mark.parametrize("name", ["with space", "dollar$HOME", "hash#x", 'quote"d'])
def test_a_path_that_env_files_cannot_carry_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(DeployError, match="characters"):
        hostenv.compute(ROOT, cache_dir=tmp_path / "cache", output_root=tmp_path / name)


def test_a_docker_host_that_is_not_a_unix_socket_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.1:2375")
    with pytest.raises(DeployError, match="not a Unix socket"):
        hostenv.compute(ROOT, cache_dir=tmp_path / "cache")


def test_writing_env_keeps_lines_a_person_added_and_replaces_ours(tmp_path: Path) -> None:
    target = tmp_path / ".env"
    first = hostenv.compute(ROOT, cache_dir=tmp_path / "c1", output_root=tmp_path / "o1")
    hostenv.write(first, target)
    target.write_text(target.read_text() + "ORCH_REDIS_PORT=7000\n")
    second = hostenv.compute(
        ROOT, cache_dir=tmp_path / "c2", output_root=tmp_path / "o2", existing=hostenv.read_values(target)
    )
    hostenv.write(second, target)
    lines = target.read_text().splitlines()
    assert f"ORCH_CACHE_DIR={tmp_path / 'c2'}" in lines
    assert not any(line.endswith("/c1") for line in lines)
    assert lines.count("ORCH_REDIS_PORT=7000") == 1
    assert sum(line.startswith("ORCH_OUTPUT_ROOT=") for line in lines) == 1


def test_writing_env_makes_the_workers_env_file_once_owner_only_and_never_rewrites_it(tmp_path: Path) -> None:
    target = tmp_path / ".env"
    chosen = tmp_path / "secrets" / "worker.env"
    chosen.parent.mkdir()
    env = hostenv.compute(ROOT, cache_dir=tmp_path / "c", output_root=tmp_path / "o",
                          existing={"ORCH_WORKER_ENV_FILE": str(chosen)})
    hostenv.write(env, target)
    assert chosen.stat().st_mode & 0o777 == 0o600
    chosen.write_text("ORCH_SECRET_API_TOKEN=kept\n")
    again = hostenv.compute(ROOT, cache_dir=tmp_path / "c", output_root=tmp_path / "o",
                            existing=hostenv.read_values(target))
    hostenv.write(again, target)
    assert str(chosen) == again.ORCH_WORKER_ENV_FILE  # an operator's choice is kept on rewrite
    assert chosen.read_text() == "ORCH_SECRET_API_TOKEN=kept\n"
    default = hostenv.compute(ROOT, cache_dir=tmp_path / "c", output_root=tmp_path / "o")
    assert str(ROOT.resolve() / ".env.worker") == default.ORCH_WORKER_ENV_FILE


def test_the_redis_password_and_flower_login_are_random_kept_on_rewrite_and_owner_only(tmp_path: Path) -> None:
    target = tmp_path / ".env"
    made = [hostenv.compute(ROOT, cache_dir=tmp_path / "c", output_root=tmp_path / "o") for _ in range(2)]
    assert made[0].ORCH_REDIS_PASSWORD != made[1].ORCH_REDIS_PASSWORD  # random, never a fixed default
    assert made[0].ORCH_FLOWER_AUTH != made[1].ORCH_FLOWER_AUTH
    assert len(made[0].ORCH_REDIS_PASSWORD) >= 24 and len(made[0].ORCH_FLOWER_AUTH.split(":")[1]) >= 16
    hostenv.write(made[0], target)
    assert target.stat().st_mode & 0o777 == 0o600
    again = hostenv.compute(ROOT, cache_dir=tmp_path / "c", output_root=tmp_path / "o",
                            existing=hostenv.read_values(target))
    assert (again.ORCH_REDIS_PASSWORD, again.ORCH_FLOWER_AUTH) == (made[0].ORCH_REDIS_PASSWORD,
                                                                    made[0].ORCH_FLOWER_AUTH)
    url = hostenv.producer_broker_url(hostenv.read_values(target))
    assert url == f"redis://:{made[0].ORCH_REDIS_PASSWORD}@127.0.0.1:6380/0"


def test_the_old_default_flower_login_is_replaced_and_unsafe_secrets_are_refused(tmp_path: Path) -> None:
    env = hostenv.compute(ROOT, cache_dir=tmp_path / "c", existing={"ORCH_FLOWER_AUTH": "admin:orchestrator"})
    assert env.ORCH_FLOWER_AUTH != "admin:orchestrator" and env.ORCH_FLOWER_AUTH.startswith("admin:")
    for bad in ({"ORCH_REDIS_PASSWORD": "short"}, {"ORCH_REDIS_PASSWORD": "p@ss/word:with-url-chars"},
                {"ORCH_FLOWER_AUTH": "admin:weak"}, {"ORCH_FLOWER_AUTH": "no-colon-at-all-here"}):
        with pytest.raises(DeployError, match="compose env --write|must be"):
            hostenv.compute(ROOT, cache_dir=tmp_path / "c", existing=bad)


def test_an_env_file_not_written_by_us_is_never_overwritten(tmp_path: Path) -> None:
    target = tmp_path / ".env"
    target.write_text("SECRET=keep-me\n")
    env = hostenv.compute(ROOT, cache_dir=tmp_path / "cache", output_root=tmp_path / "out")
    with pytest.raises(DeployError, match="not written by this command"):
        hostenv.write(env, target)
    assert target.read_text() == "SECRET=keep-me\n"


# -- content hash --------------------------------------------------------------------------------------------------


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A minimal copy of the project: the image definitions, pyproject.toml, the pinned requirements, README and two
    package files."""
    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "ops" / "images", root / "ops" / "images")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    shutil.copy(ROOT / images.NO_DEPS_REQUIREMENTS, root / images.NO_DEPS_REQUIREMENTS)
    shutil.copy(ROOT / images.SDIST_REQUIREMENTS, root / images.SDIST_REQUIREMENTS)
    (root / "README.md").write_text("readme\n")
    (root / "orchestrator" / "worker").mkdir(parents=True)
    (root / "orchestrator" / "__init__.py").write_text("")
    (root / "orchestrator" / "worker" / "tasks.py").write_text("A = 1\n")
    return root


def test_the_app_hash_follows_the_package_sources_but_not_the_readme(checkout: Path) -> None:
    def digest() -> str:
        return images.content_hash("app", checkout, base="debootstrap", base_image="b")

    before = digest()
    (checkout / "README.md").write_text("another readme\n")
    (checkout / "orchestrator" / "__pycache__").mkdir()
    (checkout / "orchestrator" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert digest() == before
    (checkout / "orchestrator" / "worker" / "tasks.py").write_text("A = 2\n")
    assert digest() != before


def test_the_app_hash_follows_the_pinned_wheels_installed_without_their_dependencies(checkout: Path) -> None:
    before = images.content_hash("app", checkout, base="debootstrap", base_image="b")
    pins = checkout / images.NO_DEPS_REQUIREMENTS
    pins.write_text(pins.read_text().replace("==0.1.0", "==0.1.1"))
    assert images.content_hash("app", checkout, base="debootstrap", base_image="b") != before


def test_the_redis_hash_ignores_the_package_and_both_follow_the_base(checkout: Path) -> None:
    redis = images.content_hash("redis", checkout, base="debootstrap", base_image="b")
    (checkout / "orchestrator" / "worker" / "tasks.py").write_text("A = 3\n")
    assert images.content_hash("redis", checkout, base="debootstrap", base_image="b") == redis
    assert images.content_hash("redis", checkout, base="public", base_image="debian:bookworm-slim") != redis
    assert images.content_hash("app", checkout, base="d", base_image="b") != images.content_hash(
        "redis", checkout, base="d", base_image="b"
    )


# -- wheelhouse ----------------------------------------------------------------------------------------------------


def fake_wheel(folder: Path, name: str, requires: list[str]) -> None:
    dist = f"{name.replace('-', '_')}-1.0"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as archive:
        archive.writestr(f"{dist}.dist-info/METADATA", metadata)


def test_requirements_the_image_python_needs_but_the_host_skipped_are_found(tmp_path: Path) -> None:
    fake_wheel(tmp_path, "redis", ['async-timeout>=4.0.3; python_full_version < "3.11.3"', "packaging"])
    fake_wheel(tmp_path, "packaging", ['tomli; python_version < "3.11"', 'pywin32; sys_platform == "win32"'])
    assert images.missing_requirements(tmp_path) == ["async-timeout>=4.0.3"]
    fake_wheel(tmp_path, "async-timeout", [])
    assert images.missing_requirements(tmp_path) == []


def test_wheels_are_fetched_for_every_manylinux_the_image_glibc_accepts() -> None:
    args = images.platform_args()
    tags = args[1::2]
    assert set(args[0::2]) == {"--platform"}
    assert tags[0].startswith("manylinux_2_36_") and any(t.startswith("manylinux_2_17_") for t in tags)
    assert any(t.startswith("manylinux2014_") for t in tags)


def test_a_given_wheelhouse_without_the_project_wheel_is_refused(tmp_path: Path) -> None:
    given = tmp_path / "given"
    given.mkdir()
    fake_wheel(given, "redis", [])
    with pytest.raises(DeployError, match="skills_orchestrator"):
        images.build_wheelhouse(ROOT, tmp_path / "cache", tmp_path / "ctx", lambda _t: None, given)


# A given wheelhouse's sorting (the model wheel, the extras): tests/deploy/test_app_image_extras.py.
