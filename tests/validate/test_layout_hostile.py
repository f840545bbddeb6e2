"""Attacks on the layout check: a deck is untrusted input. Absurd EMU values, XML nested past any sane depth, DTDs
and entities, floods of shapes, slides and text, parts too large to read, relationships pointing out of the package
and a hostile brand file each end as a finding (or a bounded refusal) within the validator's limits — never a crash,
a hang or an unbounded read."""

from __future__ import annotations

import re
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from layout_decks import brand_file, good_wide_deck

from orchestrator.validate.rules import ExpectedOutputs
from orchestrator.validate.validator import validate_outputs

SLIDE = "ppt/slides/slide1.xml"
PRESENTATION = "ppt/presentation.xml"


def rewrite(path: Path, member: str, change: Callable[[str], str]) -> Path:
    """``path`` with one member's text replaced by ``change(text)`` (every other member copied as it is)."""
    source = path.with_suffix(".orig")
    path.rename(source)
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            dst.writestr(info.filename, change(data.decode("utf-8")) if info.filename == member else data)
    source.unlink()
    return path


def deck(out: Path, member: str, change: Callable[[str], str]) -> Path:
    return rewrite(good_wide_deck(out / "deck.pptx"), member, change)


def check(out: Path, brand: Path | None = None):  # noqa: ANN201
    started = time.monotonic()
    report = validate_outputs(out, ExpectedOutputs(), qa_mode="off", brand=brand)
    assert time.monotonic() - started < 60
    return report


def test_an_absurd_slide_size_is_one_finding_not_a_geometry_storm(out):
    deck(out, PRESENTATION, lambda x: re.sub(r'<p:sldSz cx="\d+" cy="\d+"', '<p:sldSz cx="10" cy="999999999999999"', x))
    report = check(out)
    assert [v for v in report.violations if "slide size" in v] == [
        "deck.pptx: the slide size 10 x 999999999999999 EMU is outside what PowerPoint accepts (1 to 56 in a side); "
        "use 12192000 x 6858000 (16:9)"
    ]


def test_shapes_at_absurd_or_negative_or_unreadable_offsets_are_findings(out):
    def absurd(xml: str) -> str:
        xml = xml.replace('<a:off x="457200"', '<a:off x="9' + "9" * 40 + '"', 1)
        xml = re.sub(r'<a:ext cx="\d+" cy="\d+"/>', '<a:ext cx="-5" cy="notanumber"/>', xml, count=1)
        return xml

    deck(out, "ppt/slides/slide2.xml", absurd)
    report = check(out)
    assert not report.pass_
    assert any("slide 2" in v and ("outside the slide" in v or "negative size" in v) for v in report.violations)


def test_xml_nested_past_any_sane_depth_is_refused_and_deep_groups_are_walked_to_a_cap(out):
    deep = "<p:grpSp>" * 5000 + "</p:grpSp>" * 5000
    deck(out, SLIDE, lambda x: x.replace("</p:spTree>", deep + "</p:spTree>"))
    report = check(out)
    assert any("Excessive depth" in v or "cannot be read for the layout check" in v for v in report.violations)
    text = ('<p:sp><p:nvSpPr><p:cNvPr id="900" name="Buried"/><p:cNvSpPr/><p:nvPr/></p:nvSpPr><p:spPr><a:xfrm>'
            '<a:off x="0" y="0"/><a:ext cx="10" cy="10"/></a:xfrm></p:spPr></p:sp>')
    groups = "<p:grpSp>" * 120 + text + "</p:grpSp>" * 120
    deck(out, SLIDE, lambda x: x.replace("</p:spTree>", groups + "</p:spTree>"))
    report = check(out)  # 120 levels is legal XML: walked to the group-depth cap, no recursion error
    assert not any("nested too deeply" in v for v in report.violations)


def test_a_dtd_or_an_entity_in_a_part_is_refused_unread(out):
    laughs = '<!DOCTYPE p:sld [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
    deck(out, SLIDE, lambda x: x.replace("?>", "?>" + laughs, 1))
    report = check(out)
    assert any("declares a DTD or entities" in v for v in report.violations), report.violations


def test_a_flood_of_shapes_is_checked_up_to_a_cap(out):
    box = ('<p:sp><p:nvSpPr><p:cNvPr id="{n}" name="n{n}"/><p:cNvSpPr/><p:nvPr/></p:nvSpPr><p:spPr><a:xfrm>'
           '<a:off x="0" y="0"/><a:ext cx="10" cy="10"/></a:xfrm></p:spPr></p:sp>')
    deck(out, SLIDE, lambda x: x.replace("</p:spTree>", "".join(box.format(n=n) for n in range(100, 20100))
                                         + "</p:spTree>"))
    report = check(out)
    assert any("only the first 1000 shapes were checked" in w for w in report.warnings), report.warnings


def test_megabytes_of_text_in_one_box_are_cut_and_reported_as_overflow(out):
    deck(out, "ppt/slides/slide3.xml", lambda x: x.replace("Hire two engineers by Jan (CTO)", "word " * 1_000_000))
    report = check(out)
    assert any("slide 3" in v and "does not fit its box" in v for v in report.violations)


def test_a_part_too_large_to_read_is_a_finding(out):
    padding = "<a:pad/>" * (17 * 1024 * 1024 // 8)
    deck(out, SLIDE, lambda x: x.replace("</p:spTree>", padding + "</p:spTree>"))
    report = check(out)
    assert any("more than the layout check reads" in v for v in report.violations), report.violations


def test_a_relationship_pointing_out_of_the_package_is_not_followed(out):
    deck(out, "ppt/slides/_rels/slide1.xml.rels",
         lambda x: re.sub(r'Target="\.\./slideLayouts/slideLayout\d+\.xml"', 'Target="../../../../etc/passwd"', x))
    report = check(out)
    assert report.pass_ or all("passwd" not in v for v in report.violations)


def test_a_zip_bomb_is_refused_before_the_layout_check_reads_it(out):
    path = good_wide_deck(out / "deck.pptx")
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as package:
        package.writestr("ppt/media/bomb.bin", b"\0" * (600 * 1024 * 1024))
    report = check(out)
    assert any("inflates to" in v for v in report.violations)
    assert report.violation_categories.get("layout", 0) == 0


def test_a_hostile_brand_file_is_a_finding_about_the_brand(out, tmp_path):
    good_wide_deck(out / "deck.pptx")
    nested = tmp_path / "nested.json"
    nested.write_text("[" * 100_000 + "]" * 100_000)
    huge = tmp_path / "huge.json"
    huge.write_bytes(b'{"colors": {"a": "' + b"#" * (2 * 1024 * 1024) + b'"}}')
    for brand in (nested, huge):
        report = check(out, brand)
        assert any("the brand file given for the layout check cannot be used" in v for v in report.violations)
    assert check(out, brand_file(tmp_path)).pass_
