"""Real skills' ways of running code, on the real engine: command lines, model-written code under build/, the
allowed toolchain (run_command), per-call time and heavier profiles, and LibreOffice → PDF → PNG in the sandbox."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from sandbox_helpers import TEST_LABEL_PREFIX, tree_digest

from orchestrator.config import SandboxSettings
from orchestrator.errors import SandboxRefused
from orchestrator.sandbox.docker import SandboxRunner
from orchestrator.sandbox.thumbnails import office_thumbnail

ECHO_ARGV = "import json, sys\njson.dump({'argv': sys.argv[1:], 'stdin': sys.stdin.read()}, sys.stdout)\n"
CAP = 120  # the default timeout cap
HOSTILE_WORDS = ["a b", "-x", "--help", "l1\nl2", "", "$(id)", "`id`", "'; rm -rf / #", "ünï ✓", "\\n", " lead"]

MAKE_OFFICE = """
import json
import openpyxl
from docx import Document
from pptx import Presentation
doc = Document(); doc.add_heading("Quarterly report", 0); doc.add_paragraph("Revenue grew. " * 40)
doc.save("build/report.docx")
deck = Presentation(); slide = deck.slides.add_slide(deck.slide_layouts[0]); slide.shapes.title.text = "Q3"
deck.save("build/deck.pptx")
book = openpyxl.Workbook(); book.active["A1"] = 2; book.active["A2"] = "=A1*21"; book.save("build/sheet.xlsx")
print(json.dumps({"made": 3}))
"""


def created_containers(docker_client, since: float, job) -> set[str]:
    """Names of the containers the engine created for ``job`` since ``since`` (from its event log)."""
    events = docker_client.api.events(
        since=int(since) - 1,
        until=int(time.time()) + 1,
        decode=True,
        filters={"type": "container", "event": "create", "label": f"{TEST_LABEL_PREFIX}.managed"},
    )
    names = {event["Actor"]["Attributes"].get("name", "") for event in events}
    return {name for name in names if name.startswith(f"{job.name}-c")}  # call containers, not the holder


@pytest.fixture(scope="module")
def default_runner(sandbox_image, docker_client, tmp_path_factory) -> Iterator[SandboxRunner]:
    """The production limits (512 MiB, 128 pids, 16 MiB /tmp, 1 CPU): real skills get no declarations."""
    runner = SandboxRunner(
        SandboxSettings(image=sandbox_image, label_prefix=TEST_LABEL_PREFIX),
        docker_client,
        work_dir=tmp_path_factory.mktemp("toolchain-work"),
    )
    yield runner
    runner.close()


# -- command lines ------------------------------------------------------------------------------------------------


def test_argv_reaches_the_script_exactly_and_stdin_stays_the_args_json(make_skill, open_job):
    job = open_job(make_skill({"scripts/echo.py": ECHO_ARGV}))
    result = job.run_script("scripts/echo.py", {"k": 1}, argv=HOSTILE_WORDS)
    assert result.ok, result.reason
    assert result.stdout_json == {"argv": HOSTILE_WORDS, "stdin": '{"k": 1}'}
    assert result.command == ["python3", "/skill/scripts/echo.py", *HOSTILE_WORDS]


def test_node_and_bash_scripts_get_their_command_line_too(make_skill, open_job):
    job = open_job(
        make_skill(
            {
                "a.js": "console.log(JSON.stringify(process.argv.slice(2)))\n",
                "b.sh": 'for a in "$@"; do printf "%s|" "$a"; done\n',
            }
        )
    )
    assert job.run_script("a.js", argv=HOSTILE_WORDS).stdout_json == HOSTILE_WORDS
    plain = job.run_script("b.sh", argv=["x y", "-n", "$HOME"])
    assert plain.ok and plain.stdout_text == "x y|-n|$HOME|"  # plain text is fine for a command-line script


# -- model-written code under build/ ------------------------------------------------------------------------------


def test_a_script_written_into_build_runs_with_its_argv(make_skill, open_job):
    job = open_job(make_skill({"SKILL.md": "# s\n"}))
    job.write_file("gen/make.py", ECHO_ARGV.encode())
    result = job.run_script("build/gen/make.py", argv=["out.pptx", "60"])
    assert result.ok and result.stdout_json == {"argv": ["out.pptx", "60"], "stdin": "{}"}
    assert result.script == "build/gen/make.py" and result.command[1] == "/skill/build/gen/make.py"


def test_model_written_code_cannot_reach_the_network_the_skill_or_the_host(make_skill, open_job, tmp_path):
    (tmp_path / "host-secret.txt").write_text("TOP-SECRET")
    root = make_skill({"SKILL.md": "# s\n", "scripts/tool.py": "print(1)\n"})
    job = open_job(root)
    before = tree_digest(tmp_path)
    job.write_file(
        "attack.py",
        f"""
