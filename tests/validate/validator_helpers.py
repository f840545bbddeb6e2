"""Helpers for the validator tests: real Office files made by their libraries, and a recording fake model."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from pathlib import Path

from orchestrator.llm.interface import Message, ModelResponse, Purpose, ToolSpec, Usage


def make_deck(path: Path, slides: int) -> Path:
    from pptx import Presentation

    deck = Presentation()
    for number in range(slides):
        slide = deck.slides.add_slide(deck.slide_layouts[5])  # "Title Only": no empty placeholder
        slide.shapes.title.text = f"Slide {number + 1}"
    path.parent.mkdir(parents=True, exist_ok=True)
    deck.save(str(path))
    return path


def make_docx(path: Path, text: str = "Hello") -> Path:
    from docx import Document

    document = Document()
    document.add_paragraph(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    document.save(str(path))
    return path


def make_xlsx(path: Path) -> Path:
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.active["A1"] = 42
    path.parent.mkdir(parents=True, exist_ok=True)
    workbook.save(str(path))
    return path


def rezip_without(source: Path, target: Path, *members: str) -> Path:
    """A copy of the zip package ``source`` at ``target`` with ``members`` left out."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename not in members:
                dst.writestr(info, src.read(info.filename))
    return target


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def verdict(
    passed: bool, *, missing: Sequence[str] = (), violations: Sequence[str] = (), rationale: str = "ok"
) -> str:
    return json.dumps(
        {"pass": passed, "missing": list(missing), "violations": list(violations), "rationale": rationale}
    )


class RecordingModel:
    """A ChatModel playing ``answers`` in order and recording every call; an extra call fails the test."""

    def __init__(self, *answers: str | None, prompt_tokens: int = 100, completion_tokens: int = 20) -> None:
        self.name = "fake:recording"
        self.answers = list(answers)
        self.calls: list[dict[str, object]] = []
        self.usage = Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        purpose: Purpose = "other",
        json_response: bool = False,
    ) -> ModelResponse:
        self.calls.append(
            {
                "messages": list(messages),
                "tools": list(tools),
                "purpose": purpose,
                "json_response": json_response,
            }
        )
        if len(self.calls) > len(self.answers):
            raise AssertionError(f"unexpected model call #{len(self.calls)}")
        return ModelResponse(content=self.answers[len(self.calls) - 1], usage=self.usage, model="fake")

    def sent_text(self) -> str:
        return "\n".join(m.content or "" for call in self.calls for m in call["messages"])  # type: ignore[attr-defined]
