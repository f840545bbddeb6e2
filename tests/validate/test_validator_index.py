"""The artifacts index: metadata, a ≤400-character preview for text, kind+size+hash for binaries."""

from __future__ import annotations

import hashlib
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from validator_helpers import make_deck, write

from orchestrator.validate import artifacts_index
from orchestrator.validate.report import PREVIEW_CHARS


def test_text_files_get_a_preview_of_at_most_400_characters(out: Path) -> None:
    write(out / "long.md", "# Title\n" + "word " * 1000)
    write(out / "short.txt", "just this")
    entries = {e.path: e for e in artifacts_index(out)}
    assert len(entries["long.md"].preview or "") == PREVIEW_CHARS == 400
    assert entries["long.md"].preview.startswith("# Title\n")  # type: ignore[union-attr]
    assert entries["short.txt"].preview == "just this"
    assert entries["long.md"].size == 8 + 5000 and entries["long.md"].kind == "markdown"


def test_multibyte_text_is_cut_by_characters_not_bytes(out: Path) -> None:
    write(out / "ja.txt", "検証" * 500)
    [entry] = artifacts_index(out)
    assert entry.preview == ("検証" * 200)


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=0, max_size=2000))
def test_previews_never_exceed_400_characters(tmp_path_factory, text: str) -> None:
    folder = tmp_path_factory.mktemp("p")
    write(folder / "any.txt", text)
    [entry] = artifacts_index(folder)
    assert entry.preview is not None and len(entry.preview) <= 400
    assert text.startswith(entry.preview)


def test_binaries_have_no_preview_but_kind_size_and_hash(out: Path) -> None:
    deck = make_deck(out / "deck.pptx", 1)
    blob = write(out / "data.bin", bytes(range(256)) * 4)
    unknown_text = write(out / "LICENSE", "MIT License\n")
    png = write(out / "pic", b"\x89PNG\r\n\x1a\n" + b"\x00" * 32)
    entries = {e.path: e for e in artifacts_index(out)}
    assert entries["deck.pptx"].kind == "pptx" and entries["deck.pptx"].preview is None
    assert entries["data.bin"].kind == "binary" and entries["data.bin"].preview is None
    assert entries["pic"].kind == "png" and entries["pic"].preview is None
    assert entries["LICENSE"].kind == "text" and entries["LICENSE"].preview == "MIT License\n"
    assert entries["deck.pptx"].size == deck.stat().st_size
    assert entries["data.bin"].sha256 == hashlib.sha256(blob.read_bytes()).hexdigest()
    assert entries["pic"].sha256 == hashlib.sha256(png.read_bytes()).hexdigest()
    assert entries["LICENSE"].sha256 == hashlib.sha256(unknown_text.read_bytes()).hexdigest()


def test_the_index_is_sorted_and_scoped_to_the_output_root(out: Path) -> None:
    write(out / "build" / "b.txt", "b")
    write(out / "build" / "a" / "z.json", "{}")
    write(out / "elsewhere.txt", "not produced")
    assert [e.path for e in artifacts_index(out, "build")] == ["build/a/z.json", "build/b.txt"]
    assert [e.name for e in artifacts_index(out, "build")] == ["z.json", "b.txt"]


def test_links_pointing_out_are_left_out_of_the_index(tmp_path: Path, out: Path) -> None:
    write(tmp_path / "secret.txt", "secret")
    (out / "leak.txt").symlink_to(tmp_path / "secret.txt")
    assert artifacts_index(out) == []
