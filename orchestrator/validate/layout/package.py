"""Reading the parts of an Office package for the layout check: bounded, and never trusting what a part says.

The contract's package check (``office.py``) already refused zip bombs and packages with too many members before
this runs; here every part is still read with a size cap, parsed by a hardened lxml parser (no DTDs, no entities,
no network, libxml2's default depth limit), and relationship targets are resolved inside the package only.
"""

from __future__ import annotations

import posixpath
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager

from lxml import etree

MAX_PART_BYTES = 16 * 1024 * 1024
MAX_READ_BYTES = 256 * 1024 * 1024

NS = {
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "p": "http://schemas.openxmlformats.org/presentationml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "w": "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "wp": "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
    "x": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
    "xdr": "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing",
    "c": "http://schemas.openxmlformats.org/drawingml/2006/chart",
    "rel": "http://schemas.openxmlformats.org/package/2006/relationships",
}
R_ID = f"{{{NS['r']}}}id"
R_EMBED = f"{{{NS['r']}}}embed"


class PartError(Exception):
    """A part that cannot be read for the layout check (missing, too large, not XML); the message says which."""


class Package:
    """One open Office package: parts by name, parsed once, with a cap on everything read."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self._zip = archive
        self._names = set(archive.namelist())
        self._parsed: dict[str, etree._Element] = {}
        self._read = 0
        self._parser = etree.XMLParser(
            resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, remove_comments=True,
            remove_pis=True,
        )

    def has(self, name: str) -> bool:
        return name in self._names

    def xml(self, name: str) -> etree._Element:
        """The parsed part ``name``; :class:`PartError` when it is missing, too large or not plain XML."""
        if name in self._parsed:
            return self._parsed[name]
        if name not in self._names:
            raise PartError(f"part {name} is missing")
        size = self._zip.getinfo(name).file_size
        if size > MAX_PART_BYTES or self._read + size > MAX_READ_BYTES:
            raise PartError(f"part {name} is {size} bytes, more than the layout check reads")
        data = self._zip.read(name)
        self._read += len(data)
        if b"<!DOCTYPE" in data[:4096] or b"<!ENTITY" in data:
            raise PartError(f"part {name} declares a DTD or entities, which Office parts never do")
        try:
            root = etree.fromstring(data, self._parser)
        except etree.XMLSyntaxError as e:
            raise PartError(f"part {name} is not well-formed XML ({str(e)[:120]})") from e
        self._parsed[name] = root
        return root

    def rels(self, part: str) -> dict[str, tuple[str, str]]:
        """``{rId: (type suffix, target part)}`` of ``part``'s internal relationships (targets inside the package)."""
        folder, base = posixpath.split(part)
        rels_name = posixpath.join(folder, "_rels", f"{base}.rels")
        if rels_name not in self._names:
            return {}
        out: dict[str, tuple[str, str]] = {}
        for rel in self.xml(rels_name).iter(f"{{{NS['rel']}}}Relationship"):
            if rel.get("TargetMode") == "External":
                continue
            target = rel.get("Target") or ""
            joined = target.lstrip("/") if target.startswith("/") else posixpath.join(folder, target)
            resolved = posixpath.normpath(joined)
            if resolved.startswith("../") or resolved == "..":
                continue
            out[rel.get("Id") or ""] = ((rel.get("Type") or "").rsplit("/", 1)[-1], resolved)
        return out

    def related(self, part: str, type_suffix: str) -> str | None:
        """The first part ``part`` relates to with a relationship type ending in ``type_suffix``."""
        return next((t for kind, t in self.rels(part).values() if kind == type_suffix), None)

    def main_part(self, default: str) -> str:
        for kind, target in self.rels("").values():
            if kind == "officeDocument":
                return target
        return default


@contextmanager
def open_package(path: str) -> Iterator[Package]:
    with zipfile.ZipFile(path) as archive:
        yield Package(archive)


def emu(value: str | None, default: int = 0) -> int:
    """An EMU (or other integer) attribute; text that is not an integer counts as ``default``."""
    if value is None:
        return default
    try:
        return int(value.strip())
    except ValueError:
        return default


def q(prefix: str, name: str) -> str:
    """Clark notation: ``q("a", "off")`` -> ``{http://...drawingml/2006/main}off``."""
    return f"{{{NS[prefix]}}}{name}"
