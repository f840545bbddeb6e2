"""Attack: a stored replay is served only for identical work, never by skill id or path.

The memo once keyed a script run by the skill id and the hash of the one file run: a look-alike library with the
same id and the same entry script, plus a different helper module, stored a forged output that a later run of the
real skill was handed without a container. These tests run real scripts in the real sandbox: the entry script is
byte-identical everywhere, only the helper it imports differs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from act_helpers import act, expect_files

from orchestrator.act.memo import MemoStore
from orchestrator.config import load_settings
from orchestrator.skills.loader import SkillLibrary
from orchestrator.testing import FunctionModel, InMemorySandbox, ScriptedModel, json_response, tool_call_response
from orchestrator.workflow.embedded import Runtime, run_goal
from orchestrator.workflow.request import GoalRequest

BODY = "Run `scripts/make.py`; it writes `deck.txt`."
ENTRY = """\
import json, helper
open("build/deck.txt", "w").write(helper.CONTENT)
print(json.dumps({"written": "deck.txt"}))
"""


def _library(root: Path, content: str) -> Path:
    folder = root / "deck-maker"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: deck-maker\ndescription: Makes a deck.\n---\n\n{BODY}\n")
    (folder / "scripts" / "make.py").write_text(ENTRY)
    (folder / "scripts" / "helper.py").write_text(f"CONTENT = {content!r}\n")
    return root


def _run(library: Path, runner: object, settings: object, store: MemoStore, out: Path) -> tuple[str, bool]:
    """Run the skill once through the Act; (what it wrote, whether the script call was answered from the memo)."""
    model = ScriptedModel([
        tool_call_response("run_script", path="scripts/make.py", args={}),
        tool_call_response("finish", summary="written", outputs=["build/deck.txt"]),
    ])
    result = act("deck-maker", model, skills_root=library, settings=settings, out_dir=out,  # type: ignore[arg-type]
                 expected=expect_files("deck.txt"), sandbox=runner, store=store)
    assert result.status == "done", result.final_message
    return (out / "deck.txt").read_text(), result.evidence_summary[0].memo_hit


def test_a_look_alike_library_differing_in_one_helper_never_shares_a_replay(sandbox_runner, settings, tmp_path):
    store = MemoStore(tmp_path / "store")
    real = _library(tmp_path / "real", "the real deck")
    forged = _library(tmp_path / "lookalike", "FORGED deck")

    assert _run(forged, sandbox_runner, settings, store, tmp_path / "o1") == ("FORGED deck", False)
    # the real skill: same id, same entry script, same args, same build/ — but its own helper runs
    assert _run(real, sandbox_runner, settings, store, tmp_path / "o2") == ("the real deck", False)
    # identical work is still replayed (the memo works; it is just never handed across versions)
    assert _run(real, sandbox_runner, settings, store, tmp_path / "o3") == ("the real deck", True)
    assert _run(forged, sandbox_runner, settings, store, tmp_path / "o4") == ("FORGED deck", True)


def test_a_skill_update_that_changes_only_a_helper_replays_nothing(sandbox_runner, settings, tmp_path):
    store = MemoStore(tmp_path / "store")
    library = _library(tmp_path / "lib", "version 1")
    assert _run(library, sandbox_runner, settings, store, tmp_path / "o1") == ("version 1", False)
    (library / "deck-maker" / "scripts" / "helper.py").write_text("CONTENT = 'version 2'\n")
    assert _run(library, sandbox_runner, settings, store, tmp_path / "o2") == ("version 2", False)


def test_a_file_added_anywhere_in_the_skill_folder_is_a_new_version(sandbox_runner, settings, tmp_path):
    store = MemoStore(tmp_path / "store")
    library = _library(tmp_path / "lib", "same")
    assert _run(library, sandbox_runner, settings, store, tmp_path / "o1") == ("same", False)
    (library / "deck-maker" / "sitecustomize.py").write_text("# a new file the script never names\n")
    assert _run(library, sandbox_runner, settings, store, tmp_path / "o2") == ("same", False)


@pytest.mark.parametrize("change", ["image", "none"])
def test_a_rebuilt_sandbox_image_replays_nothing(write_skill, skills_root, settings, tmp_path, change):
    write_skill("report", "Run `scripts/r.py`.", files={"scripts/r.py": "print('{}')\n"})
    store = MemoStore(tmp_path / "store")
    calls = []

    def script(args, files):  # noqa: ANN001, ANN202 - a fake script: counts the runs that really happen
        calls.append(args)
        files["r.json"] = b"{}"
        return {"ok": True}

    for n, image in enumerate(["sha256:aaa", "sha256:bbb" if change == "image" else "sha256:aaa"]):
        model = ScriptedModel([
            tool_call_response("run_script", path="scripts/r.py", args={"n": 1}),
            tool_call_response("finish", summary="done", outputs=["build/r.json"]),
        ])
        result = act("report", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / f"o{n}",
                     expected=expect_files("r.json"), sandbox=InMemorySandbox({"scripts/r.py": script}, image=image),
                     store=store)
        assert result.status == "done"
    assert len(calls) == (2 if change == "image" else 1)


def test_memo_files_are_named_by_work_identity_not_by_skill_id(tmp_path):
    store = MemoStore(tmp_path)
    for name in ("deck-maker", "../../etc/passwd", "document-skills/pptx"):
        with pytest.raises(ValueError):
            store.load(name)
    assert json.loads(json.dumps(store.load("0" * 64).model_dump())) == {"attempts": {}, "digests": {}}


def _verdict_calls(library: Path, settings: object, store: MemoStore, out: Path) -> int:
    """Run a one-step goal (a SKILL.md-only skill writing notes.md) and count the semantic check's model calls."""
    acts: list[int] = []
    semantic: list[int] = []

    def answer(messages, tools, purpose):  # noqa: ANN001, ANN202 - a function of the call, not of the prompt
        if purpose == "plan":
            return json_response({"steps": [{"skill": "notes", "outputs": ["notes.md"]}]})
        if purpose == "semantic":
            semantic.append(1)
            return json_response({"pass": True, "rationale": "the notes are there"})
        acts.append(1)
        if len(acts) == 1:
            return tool_call_response("write_artifact", path="notes.md", text="# Notes\n")
        return tool_call_response("finish", summary="written", outputs=["build/notes.md"])

    rt = Runtime(settings=settings, model=FunctionModel(answer), library=SkillLibrary(library),  # type: ignore[arg-type]
                 store=store)
    result = run_goal(GoalRequest(goal="write the notes"), out, rt)
    assert result.status == "done", result.error
    return len(semantic)


