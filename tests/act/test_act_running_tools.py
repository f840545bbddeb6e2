"""run_script with model-written code and command lines, run_command with the allowlist: what the loop and the
model see (in-memory sandbox backend; the containers themselves are specified in tests/sandbox and tests/e2e)."""

from __future__ import annotations

import json

from act_helpers import act

from orchestrator.sandbox.models import ScriptResult
from orchestrator.testing import InMemorySandbox, ScriptedModel, tool_call, tool_call_response, tool_calls_response

SECRET = "SECRET_SOURCE_LINE = 'never shown to the model'"


def tool_results(model: ScriptedModel) -> list[dict]:
    """Every tool result as first sent (later requests carry older results packed into summaries)."""
    first: dict[str, dict] = {}
    for call in model.calls:
        for m in call.messages:
            if m.role == "tool" and m.tool_call_id not in first:
                first[m.tool_call_id or ""] = json.loads(m.content or "{}")
    return list(first.values())


def test_code_the_model_wrote_runs_from_build_with_its_command_line(write_skill, skills_root, settings, tmp_path):
    write_skill("gen", "Write code and run it.")

    def make(args, files):  # noqa: ANN001, ANN202 - the fake of build/make.js
        files[args["argv"][0].removeprefix("build/")] = b"PK fake docx"
        return "written"

    sandbox = InMemorySandbox({"build/make.js": make})
    model = ScriptedModel([
        tool_call_response("write_artifact", path="build/make.js", text="console.log('written')\n"),
        tool_call_response("run_script", path="build/make.js", argv=["build/out.docx"], timeout_s=60),
        tool_call_response("finish", summary="done", outputs=["build/out.docx"]),
    ])
    no_thumbnails = settings.model_copy(update={"qa": settings.qa.model_copy(update={"thumbnails": False})})
    result = act("gen", model, skills_root=skills_root, settings=no_thumbnails, out_dir=tmp_path / "out",
                 qa_mode="off", sandbox=sandbox)
    assert result.status == "done"
    _, ran = tool_results(model)[:2]
    assert ran["ok"] is True and ran["script"] == "build/make.js" and ran["generated"] is True
    assert ran["files_changed"] == ["build/out.docx"] and ran["stdout_text"] == "written"
    assert sandbox.jobs[0].calls == [("build/make.js", {"argv": ["build/out.docx"], "stdin": None})]
    catalog = {a.path: a.type for a in result.artifacts}
    assert catalog["make.js"] == "script" and catalog["out.docx"] == "file"


def test_a_missing_build_script_is_a_fixable_error(write_skill, skills_root, settings, tmp_path):
    write_skill("gen", "Run code.")
    model = ScriptedModel([
        tool_call_response("run_script", path="build/nothing.py"),
        tool_call_response("finish", summary="done"),
    ])
    act("gen", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
        sandbox=InMemorySandbox())
    (reply,) = tool_results(model)
    assert reply["ok"] is False and "write your code with write_artifact first" in reply["error"]


def _failing(args, files):  # noqa: ANN001, ANN202
    return ScriptResult(ok=False, exit_code=2, stderr_summary=f"Traceback\n  {SECRET}\nValueError: bad",
                        reason="exit code 2", script="x")


def test_each_script_gets_one_informed_retry_of_its_own(write_skill, skills_root, settings, tmp_path):
    write_skill("two", "Scripts.", files={"scripts/a.py": SECRET + "\n", "scripts/b.py": SECRET + "\n"})
    sandbox = InMemorySandbox({"scripts/a.py": _failing, "scripts/b.py": _failing})
    calls = [tool_call("run_script", path=p, argv=[str(i)]) for p in ("scripts/a.py", "scripts/b.py")
             for i in range(3)]
    model = ScriptedModel([tool_calls_response(*calls[:3]), tool_calls_response(*calls[3:]),
                           tool_call_response("finish", summary="gave up")])
    act("two", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
        sandbox=sandbox)
    replies = tool_results(model)
    assert [r["ok"] for r in replies[:6]] == [False] * 6
    assert "1 informed retry left for scripts/a.py" in replies[0]["retry"]
    assert replies[1]["retry"] == "no retries left for scripts/a.py"
    assert "retry budget for scripts/a.py used" in replies[2]["error"]
    assert "1 informed retry left for scripts/b.py" in replies[3]["retry"]  # b's retry was not used up by a
    assert "retry budget for scripts/b.py used" in replies[5]["error"]
    assert len(sandbox.jobs[0].calls) == 4
    assert SECRET not in json.dumps([m.model_dump() for m in model.calls[-1].messages])


