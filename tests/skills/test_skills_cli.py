"""`python -m orchestrator skills list|show`: the JSON shapes others rely on, exit codes, readable tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from orchestrator.cli import app

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, ["skills", *args])


def test_list_json_gives_every_skill_with_its_problems_and_exits_0(make_skill, skills_root):
    make_skill("good")
    make_skill("document-skills/broken", text="no frontmatter\n")
    result = run("list", "--root", str(skills_root), "--json")
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert [s["id"] for s in listed] == ["document-skills/broken", "good"]
    assert set(listed[1]) == {"id", "name", "description", "path", "problems", "l1_tokens"}
    assert listed[1]["name"] == "good" and listed[1]["problems"] == []
    assert listed[1]["path"] == str((skills_root / "good").resolve())
    assert listed[0]["name"] is None
    assert listed[0]["problems"][0]["code"] == "frontmatter_missing"
    assert {"code", "message", "severity"} <= set(listed[0]["problems"][0])


def test_a_skill_whose_frontmatter_has_a_quoting_slip_is_listed_with_a_warning_saying_what_was_read(
    make_skill, skills_root
):
    make_skill("ocr-notes", text="---\nname: ocr-notes\ndescription: Reads scans: makes text searchable\n---\nBody\n")
    make_skill("hopeless", text="---\nname: [hopeless\ndescription: x: y\n---\n")
    result = run("list", "--root", str(skills_root), "--json")
    assert result.exit_code == 0, result.output
    listed = {s["id"]: s for s in json.loads(result.stdout)}
    assert listed["ocr-notes"]["description"] == "Reads scans: makes text searchable"
    (warning,) = listed["ocr-notes"]["problems"]
    assert warning["code"] == "frontmatter_recovered" and warning["severity"] == "warning"
    assert "'name' and 'description'" in warning["message"]
    assert listed["hopeless"]["name"] is None
    assert listed["hopeless"]["problems"][0]["code"] == "frontmatter_yaml_error"


def test_show_json_gives_the_skill_its_references_and_problems(make_skill, skills_root):
    make_skill(
        "decks",
        body="Read [guide](guide.md) and run `scripts/make.py`; see [gone](gone.md).\n",
        files={"guide.md": "# g\n", "scripts/make.py": ""},
        extra="license: MIT\nrequires-tools: [python-pptx]\n",
    )
    result = run("show", "decks", "--root", str(skills_root), "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert {"id", "name", "description", "body_tokens", "references", "problems"} <= set(shown)
    assert shown["license"] == "MIT" and shown["declarations"]["requires_tools"] == ["python-pptx"]
    assert shown["l2"] == {"tokens": shown["body_tokens"], "truncated": False}
    assert [(r["ref"], r["path"], r["exists"], r["via"]) for r in shown["references"]] == [
        ("guide.md", "guide.md", True, "link"),
        ("gone.md", "gone.md", False, "link"),
        ("scripts/make.py", "scripts/make.py", True, "path"),
    ]
    assert [p["code"] for p in shown["problems"]] == ["reference_missing"]


def test_show_reports_the_l2_cut(make_skill, skills_root):
    make_skill("long", body="word " * 30_000)
    shown = json.loads(run("show", "long", "--root", str(skills_root), "--json", "--body").stdout)
    assert shown["l2"]["truncated"] is True and shown["l2"]["tokens"] <= 5000
    assert "[... L2 cut:" in shown["l2"]["text"]


def test_an_unknown_id_exits_1_and_names_close_matches(make_skill, skills_root):
    make_skill("document-skills/pptx")
    result = run("show", "document-skills/ppt", "--root", str(skills_root), "--json")
    assert result.exit_code == 1
    error = json.loads(result.stdout)
    assert error["ok"] is False and error["error"] == "SkillError"
    assert error["data"]["close_matches"] == ["document-skills/pptx"]
    text = run("show", "pptx-ish", "--root", str(skills_root))
    assert text.exit_code == 1 and "unknown skill 'pptx-ish'" in text.stderr


def test_a_missing_root_is_a_clear_error_with_exit_code_2(tmp_path):
    result = run("list", "--root", str(tmp_path / "nowhere"), "--json")
    assert result.exit_code == 2
    assert "does not exist" in json.loads(result.stdout)["message"]
    assert run("show", "x", "--root", str(tmp_path / "nowhere")).exit_code == 2


def test_without_json_the_output_is_a_readable_table(make_skill, skills_root):
    make_skill("good")
    make_skill("bad", text="---\nname: [x\n---\n")
    result = run("list", "--root", str(skills_root))
    assert result.exit_code == 0
    assert "good" in result.stdout and "bad" in result.stdout and "1 error(s)" in result.stdout
    shown = run("show", "good", "--root", str(skills_root))
    assert shown.exit_code == 0 and "name: good" in shown.stdout and "References" in shown.stdout


def test_the_module_entry_point_prints_pure_json(make_skill, skills_root):
    make_skill("alpha")
    env = {**os.environ, "ORCH_LOG_LEVEL": "DEBUG"}
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator", "skills", "list", "--root", str(skills_root), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert [s["id"] for s in json.loads(result.stdout)] == ["alpha"]


def test_markup_like_text_in_a_skill_is_printed_literally(make_skill, skills_root):
    make_skill("odd", description="Uses [bold]tags[/bold] and [/oops] freely.", body="See [x](a[/b].md)\n")
    listed = run("list", "--root", str(skills_root))
    assert listed.exit_code == 0 and "[/oops]" in listed.stdout.replace("\n", "")
    shown = run("show", "odd", "--root", str(skills_root))
    assert shown.exit_code == 0, shown.output


def test_folder_and_file_names_that_are_not_utf8_never_break_the_json(make_skill, skills_root):
    bad = os.fsencode(skills_root) + b"/caf\xe9"
    os.mkdir(bad)
    with open(bad + b"/SKILL.md", "wb") as f:
        f.write(b"---\nname: cafe\ndescription: Latin-1 folder name.\n---\nAll: `**/*`\n")
    with open(bad + b"/data\xff.txt", "wb") as f:
        f.write(b"x")
    listed = run("list", "--root", str(skills_root), "--json")
    assert listed.exit_code == 0, listed.output
    (summary,) = json.loads(listed.stdout)
    assert summary["id"] == "caf\ufffd"
    assert [p["code"] for p in summary["problems"]] == ["name_folder_mismatch"]
    shown = run("show", "caf\ufffd", "--root", str(skills_root), "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["references"] == []
