"""Pure parts of the toolchain policy: which programs run_command starts, limit profiles, what lifts a limit."""

from __future__ import annotations

import pytest

from orchestrator.config import LimitProfile, SandboxSettings
from orchestrator.errors import PathEscapeError, SandboxRefused
from orchestrator.sandbox.commands import resolve_command
from orchestrator.sandbox.limits import check_argv, resolve_script, safe_build_path
from orchestrator.sandbox.profiles import apply_operations, call_timeout, lift_hint

ALLOWED = ("python3", "soffice", "pdftoppm")


def test_an_allowed_program_keeps_every_argument_literally():
    command = resolve_command(["soffice", "--headless", "a; rm -rf /", "two\nlines", ""], ALLOWED)
    assert command.argv == ["soffice", "--headless", "a; rm -rf /", "two\nlines", ""]
    assert command.launcher_header(5).endswith(b"soffice\0--headless\0a; rm -rf /\0two\nlines\0\0")


@pytest.mark.parametrize(
    "argv",
    [
        ["bash", "-c", "id"],  # not on this list
        ["/usr/bin/python3", "-c", "1"],  # a path is not the allowed bare name
        ["python3\nbash"],
        ["soffice ", "--version"],
        ["env", "soffice"],
        ["-c"],
    ],
)
def test_a_program_not_on_the_list_is_refused_with_the_list(argv):
    with pytest.raises(SandboxRefused) as caught:
        resolve_command(argv, ALLOWED)
    assert caught.value.violation == "command_not_allowed"
    assert caught.value.data["allowed"] == list(ALLOWED)
    assert "python3, soffice, pdftoppm" in caught.value.message


def test_an_empty_command_is_refused():
    with pytest.raises(SandboxRefused) as caught:
        resolve_command([], ALLOWED)
    assert caught.value.violation == "empty_command"


def test_the_default_list_has_the_document_toolchain():
    allowed = SandboxSettings().allowed_commands
    for program in ("python3", "node", "bash", "soffice", "pdftoppm", "pdftotext", "qpdf", "pandoc"):
        assert program in allowed


def test_declared_operations_raise_limits_to_the_largest_profile():
    settings = SandboxSettings(
        memory_mb=512,
        profiles={
            "process-chain": LimitProfile(memory_mb=1024, timeout_cap_s=200),
            "browser-automation": LimitProfile(memory_mb=2048, pids_limit=300),
        },
    )
    assert apply_operations(settings, []) is settings
    assert apply_operations(settings, ["fs-temp", "unknown"]) is settings
    both = apply_operations(settings, ["process-chain", "browser-automation"])
    assert (both.memory_mb, both.timeout_cap_s, both.pids_limit) == (2048, 200, 300)
    assert both.tmp_size_mb == settings.tmp_size_mb


def test_a_call_gets_the_time_it_asks_for_up_to_the_cap():
    settings = SandboxSettings(timeout_cap_s=120)
    assert call_timeout(settings, None, 20) == 20
    assert call_timeout(settings, 90, 20) == 90
    assert call_timeout(settings, 600, 20) == 120


def test_the_hint_names_the_argument_then_the_declaration_that_lifts_a_limit():
    settings = SandboxSettings()
    assert "timeout_s up to 120" in lift_hint(settings, "timeout", timeout_s=20)
    at_cap = lift_hint(settings, "timeout", timeout_s=120)
    assert "operations: [" in at_cap and "SKILL.md" in at_cap
    assert "memory_mb 2048" in lift_hint(settings, "memory")
    heavy = apply_operations(settings, ["browser-automation"])
    assert "no declaration raises" in lift_hint(heavy, "memory")


# -- hostile script paths and arguments are refusals the model can read, never a crash ------------------------------


@pytest.mark.parametrize(
    ("script", "violation"),
    [
        ("scripts/\ud800.py", "bad_path"),  # a lone surrogate (a model can send one as "\ud800" in JSON)
        ("build/\udcff.py", "bad_path"),
        ("scripts/\x9b31m.py", "bad_path"),  # C1 CSI: a terminal escape of its own
        ("scripts/" + "a" * 300 + ".py", "bad_path"),  # longer than a file name may be
        ("scripts/" + "a/" * 3000 + "x.py", "bad_path"),  # longer than a path may be
        ("scripts/loop.py", "bad_path"),  # a symlink to itself
        ("scripts/ping.py", "bad_path"),  # two symlinks pointing at each other
    ],
)
def test_a_script_path_that_cannot_name_a_file_is_refused_not_a_crash(tmp_path, script, violation):
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "loop.py").symlink_to("loop.py")
    (scripts / "ping.py").symlink_to("pong.py")
    (scripts / "pong.py").symlink_to("ping.py")
    with pytest.raises(SandboxRefused) as caught:
        resolve_script(tmp_path, script, [".py"])
    assert caught.value.violation == violation
    assert str(caught.value).encode("utf-8") and caught.value.data["script"].encode("utf-8")  # reportable text


def test_a_command_line_word_with_a_lone_surrogate_is_refused():
    with pytest.raises(SandboxRefused) as caught:
        check_argv(["ok", "bad\udc80"], where="tool:run_script")
    assert caught.value.violation == "bad_argv"


@pytest.mark.parametrize("rel", ["a\ud800.txt", "\x9bx.txt", "a/\x85b.txt"])
def test_a_build_path_with_surrogates_or_c1_controls_is_refused(rel):
    with pytest.raises(PathEscapeError):
        safe_build_path(rel)
