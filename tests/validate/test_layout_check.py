"""The layout check in the contract stage: crafted decks (and documents, workbooks) with one defect each fail with a
violation that names the slide and the shape; good ones pass; warnings never fail; the rule set comes from settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from layout_decks import (
    PPTX_DEFECTS,
    brand_file,
    cut_text_workbook,
    good_default_deck,
    good_report,
    good_wide_deck,
    good_workbook,
    narrow_column_workbook,
    off_brand_deck,
    repeated_paragraph_report,
    stacked_deck,
    unwrapped_deck,
    wide_picture_report,
)

from orchestrator.config import LayoutSettings
from orchestrator.validate.rules import ExpectedOutputs
from orchestrator.validate.validator import validate_outputs


def check(out: Path, *, brand: Path | None = None, layout: LayoutSettings | None = None):  # noqa: ANN201
    return validate_outputs(out, ExpectedOutputs(), qa_mode="off", layout=layout, brand=brand)


def test_a_wide_branded_deck_passes_with_no_finding_at_all(out):
    good_wide_deck(out / "deck.pptx")
    report = check(out, brand=brand_file(out.parent))
    assert report.pass_, report.violations
    assert report.violations == [] and report.warnings == []


def test_python_pptx_s_own_template_filled_in_passes_and_says_calibri_renders_as_carlito(out):
    good_default_deck(out / "deck.pptx")
    report = check(out)
    assert report.pass_, report.violations
    assert any("the font 'Calibri' is not in the sandbox image; it renders with the metric-compatible 'Carlito'" in w
               for w in report.warnings)


@pytest.mark.parametrize("defect", sorted(PPTX_DEFECTS))
def test_each_defect_fails_the_contract_naming_slide_and_shape(out, defect):
    build, says, where = PPTX_DEFECTS[defect]
    build(out / "deck.pptx")
    report = check(out)
    assert not report.pass_ and report.stage == "contract"
    assert report.violation_categories.get("layout", 0) >= 1
    found = [v for v in report.violations if says in v]
    assert found, report.violations
    assert found[0].startswith(f"deck.pptx {where}"), found[0]


def test_an_unwrapped_line_is_a_fault_only_when_it_runs_off_the_slide(out):
    unwrapped_deck(out / "deck.pptx", left_in=0.5)  # longer than its box, drawn past it, still on the slide
    assert check(out).pass_, check(out).violations
    unwrapped_deck(out / "deck.pptx", left_in=9.0)
    report = check(out)
    assert any(v.startswith("deck.pptx slide 1, shape 'Long line'") and "unwrapped line runs" in v
               for v in report.violations), report.violations


def test_fonts_and_colours_outside_the_brand_are_violations_only_when_a_brand_is_given(out):
    off_brand_deck(out / "deck.pptx")
    assert check(out).pass_  # no brand given: Comic Sans MS is only a missing font (a warning)
    report = check(out, brand=brand_file(out.parent))
    assert not report.pass_
    assert "deck.pptx slide 1, shape 'Title' (id 2): uses the font 'Comic Sans MS', not one of the brand's fonts " \
           "(Lato, Source Sans 3)" in report.violations
    assert any("text colour #FF0000 is not one of the brand's colours" in v for v in report.violations)
    assert any("the font 'Comic Sans MS' is not in the sandbox image" in w for w in report.warnings)


def test_the_overflow_estimate_uses_real_font_metrics_and_suggests_a_size_that_fits(out):
    PPTX_DEFECTS["overflow"][0](out / "deck.pptx")
    [violation] = [v for v in check(out).violations if "does not fit" in v]
    assert "lines need" in violation and "the box is 1.40 in high" in violation
    size = int(violation.rsplit("use at most ", 1)[1].split(" pt")[0])
    assert 6 <= size < 24


def test_settings_turn_a_rule_into_a_warning_or_off(out):
    PPTX_DEFECTS["confined"][0](out / "deck.pptx")
    as_warning = check(out, layout=LayoutSettings(rules={"confined": "warning"}))
    assert as_warning.pass_ and any("the content spans only" in w for w in as_warning.warnings)
    off = check(out, layout=LayoutSettings(rules={"confined": "off", "font_substituted": "off"}))
    assert off.pass_ and off.warnings == []
    assert check(out, layout=LayoutSettings(enabled=False)).pass_


def test_a_narrower_tolerance_is_stricter(out):
    good_wide_deck(out / "deck.pptx")
    assert check(out).pass_
    assert not check(out, layout=LayoutSettings(min_content_width=0.99)).pass_


def test_a_document_with_a_picture_wider_than_the_page_or_a_repeated_paragraph_fails(out, tmp_path):
    good_report(out / "good.docx")
    assert check(out).pass_, check(out).violations
    wide_picture_report(out / "wide.docx")
    repeated_paragraph_report(out / "repeat.docx")
    report = check(out)
    assert "wide.docx picture 1: is 9.00 in wide, the text column 6.00 in; scale it to the column" in report.violations
    assert any(v.startswith("repeat.docx paragraph 2: 'Revenue reached") for v in report.violations)
    assert not any(v.startswith("good.docx") for v in report.violations)


def test_a_workbook_whose_numbers_show_hashes_or_whose_text_is_cut_fails(out):
    good_workbook(out / "good.xlsx")
    assert check(out).pass_, check(out).violations
    narrow_column_workbook(out / "narrow.xlsx")
    cut_text_workbook(out / "cut.xlsx")
    report = check(out)
    assert any(v.startswith("narrow.xlsx sheet 'Sheet', cell B2: the number 123,456,789.25 needs a column")
               for v in report.violations), report.violations
    assert any(v.startswith("cut.xlsx sheet 'Sheet', cell A1: the text 'Total revenue") for v in report.violations)
    assert not any(v.startswith("good.xlsx") for v in report.violations)


def test_shrink_on_overflow_text_is_a_warning_until_it_would_need_to_shrink_past_the_minimum(out):
    from pptx import Presentation

    deck = Presentation()  # the template's title and body shrink their text on overflow (normAutofit)
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Quarterly revenue grew twelve per cent on subscriptions"
    slide.placeholders[1].text = "Subscriptions led the growth\nCosts stayed flat"
    crowded = deck.slides.add_slide(deck.slide_layouts[1])
    crowded.shapes.title.text = "Everything"
    crowded.placeholders[1].text = "\n".join(f"Point {n} with a sentence long enough to wrap once" for n in range(20))
    deck.save(str(out / "deck.pptx"))
    report = check(out)
    assert any(w.startswith("deck.pptx slide 1, shape 'Title 1'") and "fits its box only shrunk" in w
               for w in report.warnings), report.warnings
    assert [v for v in report.violations if "does not fit" in v][0].startswith("deck.pptx slide 2, shape 'Content")
    assert not any("slide 1" in v for v in report.violations)


def test_text_boxes_stacked_on_each_other_overlap_even_where_their_short_texts_do_not_touch(out):
    stacked_deck(out / "deck.pptx")
    report = check(out)
    assert "deck.pptx slide 1, shape 'Upper' (id 3): its box lies over the box of shape 'Lower' (id 4) (50% of the " \
           "smaller one); move one of them" in report.violations
