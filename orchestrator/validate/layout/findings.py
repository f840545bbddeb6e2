"""One layout finding: which rule, where (file, slide or page or sheet, shape or cell), what to change."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from orchestrator.config import LayoutSettings, Severity

BRAND_FILE = "brand.json"
"""The brand file's name among a goal's inputs and outputs (the brand-guidelines skill's output)."""
MAX_FINDINGS = 60
MAX_BRAND_BYTES = 1024 * 1024
_HEX = "0123456789ABCDEF"


class Finding(BaseModel):
    rule: str
    severity: Severity
    file: str
    where: str = ""
    """``slide 2, shape 'Title 1' (id 2)``, ``page 1, table 2``, ``sheet 'Budget', cell C7`` — empty for the file."""
    message: str

    @property
    def text(self) -> str:
        place = f" {self.where}" if self.where else ""
        return f"{self.file}{place}: {self.message}"


@dataclass
class Brand:
    """What a brand.json allows: colours (upper-case hex without '#'), font families (case-folded), a minimum size."""

    colors: set[str] = field(default_factory=set)
    fonts: dict[str, str] = field(default_factory=dict)
    min_pt: float | None = None
    source: str = "brand.json"

    def allows_font(self, family: str) -> bool:
        return not self.fonts or family.casefold() in self.fonts

    def allows_color(self, color: str) -> bool:
        return not self.colors or color.upper() in self.colors

    @property
    def font_list(self) -> str:
        return ", ".join(sorted(self.fonts.values()))

    @property
    def color_list(self) -> str:
        return ", ".join(f"#{c}" for c in sorted(self.colors))


def load_brand(path: str | None) -> tuple[Brand | None, str | None]:
    """The brand at ``path`` (untrusted: size-capped, shape-checked) or ``(None, why it cannot be used)``."""
    if not path:
        return None, None
    try:
        with Path(path).open("rb") as handle:
            raw = handle.read(MAX_BRAND_BYTES + 1)
        if len(raw) > MAX_BRAND_BYTES:
            return None, f"the brand file is larger than {MAX_BRAND_BYTES} bytes"
        data: Any = json.loads(raw.decode("utf-8-sig"))
    except (OSError, ValueError, RecursionError) as e:
        return None, f"the brand file cannot be read as JSON ({type(e).__name__})"
    if not isinstance(data, dict):
        return None, "the brand file is not a JSON object"
    brand = Brand(source=Path(path).name)
    colors = data["colors"] if isinstance(data.get("colors"), dict) else {}
    for value in colors.values():
        if isinstance(value, str) and len(value) == 7 and value[0] == "#" and all(c in _HEX for c in value[1:].upper()):
            brand.colors.add(value[1:].upper())
    fonts = data["fonts"] if isinstance(data.get("fonts"), dict) else {}
    brand.fonts = {v.strip().casefold(): v.strip()[:80] for v in fonts.values() if isinstance(v, str) and v.strip()}
    sizes = data["sizes_pt"] if isinstance(data.get("sizes_pt"), dict) else {}
    minimum = sizes.get("min")
    if isinstance(minimum, (int, float)) and not isinstance(minimum, bool) and 1 <= minimum <= 400:
        brand.min_pt = float(minimum)
    return brand, None


class Collector:
    """Findings of one file under the rule set: ``off`` rules are dropped, repeats merged, the count capped."""

    def __init__(self, file: str, settings: LayoutSettings) -> None:
        self.file = file
        self.settings = settings
        self.findings: list[Finding] = []
        self._seen: set[tuple[str, str, str]] = set()
        self.dropped = 0

    def add(self, rule: str, where: str, message: str) -> None:
        severity = self.settings.severity(rule)
        key = (rule, where, message)
        if severity == "off" or key in self._seen:
            return
        self._seen.add(key)
        if len(self.findings) >= MAX_FINDINGS:
            self.dropped += 1
            return
        self.findings.append(Finding(rule=rule, severity=severity, file=self.file, where=where, message=message))

    def done(self) -> list[Finding]:
        if self.dropped and self.settings.severity("too_large") != "off":
            self.findings.append(Finding(rule="too_large", severity=self.settings.severity("too_large"),
                                         file=self.file, message=f"{self.dropped} more layout findings not listed"))
        return self.findings
