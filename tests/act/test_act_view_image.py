"""view_image: a PNG or JPEG from build/ reaches the model as an image after the tool results; nothing else does."""

from __future__ import annotations

import base64
import io
import json

from act_helpers import act
from PIL import Image

from orchestrator.config import load_settings
from orchestrator.testing import ScriptedModel, text_response, tool_call, tool_call_response, tool_calls_response


def png_b64(color: str = "navy", size: tuple[int, int] = (64, 36)) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_a_viewed_png_follows_the_tool_results_as_an_image_part(write_skill, skills_root, settings, tmp_path):
    write_skill("deck", "Check the slide.")
    model = ScriptedModel([
        tool_call_response("write_artifact", path="build/thumbs/slide-1.png", base64=png_b64()),
        tool_call_response("view_image", path="build/thumbs/slide-1.png"),
        tool_call_response("finish", summary="looked"),
    ])
    result = act("deck", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    assert result.status == "done"
    messages = model.calls[2].messages
    tool_result = json.loads(messages[-2].content or "{}")
    assert tool_result == {"ok": True, "path": "build/thumbs/slide-1.png", "mime": "image/png", "width": 64,
                           "height": 36, "bytes": tool_result["bytes"], "note": "the image follows in the next message"}
    image_message = messages[-1]
    assert image_message.role == "user" and "build/thumbs/slide-1.png (64x36)" in (image_message.content or "")
    (part,) = image_message.to_openai()["content"][1:]
    assert part["type"] == "image_url" and part["image_url"]["url"] == "data:image/png;base64," + png_b64()


def test_only_the_latest_images_stay_attached_and_the_count_is_bounded(write_skill, skills_root, tmp_path):
    settings = load_settings(cache_dir=tmp_path / "cache", disclosure={"images_max": 3, "images_attached": 2})
    write_skill("deck", "Check the slides.")
    writes = [tool_call("write_artifact", path=f"build/s{i}.png", base64=png_b64(c)) for i, c in
              enumerate(["red", "green", "blue", "black"])]
    views = [tool_call_response("view_image", path=f"build/s{i}.png") for i in range(4)]
    reflect = text_response("look at the other slides")  # two turns without a new artifact: the Micro-Reflect
    model = ScriptedModel(
        [tool_calls_response(*writes), *views[:2], reflect, *views[2:], tool_call_response("finish", summary="done")]
    )
    act("deck", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    last = model.calls[-1].messages
    attached = [m for m in last if m.images]
    assert [m.content.split(": ")[1] for m in attached] == ["build/s1.png (64x36).", "build/s2.png (64x36)."]
    assert any("build/s0.png" in (m.content or "") and "no longer attached" in (m.content or "") for m in last)
    fourth = json.loads([m for m in last if m.role == "tool"][-1].content or "{}")
    assert fourth["ok"] is False and "3 images were already shown" in fourth["error"]


def test_garbage_huge_and_outside_images_never_reach_the_model(write_skill, skills_root, settings, tmp_path):
    folder = write_skill("deck", "Check.", files={"logo.png": "x"})
    (tmp_path / "secret.png").write_bytes(base64.b64decode(png_b64()))
    (folder / "link.png").symlink_to(tmp_path / "secret.png")
    big = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * (5 * 1024 * 1024)).decode()
    model = ScriptedModel([
        tool_calls_response(
            tool_call("write_artifact", path="build/fake.png", text="<svg>not a png</svg>"),
            tool_call("write_artifact", path="build/huge.png", base64=big),
        ),
        tool_calls_response(
            tool_call("view_image", path="build/fake.png"),
            tool_call("view_image", path="build/huge.png"),
            tool_call("view_image", path="build/missing.png"),
            tool_call("view_image", path="logo.png"),
        ),
        tool_call_response("finish", summary="done"),
    ])
    act("deck", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    results = [json.loads(m.content or "{}") for m in model.calls[2].messages[-4:]]  # the four views, whole
    assert [r["ok"] for r in results] == [False, False, False, False]
    assert "not a PNG or JPEG" in results[0]["error"] and "images are sent up to" in results[1]["error"]
    assert not any(m.images for m in model.calls[2].messages)
    for path in ("../link.png", "/etc/passwd", "build/../../secret.png"):
        escaping = ScriptedModel([tool_call_response("view_image", path=path)])
        result = act("deck", escaping, skills_root=skills_root, settings=settings, out_dir=tmp_path / "o2",
                     qa_mode="off")
        assert result.exit_reason == "sandbox_violation", path
        assert not any(m.images for m in escaping.calls[-1].messages)


# --- a whole document in view: the contact sheet of a deck, one page on request ---------------------------------


def _soffice(args, files):  # noqa: ANN001, ANN202 - LibreOffice: the deck becomes a PDF in the thumbnails folder
    argv = args["argv"]
    outdir, source = argv[argv.index("--outdir") + 1], argv[-1]
    stem = source.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    files[f"{outdir.removeprefix('build/')}/{stem}.pdf"] = b"%PDF-1.7 fake"
    return {"ok": True}


def _render(args, files):  # noqa: ANN001, ANN202 - render_pages.py: a sheet of 3 pages, or one page large
    argv = args["argv"]
    folder = argv[4].removeprefix("build/")
    if "--page" in argv:
        page = argv[argv.index("--page") + 1]
        files[f"{folder}/page-{page}.png"] = base64.b64decode(png_b64("white", (1280, 720)))
        return {"ok": True, "pages": 3, "rendered": 1, "files": [f"page-{page}.png"]}
    sheet, first = argv[argv.index("--sheet") + 1], argv[argv.index("--first") + 1]
    files[f"{folder}/{sheet}"] = base64.b64decode(png_b64("navy", (1264, 268)))
    files[f"{folder}/{first}"] = base64.b64decode(png_b64("white", (400, 225)))
    return {"ok": True, "pages": 3, "rendered": 3, "files": [sheet, first]}


def test_a_deck_is_shown_as_a_contact_sheet_then_one_page_and_rendered_only_once(write_skill, skills_root, settings,
                                                                                  tmp_path):
    from orchestrator.testing.memory_sandbox import InMemorySandbox

    write_skill("deck", "Make and check the deck.", files={"scripts/make.py": "x"})
    sandbox = InMemorySandbox({"scripts/make.py": lambda args, files: files.update({"deck.pptx": b"PK deck"}) or {}},
                              commands={"soffice": _soffice, "python3": _render})
    model = ScriptedModel([
        tool_call_response("run_script", path="scripts/make.py"),
        tool_call_response("view_image", path="build/deck.pptx"),
        tool_call_response("view_image", path="build/deck.pptx", page=2),
        text_response("the deck looks right; finish"),  # two turns without a new artifact: the Micro-Reflect
        tool_call_response("finish", summary="checked", outputs=["build/deck.pptx"]),
    ])
    result = act("deck", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
                 sandbox=sandbox)
    assert result.status == "done"
    sheet_result = json.loads(model.calls[2].messages[-2].content or "{}")
    assert sheet_result["ok"] and sheet_result["path"] == "build/.thumbnails/deck.pptx/contact.png"
    assert (sheet_result["rendered_from"], sheet_result["pages"], sheet_result["width"]) == ("build/deck.pptx", 3, 1264)
    (part,) = model.calls[2].messages[-1].to_openai()["content"][1:]
    assert part["image_url"]["url"] == "data:image/png;base64," + png_b64("navy", (1264, 268))
    tool_results = [json.loads(m.content or "{}") for m in model.calls[-1].messages if m.role == "tool"]
    page_result = next(r for r in tool_results if r.get("path", "").endswith("page-2.png"))
    assert page_result["path"] == "build/.thumbnails/deck.pptx/page-2.png" and page_result["width"] == 1280
    # one conversion for the sheet, one drawing of page 2; the outputs' thumbnails reuse the sheet already made
    assert [c[0] for c in sandbox.jobs[0].calls] == ["scripts/make.py", "soffice", "python3", "python3"]
    assert ".thumbnails/deck.pptx/contact.png" in [a.path for a in result.artifacts if a.type == "thumbnail"]


def test_renders_per_act_are_capped_by_one_setting(write_skill, skills_root, tmp_path):
    from orchestrator.testing.memory_sandbox import InMemorySandbox

    settings = load_settings(cache_dir=tmp_path / "cache", qa={"thumbnail_max_files": 1})
    write_skill("deck", "Make two decks.", files={"scripts/make.py": "x"})
    make = lambda args, files: files.update({"a.pptx": b"PK a", "b.docx": b"PK b"}) or {}  # noqa: E731
    sandbox = InMemorySandbox({"scripts/make.py": make}, commands={"soffice": _soffice, "python3": _render})
    model = ScriptedModel([
        tool_call_response("run_script", path="scripts/make.py"),
        tool_calls_response(tool_call("view_image", path="build/a.pptx"), tool_call("view_image", path="build/b.docx")),
        tool_call_response("finish", summary="done", outputs=["build/a.pptx", "build/b.docx"]),
    ])
    result = act("deck", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
                 sandbox=sandbox)
    tool_results = [json.loads(m.content or "{}") for m in model.calls[2].messages if m.role == "tool"][-2:]
    assert tool_results[0]["ok"] is True
    assert tool_results[1]["ok"] is False and "1 documents were already rendered" in tool_results[1]["error"]
    assert [c[0] for c in sandbox.jobs[0].calls].count("soffice") == 1  # the cap holds at finish too
    thumbs = {a.metadata["thumbnail_of"] for a in result.artifacts if a.type == "thumbnail"}
    assert thumbs == {"a.pptx"}
    assert any(r.tool == "thumbnail" and not r.ok and "qa.thumbnail_max_files" in (r.error or "")
               for r in result.evidence_summary)
