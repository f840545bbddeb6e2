"""The sandbox image: its tool list, refusing skills that need more, and the libraries really working inside."""

from __future__ import annotations

import time

import pytest

from orchestrator.config import load_settings
from orchestrator.errors import ImageToolMissing
from orchestrator.sandbox.image import build_image, image_tools, require_tools

DOCUMENT_LIBRARIES = (
    "python-pptx",
    "openpyxl",
    "python-docx",
    "pypdf",
    "Pillow",
    "lxml",
    "reportlab",
    "Jinja2",
    "defusedxml",
    "pandas",
    "pdfplumber",
    "pypdfium2",
    "pdf2image",
    "markitdown",
    "PyYAML",
)
PROGRAMS = ("soffice", "libreoffice", "pdftoppm", "pdftotext", "qpdf", "pandoc", "markitdown")
NODE_LIBRARIES = ("npm:pptxgenjs", "npm:docx")


def test_the_image_lists_its_tools(docker_client, sandbox_image):
    tools = image_tools(docker_client, sandbox_image)
    assert tools["python3"].startswith("3.11")
    assert tools["node"].split(".")[0].isdigit() and "bash" in tools and "coreutils" in tools
    assert set(DOCUMENT_LIBRARIES) <= set(tools)
    assert set(PROGRAMS) <= set(tools) and set(NODE_LIBRARIES) <= set(tools)
    assert tools["soffice"].split(".")[0].isdigit() and tools["npm:pptxgenjs"].split(".")[0].isdigit()


def test_a_skill_needing_a_missing_tool_is_refused_with_a_clear_message(docker_client, sandbox_image):
    require_tools(docker_client, sandbox_image, ["python-pptx", "node", "libreoffice", "pptxgenjs"], skill="pptx")
    with pytest.raises(ImageToolMissing) as caught:
        require_tools(docker_client, sandbox_image, ["python-pptx", "ffmpeg"], skill="pptx")
    assert "ffmpeg" in caught.value.message and "pptx" in caught.value.message
    assert caught.value.data["missing"] == ["ffmpeg"]


def test_the_document_libraries_work_offline_in_the_sandbox(make_skill, open_job, tmp_path):
    root = make_skill(
        {
            "make.py": """
        import io, json, sys
        import docx, jinja2, lxml.etree, openpyxl, pypdf, reportlab
        from PIL import Image
        from pptx import Presentation
        from reportlab.pdfgen import canvas
        deck = Presentation()
        deck.slides.add_slide(deck.slide_layouts[0]).shapes.title.text = "Q3"
        deck.save("build/deck.pptx")
        book = openpyxl.Workbook(); book.active["A1"] = 1; book.save("build/book.xlsx")
        pdf = canvas.Canvas("build/doc.pdf"); pdf.drawString(72, 72, "hi"); pdf.save()
        pages = len(pypdf.PdfReader("build/doc.pdf").pages)
        Image.new("RGB", (4, 4)).save("build/px.png")
        json.dump({"pages": pages, "title": jinja2.Template("{{ t }}").render(t="ok")}, sys.stdout)
        """
        }
    )
    job = open_job(root)
    result = job.run_script("make.py", timeout_s=30)
    assert result.ok, result.stderr_summary
    assert result.stdout_json == {"pages": 1, "title": "ok"}
    assert {f.path for f in job.list_files()} == {"deck.pptx", "book.xlsx", "doc.pdf", "px.png"}


def test_building_again_with_the_same_content_is_skipped(docker_client, sandbox_image, tmp_path):
    settings = load_settings(sandbox={"image": sandbox_image}, cache_dir=tmp_path / "cache")
    first = build_image(docker_client, settings)  # builds only if the definition changed since setup
    started = time.monotonic()
    second = build_image(docker_client, settings)
    assert second.built is False and second.content_hash == first.content_hash
    assert second.image_id == docker_client.api.inspect_image(sandbox_image)["Id"]
    assert time.monotonic() - started < 5


def test_an_image_built_from_the_sandbox_image_is_never_taken_for_it(docker_client, sandbox_image, browser_image):
    """A child inherits every label, the content hash included: it must still not be found as the image itself."""
    import io

    from orchestrator.sandbox.image import LABEL_HASH, find_own_image

    own = docker_client.api.inspect_image(sandbox_image)
    digest = own["Config"]["Labels"][LABEL_HASH]
    child_tag = "orchtest-child-of-sandbox:latest"
    children = {
        "cmd": f"FROM {own['Id']}\nCMD [\"bash\"]\n",
        "layer": f"FROM {own['Id']}\nUSER root\nRUN echo changed > /etc/child\n",
    }
    try:
        for dockerfile in children.values():
            for _event in docker_client.api.build(fileobj=io.BytesIO(dockerfile.encode()), tag=child_tag, rm=True):
                pass
            child = docker_client.api.inspect_image(child_tag)
            assert child["Config"]["Labels"][LABEL_HASH] == digest  # the inherited label
            assert find_own_image(docker_client, child_tag, LABEL_HASH, digest) == own["Id"]  # by hash, not the tag
            assert find_own_image(docker_client, "orchtest-absent:none", LABEL_HASH, digest) == own["Id"]
    finally:
        docker_client.api.remove_image(child_tag, force=True)
    assert find_own_image(docker_client, sandbox_image, LABEL_HASH, "0" * 32) is None
    # the browser image is a child we label ourselves, with a fingerprint of its own: for its own hash only
    browser = docker_client.api.inspect_image(browser_image)
    assert browser["Config"]["Labels"][LABEL_HASH] == digest
    assert find_own_image(docker_client, browser_image, LABEL_HASH, digest) == own["Id"]


def test_building_the_browser_image_again_is_skipped(docker_client, sandbox_image, browser_image, tmp_path):
    from orchestrator.sandbox.browser import build_browser_image

    settings = load_settings(sandbox={"image": sandbox_image, "browser_image": browser_image}, cache_dir=tmp_path)
    first = build_browser_image(docker_client, settings, build_image(docker_client, settings))
    second = build_browser_image(docker_client, settings, build_image(docker_client, settings))
    assert second.built is False and second.content_hash == first.content_hash
    assert second.image_id == docker_client.api.inspect_image(browser_image)["Id"]
    assert {"playwright", "chromium"} <= set(second.tools)
