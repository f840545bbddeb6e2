"""edit_file replaces one exact occurrence under build/; copy_file brings an input or a skill asset into build/."""

from __future__ import annotations

import json

from act_helpers import act

from orchestrator.config import Budgets
from orchestrator.testing import ScriptedModel, tool_call_response

XML = '<p:sld><a:t>Title</a:t><a:t>Body</a:t><a:t>Body</a:t></p:sld>\n'


def replies(model: ScriptedModel) -> list[dict]:
    last = model.calls[-1].messages
    return [json.loads(m.content or "{}") for m in last if m.role == "tool"]


def run(write_skill, skills_root, settings, tmp_path, *calls, files=None, inputs=None, ends=False):
    write_skill("deck", "Edit slides.", files=files or {})
    inputs_dir = None
    if inputs:
        inputs_dir = tmp_path / "inputs"
        inputs_dir.mkdir(exist_ok=True)
        for name, data in inputs.items():
            (inputs_dir / name).write_bytes(data)
    finish = [] if ends else [tool_call_response("finish", summary="done")]
    model = ScriptedModel([*(tool_call_response(name, **args) for name, args in calls), *finish])
    result = act("deck", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 qa_mode="off", inputs_dir=inputs_dir)
    return result, replies(model), tmp_path / "out"


def violation(write_skill, skills_root, settings, tmp_path, name, args, inputs=None):
    """A call that must end the Act as a sandbox violation, leaving nothing in the output folder."""
    result, _, out = run(write_skill, skills_root, settings, tmp_path, (name, args), inputs=inputs, ends=True)
    assert result.status == "failed" and result.exit_reason == "sandbox_violation", (name, args, result)
    return result, out


def test_edit_file_replaces_exactly_one_occurrence(write_skill, skills_root, settings, tmp_path):
    result, (_, edited), out = run(
        write_skill, skills_root, settings, tmp_path,
        ("write_artifact", {"path": "build/slide1.xml", "text": XML}),
        ("edit_file", {"path": "build/slide1.xml", "old": "<a:t>Title</a:t>", "new": "<a:t>Q3 results</a:t>"}),
    )
    assert edited["ok"] is True and edited["line"] == 1 and edited["version"].endswith("@v2")
    assert (out / "slide1.xml").read_text() == XML.replace("Title", "Q3 results")
    assert result.status == "done"


def test_edit_file_refuses_zero_or_several_matches_and_changes_nothing(write_skill, skills_root, settings, tmp_path):
    _, (_, none, many), out = run(
        write_skill, skills_root, settings, tmp_path,
        ("write_artifact", {"path": "build/slide1.xml", "text": XML}),
        ("edit_file", {"path": "build/slide1.xml", "old": "<a:t>Missing</a:t>", "new": "x"}),
        ("edit_file", {"path": "build/slide1.xml", "old": "<a:t>Body</a:t>", "new": "x"}),
    )
    assert none["ok"] is False and "old text not found in build/slide1.xml; nothing was changed" in none["error"]
    assert many["ok"] is False and many["matches"] == 2
    assert "occurs 2 times in build/slide1.xml (lines 1, 1)" in many["error"]
    assert "Include more of the surrounding text" in many["error"]
    assert (out / "slide1.xml").read_text() == XML


def test_edit_file_never_touches_a_skill_file_or_leaves_build(write_skill, skills_root, settings, tmp_path):
    result, (skill_file,), _ = run(
        write_skill, skills_root, settings, tmp_path,
        ("edit_file", {"path": "SKILL.md", "old": "Edit", "new": "Pwned"}),
        files={"notes.md": "x"},
    )
    assert skill_file["ok"] is False and "under build/ only" in skill_file["error"]
    assert "Pwned" not in (skills_root / "deck" / "SKILL.md").read_text()
    for path in ("build/../../deck/SKILL.md", "build/../SKILL.md"):
        violation(write_skill, skills_root, settings, tmp_path, "edit_file", {"path": path, "old": "a", "new": "b"})
    assert "Pwned" not in (skills_root / "deck" / "SKILL.md").read_text()


