"""End to end, the way the public document skills work: the model writes JavaScript into build/, runs it with a
command line, converts the result with LibreOffice and poppler through run_command, looks at the page and finishes.
Real CLI, real `openai` client against the scenario server, real sandbox image (Node `docx`, LibreOffice, poppler)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def test_model_written_code_runs_and_the_toolchain_turns_it_into_files_that_open(cli_env, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "--skills", str(HERE / "skills"), "--out", str(out),
         "--model", f"scripted:{HERE / 'scenarios' / 'report-docx.yaml'}", "--json"],
        capture_output=True, text=True, env=cli_env, cwd=REPO, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "done", json.dumps(result.get("unmet"), indent=1)

    from docx import Document

    text = "\n".join(p.text for p in Document(str(out / "report.docx")).paragraphs)
    assert "Q3 results" in text and "Revenue 4.2 M EUR" in text
    assert (out / "report.pdf").read_bytes().startswith(b"%PDF")
    assert (out / "report-page1.png").read_bytes().startswith(b"\x89PNG")

    catalog = {a["path"]: a for a in result["artifacts"]}
    assert catalog["make_report.js"]["type"] == "script"
    thumbnails = [a for a in result["artifacts"] if a["type"] == "thumbnail"]
    sheets = {t["metadata"]["thumbnail_of"]: t["path"] for t in thumbnails if t["path"].endswith("/contact.png")}
    assert "report.docx" in sheets  # every page of the document on one contact sheet
    assert (out / sheets["report.docx"]).read_bytes().startswith(b"\x89PNG")

    steps = result["skills"][0]["evidence_summary"]
    commands = [s for s in steps if s["tool"] == "run_command"]
    refused, soffice, pdftoppm = commands
    assert refused["ok"] is False and refused["container"] is None  # npm was refused before any container
    assert soffice["container"]["cmd"].startswith("soffice --headless --convert-to pdf")
    assert soffice["container"]["exit_code"] == 0 and soffice["container"]["elapsed_ms"] > 0
    assert {"stdout_bytes", "stderr_bytes"} <= set(soffice["container"])
    assert pdftoppm["container"]["exit_code"] == 0

    requests = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    image_parts = [part for r in requests for m in r["messages"] if isinstance(m.get("content"), list)
                   for part in m["content"] if part.get("type") == "image_url"]
    assert image_parts and image_parts[0]["image_url"]["url"].startswith("data:image/png;base64,")
