"""Office files checked for real: the zip package is sane, and the document opens with its library.

A ``.pptx`` / ``.docx`` / ``.xlsx`` is an OPC zip package: ``[Content_Types].xml``, ``_rels/.rels`` pointing
at the main part, then the parts. The zip checks give precise messages; opening the file with python-pptx,
python-docx or openpyxl catches everything else (wrong document type, broken XML).
"""

from __future__ import annotations

import posixpath
import zipfile
from pathlib import Path
from xml.etree import ElementTree

from pydantic import BaseModel

# A package that inflates past these (in all, per part, or in members) is refused before any library parses it
# (zip bombs). The caller also runs this check in a memory- and time-bounded child process.
MAX_UNCOMPRESSED_BYTES = 512 * 1024 * 1024
MAX_PART_BYTES = 128 * 1024 * 1024
MAX_MEMBERS = 20_000
MAX_RELS_BYTES = 1024 * 1024
_OFFICE_DOCUMENT_REL = "/officeDocument"
_DEFAULT_MAIN_PART = {"pptx": "ppt/presentation.xml", "docx": "word/document.xml", "xlsx": "xl/workbook.xml"}
_DOCUMENT_NAMES = {"pptx": "PowerPoint presentation", "docx": "Word document", "xlsx": "Excel workbook"}


class OfficeCheck(BaseModel):
    problems: list[str] = []
    slides: int | None = None
    """Number of slides of a presentation that opened."""

    @property
    def ok(self) -> bool:
        return not self.problems


def check_office(path: Path, kind: str, shown: str) -> OfficeCheck:
    """Problems with the Office file at ``path`` (``shown`` in messages), and the slide count of a pptx."""
    problems = _package_problems(path, kind, shown)
    if problems:
        return OfficeCheck(problems=problems)
    try:
        slides = _open_document(path, kind)
    except Exception as e:  # the libraries raise many unrelated types for a broken document
        detail = str(e).replace(str(path), shown).splitlines()[0][:200] if str(e) else type(e).__name__
        return OfficeCheck(problems=[f"{shown} does not open as a {_DOCUMENT_NAMES[kind]}: {detail}"])
    return OfficeCheck(slides=slides)


def _package_problems(path: Path, kind: str, shown: str) -> list[str]:
    prefix = f"{shown} is not a valid {kind} file"
    if not zipfile.is_zipfile(path):
        return [f"{prefix}: not a zip package"]
    try:
        with zipfile.ZipFile(path) as package:
            infos = package.infolist()
            if len(infos) > MAX_MEMBERS:
                return [f"{prefix}: {len(infos)} members (limit {MAX_MEMBERS})"]
            big = next((i for i in infos if i.file_size > MAX_PART_BYTES), None)
            if big is not None:
                return [f"{prefix}: part {big.filename} inflates to {big.file_size} bytes (limit {MAX_PART_BYTES})"]
            inflated = sum(info.file_size for info in infos)
            if inflated > MAX_UNCOMPRESSED_BYTES:
                return [f"{prefix}: inflates to {inflated} bytes (limit {MAX_UNCOMPRESSED_BYTES})"]
            names = {info.filename for info in infos}
            if "[Content_Types].xml" not in names:
                return [f"{prefix}: [Content_Types].xml is missing"]
            if "_rels/.rels" not in names:
                return [f"{prefix}: _rels/.rels is missing"]
            if package.getinfo("_rels/.rels").file_size > MAX_RELS_BYTES:
                return [f"{prefix}: _rels/.rels is larger than {MAX_RELS_BYTES} bytes"]
            main_part = _main_part(package.read("_rels/.rels")) or _DEFAULT_MAIN_PART[kind]
            if main_part not in names:
                return [f"{prefix}: main part {main_part} is missing"]
            broken = package.testzip()
            if broken is not None:
                return [f"{prefix}: member {broken} is corrupt (CRC mismatch)"]
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ElementTree.ParseError) as e:
        return [f"{prefix}: {e}"]
    except Exception as e:  # zlib errors surface as zlib.error or RuntimeError depending on the member
        return [f"{prefix}: {type(e).__name__}: {e}"]
    return []


def _main_part(rels_xml: bytes) -> str | None:
    root = ElementTree.fromstring(rels_xml)
    for rel in root:
        if rel.get("Type", "").endswith(_OFFICE_DOCUMENT_REL) and rel.get("TargetMode") != "External":
            target = rel.get("Target", "")
            return posixpath.normpath(target.lstrip("/")) if target else None
    return None


def _open_document(path: Path, kind: str) -> int | None:
    """Open the document with its library; the slide count of a presentation, else ``None``."""
    if kind == "pptx":
        # Deferred: python-pptx, python-docx and openpyxl (with lxml) take most of a second to import, and only
        # goals that produce Office files need them.
        from pptx import Presentation

        return len(Presentation(str(path)).slides)
    if kind == "docx":
        # Deferred: see above.
        from docx import Document

        Document(str(path))
        return None
    # Deferred: see above.
    from openpyxl import load_workbook

    workbook = load_workbook(str(path), read_only=True)
    workbook.close()
    return None