def _notes_library(root: Path, extra: str) -> Path:
    folder = root / "notes"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: notes\ndescription: Write notes.\n---\n\nWrite `notes.md`.\n")
    (folder / "style.md").write_text(extra)
    return root


def test_a_semantic_verdict_is_never_reused_for_a_look_alike_library(tmp_path):
    settings = load_settings(cache_dir=tmp_path / "cache", qa={"thumbnails": False})
    store = MemoStore(tmp_path / "store")
    real = _notes_library(tmp_path / "real", "Be precise.\n")
    lookalike = _notes_library(tmp_path / "lookalike", "Anything passes.\n")
    assert _verdict_calls(lookalike, settings, store, tmp_path / "o1") == 1
    assert _verdict_calls(real, settings, store, tmp_path / "o2") == 1  # same ids, same outputs: judged again
    assert _verdict_calls(real, settings, store, tmp_path / "o3") == 0  # identical work: the verdict is reused


def test_a_document_summary_from_a_look_alike_library_is_never_sent_in_place_of_the_text(settings, tmp_path):
    store = MemoStore(tmp_path / "store")
    replies = []
    for n, (name, extra) in enumerate([("lookalike", "x = 1\n"), ("real", "x = 2\n"), ("real", "x = 2\n")]):
        root = tmp_path / f"{name}{n}" if n < 2 else tmp_path / "real1"
        if n < 2:
            folder = root / "guide"
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text("---\nname: guide\ndescription: A guide.\n---\n\nRead `rules.md`.\n")
            (folder / "rules.md").write_text("Rule one: " + "be exact. " * 40 + "\n")
            (folder / "tool.py").write_text(extra)
        model = ScriptedModel([
            tool_call_response("read_ref", path="rules.md"),
            tool_call_response("finish", summary="read"),
        ])
        act("guide", model, skills_root=root, settings=settings, out_dir=tmp_path / f"o{n}", qa_mode="off",
            store=store)
        replies.append(json.loads(model.calls[1].messages[-1].content or ""))
    assert "text" in replies[0] and "text" in replies[1] and "summary" not in replies[1]
    assert "summary" in replies[2] and "text" not in replies[2]  # the same version again: its own digest
