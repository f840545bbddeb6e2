"""Pure parts of the sandbox: the script policy, stream demultiplexing, stderr summaries, tar safety, tools."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from orchestrator.config import SandboxSettings
from orchestrator.errors import PathEscapeError, SandboxError, SandboxRefused
from orchestrator.sandbox import buildfs
from orchestrator.sandbox.image import content_hash, missing_tools
from orchestrator.sandbox.limits import (
    PIDS_LIMIT_MARKER,
    TIME_LIMIT_MARKER,
    ScriptCommand,
    overlay_volume_options,
    resolve_script,
    safe_build_path,
    script_host_config,
)
from orchestrator.sandbox.models import ScriptResult
from orchestrator.sandbox.reaper import is_orphan, owner_alive, owner_id
from orchestrator.sandbox.results import script_result
from orchestrator.sandbox.streams import Demultiplexer, OutputCollector, summarise_stderr

ALLOWED = (".py", ".sh", ".js")


def frame(kind: int, data: bytes) -> bytes:
    return bytes([kind, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


# -- script policy ------------------------------------------------------------------------------------------------


@pytest.fixture
def skill(tmp_path: Path) -> Path:
    root = tmp_path / "skill"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "make.py").write_text("print('{}')")
    (root / "run.sh").write_text("echo {}")
    (root / "tool.rb").write_text("puts 1")
    (root / "alias.py").symlink_to(root / "scripts" / "make.py")
    (tmp_path / "outside.py").write_text("print('{}')")
    (root / "escape.py").symlink_to(tmp_path / "outside.py")
    return root


def test_scripts_get_their_interpreter_by_extension(skill):
    assert resolve_script(skill, "scripts/make.py", ALLOWED).argv == ["python3", "/skill/scripts/make.py"]
    assert resolve_script(skill, "./run.sh", ALLOWED).argv == ["bash", "/skill/run.sh"]


def test_a_symlink_inside_the_skill_runs_its_target(skill):
    command = resolve_script(skill, "alias.py", ALLOWED)
    assert command.script == "alias.py" and command.target == "scripts/make.py"


@pytest.mark.parametrize(
    ("script", "violation"),
    [
        ("tool.rb", "extension_not_allowed"),
        ("scripts/make", "extension_not_allowed"),
        ("../outside.py", "path_escape"),
        ("/abs/x.py", "path_escape"),
        ("C:/x.py", "path_escape"),
        ("escape.py", "path_escape"),
        ("nope.py", "not_found"),
        ("scripts", "extension_not_allowed"),
        ("build", "extension_not_allowed"),
        ("build/x.rb", "extension_not_allowed"),
        ("build/../x.py", "path_escape"),
        ("bad\nname.py", "bad_path"),
        ("", "empty_path"),
    ],
)
def test_scripts_outside_the_policy_are_refused(skill, script, violation):
    with pytest.raises(SandboxRefused) as caught:
        resolve_script(skill, script, ALLOWED)
    assert caught.value.violation == violation
    assert caught.value.retryable is False and caught.value.next_step


def test_allowed_extensions_are_configurable_but_need_an_interpreter(skill):
    with pytest.raises(SandboxRefused) as caught:
        resolve_script(skill, "tool.rb", (*ALLOWED, ".rb"))
    assert caught.value.violation == "no_interpreter"
    with pytest.raises(SandboxRefused):
        resolve_script(skill, "run.sh", (".py",))


def test_the_launcher_header_carries_the_in_container_limit_and_each_word_nul_terminated():
    command = ScriptCommand(script="a b.py", target="a b.py", interpreter="python3")
    assert command.launcher_header(20) == b"22\n2\npython3\0/skill/a b.py\0"
    assert command.launcher_header(0.5) == b"3\n2\npython3\0/skill/a b.py\0"
    with_args = ScriptCommand(script="x.py", target="x.py", interpreter="python3", args=("a\nb", "-c", ""))
    assert with_args.launcher_header(1) == b"3\n5\npython3\0/skill/x.py\0a\nb\0-c\0\0"


def test_a_script_under_build_is_model_written_code_checked_in_the_job(skill):
    command = resolve_script(skill, "build/gen/make.js", ALLOWED, ["out.pptx"])
    assert command.in_build and command.argv == ["node", "/skill/build/gen/make.js", "out.pptx"]
    assert not command.expects_json  # a script given a command line may print plain text
    assert resolve_script(skill, "scripts/make.py", ALLOWED).expects_json


def test_a_command_line_that_cannot_be_passed_is_refused(skill):
    for argv in (["a\0b"], ["x"] * 300, ["y" * 200_000], [1]):
        with pytest.raises(SandboxRefused) as caught:
            resolve_script(skill, "scripts/make.py", ALLOWED, argv)
        assert caught.value.violation == "bad_argv"


def test_build_paths_are_normalised_or_refused():
    assert safe_build_path("deck/slides.pptx") == "deck/slides.pptx"
    assert safe_build_path("build/deck/x.txt") == "deck/x.txt"
    assert safe_build_path("./a//b") == "a/b"
    for bad in ("../x", "/x", "a/../../x", "", "a\\b", "x\0"):
        with pytest.raises(PathEscapeError):
            safe_build_path(bad)


def test_overlay_options_refuse_paths_mount_cannot_carry(tmp_path):
    assert overlay_volume_options(tmp_path / "stub", tmp_path / "skill")["type"] == "overlay"
    assert overlay_volume_options(tmp_path / "stub", tmp_path / "a,b") is None
    assert overlay_volume_options(tmp_path / "stub", tmp_path / "a:b") is None


def test_script_containers_are_configured_with_every_limit():
    from orchestrator.config import SandboxSettings

    config = script_host_config(SandboxSettings(memory_mb=256, cpus=0.5, pids_limit=32, tmp_size_mb=4), [])
    assert config["network_mode"] == "none"
    assert config["mem_limit"] == config["memswap_limit"] == "256m"
    assert config["nano_cpus"] == 500_000_000 and config["pids_limit"] == 32
    assert config["read_only"] is True and config["cap_drop"] == ["ALL"]
    assert config["security_opt"] == ["no-new-privileges"]
    assert "size=4m" in config["tmpfs"]["/tmp"]
    assert config["log_config"]["Type"] == "none"


# -- streams ------------------------------------------------------------------------------------------------------


def test_frames_split_anywhere_are_reassembled():
    stream = frame(1, b'{"a": ') + frame(2, b"warn\nmore") + frame(1, b"1}") + frame(2, b" text\n")
    collector = OutputCollector(stdout_limit=1024, stderr_max_lines=10)
    demux = Demultiplexer(collector)
    for i in range(len(stream)):  # one byte at a time: the worst split
        demux.feed(stream[i : i + 1])
    collector.finish()
    assert collector.stdout_json() == (True, {"a": 1})
    assert collector.stderr_tail == ["warn", "more text"]
    assert collector.stderr_lines == 2


def test_stdout_beyond_the_cap_is_dropped_and_flagged():
    collector = OutputCollector(stdout_limit=10, stderr_max_lines=10)
    Demultiplexer(collector).feed(frame(1, b"x" * 25))
    assert collector.stdout_overflow and len(collector.stdout) == 10 and collector.stdout_bytes == 25


def test_only_the_last_stderr_lines_are_kept_and_long_lines_are_cut():
    collector = OutputCollector(stdout_limit=10, stderr_max_lines=3)
    collector.feed(2, b"".join(f"l{i}\n".encode() for i in range(10)) + b"y" * 100_000)
    collector.finish()
    assert collector.stderr_lines == 11
    assert collector.stderr_tail[:2] == ["l8", "l9"]
    assert collector.stderr_tail[2].endswith("[line cut]") and len(collector.stderr_tail[2]) < 600


def test_stdout_that_is_not_json_is_reported_as_such():
    collector = OutputCollector(stdout_limit=100, stderr_max_lines=3)
    collector.feed(1, b"hello")
    assert collector.stdout_json() == (False, None)
    assert OutputCollector(stdout_limit=100, stderr_max_lines=3).stdout_json() == (False, None)


def test_the_stderr_summary_collapses_repeats_and_keeps_the_end():
    tail = ["warning: x"] * 40 + ["Traceback (most recent call last):", "ValueError: bad input"]
    summary = summarise_stderr(tail, total_lines=600)
    assert summary.splitlines() == [
        "[558 earlier stderr lines not kept]",
        "warning: x  [x40]",
        "Traceback (most recent call last):",
        "ValueError: bad input",
    ]
    long = summarise_stderr([f"line {i} " + "z" * 80 for i in range(200)], total_lines=200, max_chars=1000)
    assert len(long) <= 1100 and "lines omitted" in long and long.endswith("z" * 80)
    assert long.splitlines()[-1].startswith("line 199")


def browser_call_ending(exit_code: int, *stderr: str):
    collector = OutputCollector(stdout_limit=100, stderr_max_lines=10)
    collector.feed(2, "".join(f"{line}\n" for line in stderr).encode())
    collector.finish()
    command = ScriptCommand(script="run.py", target="run.py", interpreter="python3")
    settings = SandboxSettings(pids_limit=48)
    return script_result(settings, 64, command, "c1", collector, "eof", exit_code, False, 9000, 5)


def test_a_browser_call_the_launcher_timed_out_is_a_timeout_and_one_that_hung_on_refused_processes_is_pids():
    hung = browser_call_ending(137, "[pid 7] Target page closed", TIME_LIMIT_MARKER, f"{PIDS_LIMIT_MARKER}: 3 refused")
    assert hung.timed_out and hung.limit == "pids" and not hung.ok
    assert hung.reason == "timed out after 5s, with new processes refused at the pids limit (48)"
    assert "pids_limit: at most 48 processes" in hung.violations and hung.next_step
    spun = browser_call_ending(137, TIME_LIMIT_MARKER)
    assert spun.timed_out and spun.limit == "timeout" and spun.reason == "timed out after 5s"
    killed = browser_call_ending(137, "Killed")  # 137 without the launcher's word: not a timeout
    assert not killed.timed_out and killed.limit is None and killed.reason == "exit code 137"


def test_a_refused_result_has_the_violation():
    result = ScriptResult.refused("x.rb", "not allowed", "extension_not_allowed: not allowed")
    assert not result.ok and result.exit_code is None and result.violations == ["extension_not_allowed: not allowed"]


# -- tar safety ---------------------------------------------------------------------------------------------------


def tar_of(*members: tuple[str, bytes | None, str | None]) -> list[bytes]:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            elif data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    raw = buffer.getvalue()
    return [raw[i : i + 700] for i in range(0, len(raw), 700)]  # chunks, as get_archive streams them


def test_export_takes_regular_files_and_skips_links(tmp_path):
    chunks = tar_of(
        ("build", None, None),
        ("build/a.txt", b"A", None),
        ("build/sub/b.txt", b"BB", None),
        ("build/link", None, "/etc/passwd"),
    )
    files = buildfs.extract_archive(chunks, tmp_path / "out")
    assert [(f.path, f.size) for f in files] == [("a.txt", 1), ("sub/b.txt", 2)]
    assert not (tmp_path / "out" / "link").exists()


@pytest.mark.parametrize("name", ["/etc/evil", "build/../../evil"])
def test_export_refuses_members_that_leave_the_folder(tmp_path, name):
    with pytest.raises(PathEscapeError):
        buildfs.extract_archive(tar_of((name, b"x", None)), tmp_path / "out")
    assert not (tmp_path / "evil").exists()


def test_a_file_archive_creates_parents_owned_by_the_sandbox_user():
    raw = buildfs.file_archive("a/b/c.txt", b"data", uid=65534)
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert list(members) == ["a", "a/b", "a/b/c.txt"]
    assert all(m.uid == 65534 for m in members.values()) and members["a/b/c.txt"].size == 4


def test_reading_a_single_file_respects_the_size_cap():
    chunks = tar_of(("f.txt", b"x" * 100, None))
    assert buildfs.read_single_file(chunks, max_bytes=100) == b"x" * 100
    with pytest.raises(SandboxError):
        buildfs.read_single_file(tar_of(("f.txt", b"x" * 100, None)), max_bytes=99)


def test_go_file_modes_tell_regular_files_apart():
    assert buildfs.stat_is_regular({"mode": 0o644})
    assert not buildfs.stat_is_regular({"mode": (1 << 27) | 0o777})  # symlink
    assert not buildfs.stat_is_regular({"mode": (1 << 31) | 0o755})  # folder


# -- owners, tools, image hash ------------------------------------------------------------------------------------


def test_owners_are_alive_while_their_process_lives():
    assert owner_alive(owner_id()) is True
    host = owner_id().split(":")[0]
    assert owner_alive(f"{host}:999999999:1") is False
    assert owner_alive("another-host:1:1") is None


def test_orphans_are_dead_owners_or_old_foreign_resources():
    host = owner_id().split(":")[0]
    dead = {"p.owner": f"{host}:999999999:1", "p.created": "1000"}
    alive = {"p.owner": owner_id(), "p.created": "1000"}
    foreign = {"p.owner": "elsewhere:5:5", "p.created": "1000"}
    now = 1000 + 60
    assert is_orphan(dead, "p", older_than_s=0, foreign_after_s=3600, now=now)
    assert not is_orphan(dead, "p", older_than_s=120, foreign_after_s=3600, now=now)
    assert not is_orphan(alive, "p", older_than_s=0, foreign_after_s=3600, now=now)
    assert not is_orphan(foreign, "p", older_than_s=0, foreign_after_s=3600, now=now)
    assert is_orphan(foreign, "p", older_than_s=0, foreign_after_s=30, now=now)


def test_declared_tools_are_matched_by_name_alias_and_version():
    tools = {
        "python3": "3.11.2",
        "node": "18.20.4",
        "python-pptx": "1.0.2",
        "Pillow": "12.2.0",
        "bash": "5.2.15",
    }
    assert missing_tools(tools, ["python", "nodejs", "python_pptx", "pillow", "PIL", "python-pptx>=1.0"]) == []
    assert missing_tools(tools, ["libreoffice", "python-pptx>=2"]) == [
        "libreoffice",
        "python-pptx>=2 (image has 1.0.2)",
    ]


def test_the_content_hash_follows_the_definition_and_the_base(tmp_path):
    folder = tmp_path / "def"
    folder.mkdir()
    (folder / "Dockerfile").write_text("FROM x\n")
    (folder / "README.md").write_text("docs")
    first = content_hash(folder, base="debootstrap", base_image="b", uid=65534)
    (folder / "README.md").write_text("docs changed")
    assert content_hash(folder, base="debootstrap", base_image="b", uid=65534) == first
    assert content_hash(folder, base="public", base_image="b", uid=65534) != first
    (folder / "Dockerfile").write_text("FROM y\n")
    assert content_hash(folder, base="debootstrap", base_image="b", uid=65534) != first


def test_an_integer_of_any_length_is_kept_as_its_digits_not_a_parse_failure():
    collector = OutputCollector(stdout_limit=1 << 20, stderr_max_lines=3)
    collector.feed(1, b'{"n": -' + b"9" * 100_000 + b', "small": 7}')
    parsed, value = collector.stdout_json()
    assert parsed and value["n"] == "-" + "9" * 100_000 and value["small"] == 7