def test_a_program_off_the_allowlist_is_refused_before_any_container(write_skill, skills_root, settings, tmp_path):
    write_skill("tool", "Convert.")
    sandbox = InMemorySandbox()
    model = ScriptedModel([
        tool_calls_response(tool_call("run_command", argv=["npm", "install", "docx"]),
                            tool_call("run_command", argv=["/usr/bin/soffice", "--version"]),
                            tool_call("run_command", argv=["curl", "https://example.com"])),
        tool_call_response("finish", summary="done"),
    ])
    act("tool", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
        sandbox=sandbox)
    replies = tool_results(model)
    assert [r["ok"] for r in replies[:3]] == [False, False, False]
    assert "'npm' is not an allowed program" in replies[0]["error"] and "soffice" in replies[0]["error"]
    assert "no npm/pip install" in replies[0]["error"] and "pdftoppm" in replies[0]["allowed"]
    assert sandbox.jobs == []  # no job, so no container, was ever opened


def test_a_command_is_recorded_with_its_command_line_and_scrubbed_of_skill_source(
    write_skill, skills_root, settings, tmp_path
):
    write_skill("tool", "Convert.", files={"scripts/secret.py": SECRET + "\n"})

    def soffice(args, files):  # noqa: ANN001, ANN202
        files["deck.pdf"] = b"%PDF-1.7"
        return ScriptResult(ok=True, exit_code=0, stdout_text=f"convert build/deck.pptx\n{SECRET}\n",
                            script="soffice", command=args["argv"], stdout_bytes=80, container="fake-c1")

    sandbox = InMemorySandbox(commands={"soffice": soffice})
    argv = ["soffice", "--headless", "--convert-to", "pdf", "--outdir", "build", "build/deck.pptx"]
    model = ScriptedModel([
        tool_calls_response(*(tool_call("run_command", argv=argv) for _ in range(3))),
        tool_call_response("finish", summary="done"),
    ])
    result = act("tool", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 qa_mode="off", sandbox=sandbox)
    first, second, third = tool_results(model)[:3]
    assert first["ok"] is True and first["command"] == " ".join(argv) and first["files_changed"] == ["build/deck.pdf"]
    assert SECRET not in first["stdout_text"] and "convert build/deck.pptx" in first["stdout_text"]
    assert "memo" not in second  # build/ changed (deck.pdf appeared): the same command runs again
    assert third["memo"].startswith("same command and inputs as step")  # nothing changed since: not run again
    assert len(sandbox.jobs[0].calls) == 2
    record = result.evidence_summary[0]
    assert record.tool == "run_command" and record.container["cmd"] == " ".join(argv)
    assert record.container["exit_code"] == 0 and record.container["stdout_bytes"] == 80


def test_declared_operations_are_checked_before_the_model_and_reach_the_sandbox(
    write_skill, skills_root, settings, tmp_path
):
    write_skill("odd", "x", frontmatter="metadata:\n  operations: [fs-temp, teleport]\n")
    write_skill("web", "x", frontmatter="metadata:\n  operations: [browser-automation]\n")
    write_skill("chain", "Run it.", frontmatter="metadata:\n  operations: [process-chain]\n",
                files={"scripts/go.py": "x"})
    never = ScriptedModel([])
    odd = act("odd", never, skills_root=skills_root, settings=settings, out_dir=tmp_path / "o1",
              sandbox=InMemorySandbox())
    assert odd.status == "failed" and "operations this runtime does not know: teleport" in odd.final_message
    assert "process-chain" in odd.next_step
    web = act("web", never, skills_root=skills_root, settings=settings, out_dir=tmp_path / "o2",
              sandbox=InMemorySandbox(tools={"python3": "3.11"}))
    assert web.status == "failed" and "requires chromium" in web.final_message
    assert never.calls == []
    sandbox = InMemorySandbox({"scripts/go.py": lambda args, files: {"ok": 1}})
    model = ScriptedModel([tool_call_response("run_script", path="scripts/go.py"),
                           tool_call_response("finish", summary="done")])
    act("chain", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "o3", qa_mode="off",
        sandbox=sandbox)
    assert sandbox.operations == [("process-chain",)]