import errno, json, socket, sys
def attempt(fn):
    try:
        fn(); return "succeeded"
    except OSError as e:
        return errno.errorcode.get(e.errno, type(e).__name__) if e.errno else type(e).__name__
    except Exception as e:
        return type(e).__name__
def connect():
    socket.create_connection(("1.1.1.1", 80), timeout=3)
def write(path):
    open(path, "w").write("pwned")
json.dump({{
    "network": attempt(connect),
    "dns": attempt(lambda: socket.getaddrinfo("pypi.org", 443)),
    "skill_file": attempt(lambda: write("/skill/scripts/tool.py")),
    "skill_new": attempt(lambda: write("/skill/new.txt")),
    "root_fs": attempt(lambda: write("/etc/pwned")),
    "host_secret": attempt(lambda: open({str(tmp_path / "host-secret.txt")!r}).read()),
    "build": attempt(lambda: write("/skill/build/ok.txt")),
}}, sys.stdout)
""".encode(),
    )
    result = job.run_script("build/attack.py")
    assert result.ok, result.stderr_summary
    out = result.stdout_json
    assert out.pop("build") == "succeeded"
    assert out["network"] in {"ENETUNREACH", "EHOSTUNREACH", "OSError", "timeout"}
    assert out["dns"] == "gaierror"
    assert {out["skill_file"], out["skill_new"], out["root_fs"]} <= {"EROFS", "EACCES"}
    assert out["host_secret"] == "ENOENT"
    assert tree_digest(tmp_path) == before


def test_a_fork_bomb_written_by_the_model_is_contained(make_skill, open_job):
    job = open_job(make_skill({"SKILL.md": "# s\n"}))
    job.write_file("bomb.sh", b"bomb() { bomb | bomb & }\nbomb\nsleep 300\n")
    started = time.monotonic()
    result = job.run_script("build/bomb.sh", timeout_s=3)
    assert result.timed_out and not result.ok and time.monotonic() - started < 20
    assert job.run_script("build/bomb.sh", timeout_s=1).timed_out  # the job is still usable afterwards


def test_a_missing_build_script_is_refused_without_a_container(make_skill, open_job, docker_client):
    job = open_job(make_skill({"SKILL.md": "# s\n"}))
    job.wait_ready()
    since = time.time()
    before = created_containers(docker_client, since, job)  # the next call's container, made ahead of time
    with pytest.raises(SandboxRefused) as caught:
        job.run_script("build/nope.py")
    assert caught.value.violation == "not_found"
    assert created_containers(docker_client, since, job) == before


# -- run_command --------------------------------------------------------------------------------------------------


def test_run_command_runs_an_allowed_program_in_the_skill_root(make_skill, open_job):
    job = open_job(make_skill({"data/in.txt": "hello\n"}))
    result = job.run_command(["python3", "-c", "import os, sys; print(os.getcwd(), sys.argv[1:])", "a b", "-c"])
    assert result.ok and result.stdout_text == "/skill ['a b', '-c']\n"
    assert result.script == "python3" and result.exit_code == 0 and result.stdout_bytes > 0
    record = result.command_record()
    assert record.cmd[0] == "python3" and record.exit_code == 0 and record.elapsed_ms == result.duration_ms


def test_a_program_not_on_the_list_is_refused_before_any_container_starts(
    make_skill, sandbox_settings, docker_client, tmp_path
):
    settings = sandbox_settings.model_copy(update={"allowed_commands": ("python3", "pdftotext")})
    runner = SandboxRunner(settings, docker_client, work_dir=tmp_path / "work", prewarm="off", reap_on_start=False)
    try:
        with runner.open_job("refuse-cmd", make_skill({"SKILL.md": "# s\n"})) as job:
            since = time.time()
            for argv in (["bash", "-c", "id"], ["/bin/sh", "-c", "id"], ["curl", "http://x"], ["python3\nbash"]):
                with pytest.raises(SandboxRefused) as caught:
                    job.run_command(argv)
                assert "python3, pdftotext" in caught.value.message
            assert created_containers(docker_client, since, job) == set()  # prewarm is off: nothing at all
            assert job.run_command(["python3", "-c", "print(1)"]).ok
    finally:
        runner.close()


def test_arguments_are_never_a_shell_and_an_allowed_shell_stays_in_the_sandbox(make_skill, open_job, tmp_path):
    root = make_skill({"SKILL.md": "# s\n"})
    job = open_job(root)
    before = tree_digest(tmp_path)
    literal = job.run_command(["python3", "-c", "import sys; print(sys.argv[1])", "$(touch /skill/x); `id`\nnext"])
    assert literal.stdout_text == "$(touch /skill/x); `id`\nnext\n"
    # bash is allowed by default, so `bash -c` runs anything -- inside the same container and its rules.
    shell = job.run_command(
        ["bash", "-c", "echo pwned > /skill/SKILL.md; echo ok > build/from-bash.txt; exec 3<>/dev/tcp/1.1.1.1/80"]
    )
    assert not shell.ok and "Read-only file system" in shell.stderr_summary
    assert "Network is unreachable" in shell.stderr_summary or "No route" in shell.stderr_summary
    assert job.read_file("from-bash.txt") == b"ok\n"
    assert tree_digest(tmp_path) == before


# -- time and limit profiles --------------------------------------------------------------------------------------


def test_a_call_may_ask_for_more_time_up_to_the_cap_and_is_told_how(make_skill, sandbox_settings, docker_client,
                                                                    tmp_path):
    settings = sandbox_settings.model_copy(update={"timeout_cap_s": 3})
    runner = SandboxRunner(settings, docker_client, work_dir=tmp_path / "work", reap_on_start=False)
    try:
        with runner.open_job("timeouts", make_skill({"slow.sh": "sleep 2.5; echo '{}'\n"})) as job:
            short = job.run_script("slow.sh", timeout_s=1)
            assert short.timed_out and short.limit == "timeout" and "timeout_s up to 3" in short.next_step
            assert job.run_script("slow.sh", timeout_s=3).ok
            over = job.run_command(["bash", "-c", "sleep 10"], timeout_s=60)
            assert over.timed_out and over.reason == "timed out after 3s"  # asked 60, got the cap
            assert "operations: [" in over.next_step and "SKILL.md" in over.next_step
    finally:
        runner.close()


def test_a_declared_heavy_operation_gets_its_profile(make_skill, sandbox_settings, runner):
    probe = (
        "import json, os\n"
        "v1 = '/sys/fs/cgroup/memory/memory.limit_in_bytes'\n"
        "print(json.dumps(open(v1 if os.path.exists(v1) else '/sys/fs/cgroup/memory.max').read().strip()))\n"
    )
    root = make_skill({"mem.py": probe})
    with runner.open_job("plain", root) as job:
        plain = job.run_script("mem.py")
        assert int(plain.stdout_json) == sandbox_settings.memory_mb * 1024 * 1024
        hog = job.run_command(["python3", "-c", "b = []\nwhile True: b.append(bytearray(16 << 20))"])
        assert hog.limit == "memory" and "operations: [browser-automation]" in hog.next_step
    with runner.open_job("heavy", root, operations=["process-chain"]) as job:
        heavy = job.run_script("mem.py")
        expected = sandbox_settings.profiles["process-chain"].memory_mb
        assert int(heavy.stdout_json) == expected * 1024 * 1024
        assert job.settings.timeout_cap_s == sandbox_settings.profiles["process-chain"].timeout_cap_s


# -- the document toolchain, within the default limits ------------------------------------------------------------


def test_the_image_carries_the_document_toolchain(default_runner, make_skill):
    with default_runner.open_job("toolchain", make_skill({"SKILL.md": "# s\n"})) as job:
        code = (
            "import defusedxml, pandas, pdfplumber, pypdfium2, pdf2image, markitdown, yaml, pptx, docx, openpyxl\n"
            "print('ok')"
        )
        # Generous times: this checks the tools are there, not how fast a shared CI machine is.
        assert job.run_command(["python3", "-c", code], timeout_s=CAP).stdout_text == "ok\n"
        js = "require('pptxgenjs'); require('docx'); console.log('ok')"
        assert job.run_command(["node", "-e", js], timeout_s=CAP).stdout_text == "ok\n"  # NODE_PATH: any folder
        for argv in (["qpdf", "--version"], ["pandoc", "--version"], ["pdftotext", "-v"], ["markitdown", "--help"]):
            assert job.run_command(argv, timeout_s=CAP).ok, argv


def test_office_files_become_pdf_and_png_inside_the_sandbox_within_the_default_limits(default_runner, make_skill):
    with default_runner.open_job("office", make_skill({"make.py": MAKE_OFFICE})) as job:
        assert job.run_script("make.py", timeout_s=CAP).ok
        for name in ("report.docx", "deck.pptx", "sheet.xlsx"):
            thumb = office_thumbnail(job, name, timeout_s=CAP)
            assert thumb.ok, (name, thumb.reason, [s.stderr_summary for s in thumb.steps])
            assert [s.command[0] for s in thumb.steps] == ["soffice", "python3"]
            stem = name.rsplit(".", 1)[0]
            pdf = job.read_file(f".thumbnails/{name}/{stem}.pdf")
            png, sheet = job.read_file(thumb.png), job.read_file(thumb.sheet)
            assert pdf.startswith(b"%PDF-") and png.startswith(b"\x89PNG\r\n\x1a\n")
            assert sheet.startswith(b"\x89PNG\r\n\x1a\n") and thumb.pages and thumb.pages >= 1
        text = job.run_command(["pdftotext", "build/.thumbnails/report.docx/report.pdf", "-"])
        assert "Quarterly report" in text.stdout_text
        with pytest.raises(SandboxRefused):
            office_thumbnail(job, "../etc/passwd.docx")
        json.dumps([t.model_dump() for t in [thumb]])  # the thumbnail and its steps are evidence-ready


RECALC_LIKE = '''
import json, os, subprocess, sys
from pathlib import Path
import openpyxl
book = openpyxl.Workbook(); sheet = book.active
sheet["A1"] = 6; sheet["A2"] = 7; sheet["A3"] = "=A1*A2"; sheet["A4"] = "=A3/0"
book.save(sys.argv[1])
# A Basic macro in the user profile, run by LibreOffice on the document given on the command line: the way the
# public xlsx skill recalculates formulas (needs a LibreOffice whose macro sees the document as ThisComponent).
subprocess.run(["soffice", "--headless", "--terminate_after_init"], check=True, capture_output=True)
library = Path(os.path.expanduser("~/.config/libreoffice/4/user/basic/Standard"))
library.mkdir(parents=True, exist_ok=True)
(library / "Module1.xba").write_text(
    '<?xml version="1.0" encoding="UTF-8"?>\\n'
    '<!DOCTYPE script:module PUBLIC "-//OpenOffice.org//DTD OfficeDocument 1.0//EN" "module.dtd">\\n'
    '<script:module xmlns:script="http://openoffice.org/2000/script" script:name="Module1" '
    'script:language="StarBasic">Sub Recalc()\\n ThisComponent.calculateAll()\\n ThisComponent.store()\\n'
    ' ThisComponent.close(True)\\nEnd Sub\\n</script:module>'
)
url = "vnd.sun.star.script:Standard.Module1.Recalc?language=Basic&location=application"
done = subprocess.run(["timeout", sys.argv[2], "soffice", "--headless", "--norestore", url, sys.argv[1]],
                      capture_output=True, text=True)
values = [row[0].value for row in openpyxl.load_workbook(sys.argv[1], data_only=True).active.iter_rows()]
print(json.dumps({"soffice_exit": done.returncode, "values": values}))
'''


def test_a_libreoffice_macro_recalculates_a_workbook_given_on_the_command_line(default_runner, make_skill):
    with default_runner.open_job("recalc", make_skill({"scripts/recalc_like.py": RECALC_LIKE})) as job:
        result = job.run_script("scripts/recalc_like.py", argv=["build/book.xlsx", "90"], timeout_s=CAP)
        assert result.ok, (result.reason, result.stderr_summary)
        assert result.stdout_json == {"soffice_exit": 0, "values": [6, 7, 42, "#DIV/0!"]}