def test_edit_file_refuses_a_binary_file(write_skill, skills_root, settings, tmp_path):
    _, (_, edited), _ = run(
        write_skill, skills_root, settings, tmp_path,
        ("write_artifact", {"path": "build/deck.pptx", "base64": "UEsDBP8A/wD+"}),
        ("edit_file", {"path": "build/deck.pptx", "old": "PK", "new": "x"}),
    )
    assert edited["ok"] is False and "not UTF-8 text" in edited["error"]


def test_copy_file_brings_an_input_and_a_skill_asset_into_build(write_skill, skills_root, settings, tmp_path):
    result, (from_input, from_skill), out = run(
        write_skill, skills_root, settings, tmp_path,
        ("copy_file", {"src": "inputs/data.csv", "dest": "build/data.csv"}),
        ("copy_file", {"src": "assets/Template.PPTX", "dest": "template.pptx"}),
        files={"assets/template.pptx": "PK-fake"},
        inputs={"data.csv": b"a,b\n1,2\n"},
    )
    assert from_input["ok"] and from_input["path"] == "build/data.csv"
    assert from_skill["ok"] and from_skill["path"] == "build/template.pptx"
    assert (out / "data.csv").read_bytes() == b"a,b\n1,2\n" and (out / "template.pptx").read_text() == "PK-fake"


def test_copy_file_never_copies_a_script_or_reads_outside_the_skill_and_inputs(
    write_skill, skills_root, settings, tmp_path
):
    (tmp_path / "secret.txt").write_text("top secret")
    folder = write_skill("deck", "x", files={"scripts/make.py": "SECRET_SOURCE = 1\n"})
    (folder / "leak.txt").symlink_to(tmp_path / "secret.txt")
    _, (script,), _ = run(
        write_skill, skills_root, settings, tmp_path,
        ("copy_file", {"src": "scripts/make.py", "dest": "build/make.py"}),
        files={"scripts/make.py": "SECRET_SOURCE = 1\n"},
    )
    assert script["ok"] is False and 'run_script {"path": "scripts/make.py"}' in script["error"]
    for src in ("../../secret.txt", "/etc/passwd", "leak.txt", "inputs/../../secret.txt", "inputs//etc/passwd"):
        _, out = violation(
            write_skill, skills_root, settings, tmp_path, "copy_file", {"src": src, "dest": "build/x.txt"},
            inputs={"a.txt": b"a"},
        )
        assert not (out / "x.txt").exists()
    for dest in ("../x.txt", "/tmp/x.txt", "build/../../x.txt"):
        violation(write_skill, skills_root, settings, tmp_path, "copy_file", {"src": "inputs/a.txt", "dest": dest},
                  inputs={"a.txt": b"a"})


def test_copy_file_into_a_full_build_area_is_a_failure_the_model_can_act_on(
    write_skill, skills_root, settings, tmp_path
):
    write_skill("deck", "Edit slides.")
    inputs_dir = tmp_path / "inputs"
    inputs_dir.mkdir()
    (inputs_dir / "big.bin").write_bytes(b"x" * (2 * 1024 * 1024))
    model = ScriptedModel([
        tool_call_response("copy_file", src="inputs/big.bin", dest="build/big.bin"),
        tool_call_response("finish", summary="done"),
    ])
    result = act("deck", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 qa_mode="off", inputs_dir=inputs_dir, budgets=Budgets(disk_write_limit_mb=1))
    (copied,) = replies(model)[:1]
    assert copied["ok"] is False and copied["hint"] == "build/ is full: remove drafts or copy less"
    assert result.status == "done" and not (tmp_path / "out" / "big.bin").exists()


def test_an_edit_that_overfills_build_is_a_failure_the_model_can_act_on(write_skill, skills_root, settings, tmp_path):
    write_skill("deck", "Edit slides.")
    model = ScriptedModel([
        tool_call_response("write_artifact", path="build/big.txt", text="head " + "x" * 900_000),
        tool_call_response("edit_file", path="build/big.txt", old="head", new="y" * 300_000),
        tool_call_response("finish", summary="done"),
    ])
    result = act("deck", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 qa_mode="off", budgets=Budgets(disk_write_limit_mb=1))
    edited = json.loads([m for m in model.calls[2].messages if m.role == "tool"][-1].content or "{}")
    assert edited["ok"] is False and edited["hint"] == "write less, or remove earlier drafts"
    assert result.status == "done"
    assert (tmp_path / "out" / "big.txt").read_text().startswith("head ")