def test_a_copy_of_a_skill_script_in_build_is_never_shown(write_skill, skills_root, settings, tmp_path):
    write_skill("leak", "x", files={"scripts/secret.py": SECRET + "\n"})

    def copy_itself(args, files):  # noqa: ANN001, ANN202 - a skill script that copies its own source to build/
        files["copy.txt"] = (SECRET + "\n").encode()
        return {"copied": True}

    sandbox = InMemorySandbox({"scripts/secret.py": copy_itself})
    model = ScriptedModel([
        tool_call_response("run_script", path="scripts/secret.py"),
        tool_call_response("read_file", path="build/copy.txt"),
        tool_call_response("finish", summary="done"),
    ])
    act("leak", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
        sandbox=sandbox)
    read = tool_results(model)[1]
    assert read["ok"] is False and "copy of the skill script scripts/secret.py" in read["error"]
    assert SECRET not in json.dumps([m.model_dump() for m in model.calls[-1].messages])


def test_run_script_never_leaves_the_skill_or_build(write_skill, skills_root, settings, tmp_path):
    folder = write_skill("esc", "x")
    (tmp_path / "evil.py").write_text("print('outside')\n")
    (folder / "link.py").symlink_to(tmp_path / "evil.py")
    for path in ("build/../../evil.py", "../evil.py", "/tmp/evil.py", "link.py"):
        model = ScriptedModel([tool_call_response("run_script", path=path)])
        result = act("esc", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "o",
                     qa_mode="off", sandbox=InMemorySandbox())
        assert result.exit_reason == "sandbox_violation", path


def _soffice(args, files):  # noqa: ANN001, ANN202 - LibreOffice's part of a thumbnail: office file -> PDF
    argv = args["argv"]
    outdir, source = argv[argv.index("--outdir") + 1], argv[-1]
    stem = source.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    files[f"{outdir.removeprefix('build/')}/{stem}.pdf"] = b"%PDF-1.7 fake"
    return ScriptResult(ok=True, exit_code=0, script="soffice", command=argv, container="fake-soffice")


def _render(args, files):  # noqa: ANN001, ANN202 - the image's render_pages.py: PDF -> contact sheet and page 1
    argv = args["argv"]
    assert argv[:3] == ["python3", "-I", "/opt/sandbox/render_pages.py"], argv
    folder = argv[4].removeprefix("build/")
    sheet, first = argv[argv.index("--sheet") + 1], argv[argv.index("--first") + 1]
    files[f"{folder}/{sheet}"] = b"\x89PNG sheet"
    files[f"{folder}/{first}"] = b"\x89PNG fake"
    return ScriptResult(ok=True, exit_code=0, script="python3", command=argv, container="fake-render",
                        stdout_json={"ok": True, "pages": 3, "rendered": 3, "files": [sheet, first]})


def test_an_office_output_of_a_validated_skill_gets_a_thumbnail_in_the_catalog(
    write_skill, skills_root, settings, tmp_path
):
    write_skill("deck", "Make a deck.", files={"scripts/make.py": "x"})

    def make(args, files):  # noqa: ANN001, ANN202
        files["deck.pptx"] = b"PK fake pptx"
        files["notes.txt"] = b"notes"
        return {"ok": True}

    sandbox = InMemorySandbox({"scripts/make.py": make}, commands={"soffice": _soffice, "python3": _render})
    model = ScriptedModel([tool_call_response("run_script", path="scripts/make.py"),
                           tool_call_response("finish", summary="done", outputs=["build/deck.pptx"])])
    result = act("deck", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 qa_mode="off", sandbox=sandbox)
    assert result.status == "done"
    thumbnails = [a for a in result.artifacts if a.type == "thumbnail"]
    assert [(t.path, t.metadata["thumbnail_of"]) for t in thumbnails] == [
        (".thumbnails/deck.pptx/contact.png", "deck.pptx"), (".thumbnails/deck.pptx/deck.png", "deck.pptx")
    ]
    assert (tmp_path / "out" / ".thumbnails" / "deck.pptx" / "deck.png").read_bytes() == b"\x89PNG fake"
    assert [c[0] for c in sandbox.jobs[0].calls] == ["scripts/make.py", "soffice", "python3"]
    step = result.evidence_summary[-1]
    assert step.tool == "thumbnail" and step.ok and "render_pages.py" in step.container["cmd"]
    assert step.reason_short == "thumbnail of deck.pptx (3 pages)"
