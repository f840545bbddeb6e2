"""The layout check measures text with the sandbox image's own fonts: the committed table is what the image's
fontconfig has (a rebuilt image with other fonts fails here until `sandbox fonts --write` regenerates it), and the
image carries a real font set — sans, serif, mono, CJK — with the bundled brand's faces."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.sandbox.image import probe_fonts
from orchestrator.validate.layout.fonts import font_table, text_width_pt

REPO = Path(__file__).resolve().parents[2]
_FONTS_LINE = next(line for line in (REPO / "skills/brand-guidelines/SKILL.md").read_text().splitlines()
                   if line.strip().startswith('"fonts"'))
BRAND_FONTS = json.loads("{" + _FONTS_LINE.strip().rstrip(",") + "}")["fonts"]


def test_the_committed_font_table_is_what_the_sandbox_image_has(docker_client, sandbox_image):
    probed = probe_fonts(docker_client, sandbox_image)
    table = font_table()
    assert set(probed["families"]) == set(table.families.values())
    committed = json.loads((REPO / "orchestrator/validate/layout/fontmetrics.json").read_text(encoding="utf-8"))
    assert probed["metrics"] == committed["metrics"]


def test_the_image_has_sans_serif_mono_cjk_and_the_brand_s_fonts():
    table = font_table()
    for family in ("Liberation Sans", "Noto Serif", "DejaVu Sans Mono", "Noto Sans CJK JP", *BRAND_FONTS.values()):
        assert table.has(family), family
    assert not table.has("Montserrat") and table.alias("Calibri") == "Carlito"


def test_widths_come_from_the_faces_themselves():
    table = font_table()
    sans, mono = table.face("Liberation Sans"), table.face("DejaVu Sans Mono")
    assert text_width_pt("iiii", mono, 10) == text_width_pt("MMMM", mono, 10)  # monospaced
    assert text_width_pt("iiii", sans, 10) < text_width_pt("MMMM", sans, 10) / 2
    assert text_width_pt("日本語", table.face("Noto Sans CJK JP"), 20) == 60  # one em per ideograph
    assert table.face("Arial") is sans  # the metric-compatible face fontconfig renders Arial with
