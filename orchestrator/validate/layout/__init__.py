"""The layout check of Office outputs (contract stage): what a person would see wrong before presenting the file.

:func:`check_layout` runs inside the validator's bounded child (memory and time limits, see ``contract.py``) on a
package the zip checks already accepted. It reads the XML itself (``package.py``: size caps, no DTDs or entities)
and measures text with the sandbox image's font metrics (``fonts.py``). Each finding names the file, the slide and
shape (or page, sheet and cell) and what to change; ``qa.layout.rules`` decides which are errors (violations) and
which only warnings. docs/validation.md "The layout check" lists the rules.
"""

from __future__ import annotations

from typing import Any

from orchestrator.config import LayoutSettings
from orchestrator.validate.layout.docx_checks import check_document
from orchestrator.validate.layout.findings import Collector, Finding, load_brand
from orchestrator.validate.layout.fonts import font_table
from orchestrator.validate.layout.package import PartError, open_package
from orchestrator.validate.layout.pptx_checks import check_deck
from orchestrator.validate.layout.pptx_model import read_deck
from orchestrator.validate.layout.xlsx_checks import check_workbook

__all__ = ["Finding", "check_layout"]


def check_layout(path: str, kind: str, shown: str, settings: dict[str, Any], brand_path: str | None) -> list[Finding]:
    """The layout findings of the Office file at ``path`` (``shown`` in messages), under ``settings`` (qa.layout)."""
    rules = LayoutSettings.model_validate(settings)
    out = Collector(shown, rules)
    brand, problem = load_brand(brand_path)
    if problem:
        out.add("unreadable", "", f"the brand file given for the layout check cannot be used: {problem}")
    try:
        with open_package(path) as package:
            if kind == "pptx":
                check_deck(read_deck(package), font_table(), brand, rules, out)
            elif kind == "docx":
                check_document(package, font_table(), brand, out)
            elif kind == "xlsx":
                check_workbook(package, font_table(), brand, out)
    except PartError as e:
        out.add("unreadable", "", f"cannot be read for the layout check: {e}")
    except RecursionError:
        out.add("unreadable", "", "cannot be read for the layout check: nested too deeply")
    return out.done()
