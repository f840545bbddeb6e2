"""The layout rules of a deck: each finding names the slide and the shape, and says what to change.

Rules (their severity comes from ``qa.layout.rules``): ``slide_size``, ``off_slide``, ``overflow``,
``empty_placeholder``, ``overlap`` (text on text), ``picture_overlap`` (text on a picture or chart),
``confined`` (content spanning too little of a wide slide), ``duplicate_text``, ``duplicate_title``,
``brand_font``, ``brand_color``, ``small_text``, ``font_missing``, ``font_substituted``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from itertools import combinations

from orchestrator.config import LayoutSettings
from orchestrator.validate.layout.findings import Brand, Collector
from orchestrator.validate.layout.fonts import FontTable
from orchestrator.validate.layout.pptx_model import _OTHER_TYPES, _TITLE_TYPES, EMU_PER_PT, Deck, Shape, Slide
from orchestrator.validate.layout.textfit import Extent, measure

EMU_PER_IN = 914_400
MIN_SLIDE, MAX_SLIDE = 914_400, 51_206_400  # what PowerPoint accepts: 1 to 56 inches a side
MIN_CONTAINED_CHARS = 8
MIN_SHARED_CHARS = 4
MAX_OVERLAP_SHAPES = 200
BOX_OVERLAP_SHARE = 0.25
Box = tuple[float, float, float, float]  # left, top, right, bottom in EMU


def _inches(value: float) -> str:
    return f"{value / EMU_PER_IN:.2f} in"


def check_deck(deck: Deck, table: FontTable, brand: Brand | None, settings: LayoutSettings, out: Collector) -> None:
    for note in deck.cut:
        out.add("too_large", "", note)
    if not (MIN_SLIDE <= deck.width <= MAX_SLIDE and MIN_SLIDE <= deck.height <= MAX_SLIDE):
        out.add("slide_size", "", f"the slide size {deck.width} x {deck.height} EMU is outside what PowerPoint "
                "accepts (1 to 56 in a side); use 12192000 x 6858000 (16:9)")
        return
    titles: dict[str, int] = {}
    for slide in deck.slides:
        _check_slide(deck, slide, table, brand, settings, out)
        for shape in slide.shapes:
            if shape.placeholder in _TITLE_TYPES and shape.has_text:
                key = _norm(shape.text)
                if key in titles:
                    out.add("duplicate_title", f"slide {slide.number}, {shape.label}", f"the title "
                            f"'{shape.text[:80]}' repeats slide {titles[key]}'s; give each slide its own title")
                titles.setdefault(key, slide.number)


def _check_slide(deck: Deck, slide: Slide, table: FontTable, brand: Brand | None, settings: LayoutSettings,
                 out: Collector) -> None:
    where = f"slide {slide.number}"
    occupied: list[tuple[Shape, Box]] = []
    for shape in slide.shapes:
        here = f"{where}, {shape.label}"
        _check_geometry(deck, shape, here, settings, out)
        if shape.kind == "text" and shape.has_text:
            extent = _check_fit(shape, here, table, settings, out)
            covered = _occupied(shape, extent)
            occupied.append((shape, covered))
            if not shape.body.wrap:
                _check_long_line(deck, covered, here, settings, out)
        if shape.placeholder and shape.placeholder not in _OTHER_TYPES and not _filled(shape):
            out.add("empty_placeholder", here, f"the {shape.placeholder} placeholder is empty (PowerPoint shows "
                    "'Click to add' in it); fill it or delete it")
        _check_fonts(shape, here, table, brand, out)
        if brand is not None:
            for color in {c for c in shape.colors if not brand.allows_color(c)}:
                out.add("brand_color", here, f"fill or line colour #{color} is not one of the brand's colours "
                        f"({brand.color_list})")
    if brand is not None and slide.background and not brand.allows_color(slide.background):
        out.add("brand_color", where, f"the background #{slide.background} is not one of the brand's colours "
                f"({brand.color_list})")
    _check_overlaps(slide, occupied, settings, out)
    _check_confined(deck, slide, settings, out)
    _check_duplicates(slide, out)


def _filled(shape: Shape) -> bool:
    return shape.has_text if shape.kind == "text" else shape.filled_placeholder


def _box(shape: Shape) -> Box:
    x, y, w, h = shape.box
    if shape.rotation % 180:
        angle = math.radians(shape.rotation)
        cx, cy = x + w / 2, y + h / 2
        rw = abs(w * math.cos(angle)) + abs(h * math.sin(angle))
        rh = abs(w * math.sin(angle)) + abs(h * math.cos(angle))
        return cx - rw / 2, cy - rh / 2, cx + rw / 2, cy + rh / 2
    return x, y, x + w, y + h


def _has_content(shape: Shape) -> bool:
    return shape.has_text or shape.kind in ("picture", "graphic")


def _check_geometry(deck: Deck, shape: Shape, here: str, settings: LayoutSettings, out: Collector) -> None:
    x, y, w, h = shape.box
    if w < 0 or h < 0:
        out.add("off_slide", here, f"has a negative size ({w} x {h} EMU); give it a real width and height")
        return
    left, top, right, bottom = _box(shape)
    if right <= 0 or bottom <= 0 or left >= deck.width or top >= deck.height:
        out.add("off_slide", here, f"lies entirely outside the slide (at {_inches(x)}, {_inches(y)}; the slide is "
                f"{_inches(deck.width)} x {_inches(deck.height)}); move it onto the slide or delete it")
        return
    if not _has_content(shape):
        return  # decorative shapes may bleed off the edge on purpose
    slack_x, slack_y = deck.width * settings.edge_tolerance, deck.height * settings.edge_tolerance
    sides = [(name, amount) for name, amount, slack in (
        ("left", -left, slack_x), ("top", -top, slack_y),
        ("right", right - deck.width, slack_x), ("bottom", bottom - deck.height, slack_y)) if amount > slack]
    if sides:
        text = ", ".join(f"{_inches(amount)} past the {name} edge" for name, amount in sides)
        out.add("off_slide", here, f"sticks out of the slide ({text}); keep it inside the "
                f"{_inches(deck.width)} x {_inches(deck.height)} slide")


def _inner(shape: Shape) -> tuple[float, float]:
    left, top, right, bottom = shape.body.insets
    width, height = (shape.box[2] - left - right) / EMU_PER_PT, (shape.box[3] - top - bottom) / EMU_PER_PT
    return (height, width) if shape.body.vertical else (width, height)


def _check_fit(shape: Shape, here: str, table: FontTable, settings: LayoutSettings, out: Collector) -> Extent:
    width, height = _inner(shape)
    body = shape.body
    scale = body.font_scale if body.autofit == "shrink" else 1.0
    extent = measure(shape.paras, table, width, wrap=body.wrap, scale=scale, line_reduction=body.line_reduction)
    size = max((r.size_pt for p in shape.paras for r in p.runs if r.text.strip()), default=18.0) * scale
    room = max(height, 0) * (1 + settings.fit_tolerance) + 1
    if extent.height_pt > room and body.autofit == "shrink" and not body.scale_given:
        # "Shrink text on overflow" with no stored scale: LibreOffice shrinks it when it renders, PowerPoint
        # when the text is next edited; only a shrink below the allowed minimum is a fault.
        least = settings.autofit_min_scale
        shrunk = measure(shape.paras, table, width, wrap=body.wrap, scale=least, line_reduction=0.2)
        if shrunk.height_pt <= room:
            out.add("shrunk", here, f"the text fits its box only shrunk below {size:g} pt (autofit); PowerPoint "
                    "shows it overflowing until it is edited; shorten it or enlarge the box")
            return extent
    if extent.height_pt > room:
        lines = f"{extent.lines} line{'s' if extent.lines != 1 else ''}"
        fits = size * min(1.0, math.sqrt(max(height, 1) / extent.height_pt))
        out.add("overflow", here, f"the text does not fit its box at {size:g} pt: {lines} need "
                f"{extent.height_pt / 72:.2f} in, the box is {max(height, 0) / 72:.2f} in high; shorten the text, "
                f"enlarge the box or use at most {max(1, math.floor(fits))} pt")
    return extent


def _check_long_line(deck: Deck, covered: Box, here: str, settings: LayoutSettings, out: Collector) -> None:
    """Unwrapped text (``wrap="none"``) is drawn past its box's sides; a fault only when it leaves the slide."""
    slack = deck.width * settings.edge_tolerance
    past = max(-covered[0], covered[2] - deck.width)
    if past > slack:
        out.add("overflow", here, f"its unwrapped line runs {_inches(past)} past the slide's edge; let the text "
                "wrap (word wrap on) or shorten it")


def _occupied(shape: Shape, extent: Extent) -> Box:
    """The part of the box the text covers: its lines' height placed by the anchor, its widest line by alignment."""
    left, top, right, bottom = _box(shape)
    ins_l, ins_t, ins_r, ins_b = shape.body.insets
    inner_l, inner_t, inner_r, inner_b = left + ins_l, top + ins_t, right - ins_r, bottom - ins_b
    height, width = extent.height_pt * EMU_PER_PT, extent.width_pt * EMU_PER_PT
    if shape.body.wrap:
        width = min(width, max(0.0, inner_r - inner_l))
    anchor = shape.body.anchor
    if anchor == "ctr":
        middle = (inner_t + inner_b) / 2
        y0, y1 = middle - height / 2, middle + height / 2
    elif anchor == "b":
        y0, y1 = inner_b - height, inner_b
    else:
        y0, y1 = inner_t, inner_t + height
    aligns = {p.align for p in shape.paras if p.text.strip()}
    if aligns <= {"l", "just", "dist"}:
        x0, x1 = inner_l, inner_l + width
    elif aligns == {"r"}:
        x0, x1 = inner_r - width, inner_r
    elif aligns == {"ctr"}:
        middle = (inner_l + inner_r) / 2
        x0, x1 = middle - width / 2, middle + width / 2
    else:
        x0, x1 = inner_l, inner_r
    return x0, y0, x1, y1


def _intersection(a: Box, b: Box) -> float:
    width, height = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
    return width * height if width > 0 and height > 0 else 0.0


def _area(box: Box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def _check_overlaps(slide: Slide, occupied: list[tuple[Shape, Box]], settings: LayoutSettings,
                    out: Collector) -> None:
    where = f"slide {slide.number}"
    for (a, box_a), (b, box_b) in combinations(occupied[:MAX_OVERLAP_SHAPES], 2):
        shared = _intersection(box_a, box_b)
        if shared > 0 and shared >= settings.overlap_min_share * min(_area(box_a), _area(box_b)):
            out.add("overlap", f"{where}, {a.label}", f"its text overlaps the text of {b.label}; move one of them "
                    "or make them smaller")
            continue
        frames = _intersection(_box(a), _box(b))  # boxes stacked on each other: text collides as soon as it grows
        if frames > 0 and frames >= BOX_OVERLAP_SHARE * min(_area(_box(a)), _area(_box(b))):
            out.add("overlap", f"{where}, {a.label}", f"its box lies over the box of {b.label} ("
                    f"{frames / min(_area(_box(a)), _area(_box(b))):.0%} of the smaller one); move one of them")
    pictures = [s for s in slide.shapes if s.kind in ("picture", "graphic") and not s.has_text]
    for shape, box in occupied[:MAX_OVERLAP_SHAPES]:
        for picture in pictures[:MAX_OVERLAP_SHAPES]:
            shared = _intersection(box, _box(picture))
            if shared > 0 and shared >= settings.overlap_min_share * min(_area(box), _area(_box(picture))):
                out.add("picture_overlap", f"{where}, {shape.label}", f"its text lies over {picture.label}; move "
                        "the text beside the picture")


def _check_confined(deck: Deck, slide: Slide, settings: LayoutSettings, out: Collector) -> None:
    if deck.width < 1.5 * deck.height:
        return
    boxes = [_box(s) for s in slide.shapes if _has_content(s)]
    if not boxes:
        return
    left = max(0.0, min(b[0] for b in boxes))
    right = min(float(deck.width), max(b[2] for b in boxes))
    share = (right - left) / deck.width
    if share < settings.min_content_width:
        out.add("confined", f"slide {slide.number}", f"the content spans only {_inches(left)} to {_inches(right)} "
                f"of the {_inches(deck.width)} wide slide ({share:.0%}); lay it out across the slide (e.g. title "
                f"and body from 0.5 in to {_inches(deck.width - EMU_PER_IN / 2)})")


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return re.sub(r"\s+", " ", text).strip(" .,;:-–—•")


def _check_duplicates(slide: Slide, out: Collector) -> None:
    seen: dict[str, Shape] = {}
    for shape in slide.shapes:
        if shape.kind == "graphic":
            continue  # a table repeats values by nature
        paras = [(p.text, _norm(p.text)) for p in shape.paras if _norm(p.text)]
        here = f"slide {slide.number}, {shape.label}"
        for i, (text, key) in enumerate(paras):
            for j, (_, other) in enumerate(paras):
                if i == j or len(key) > len(other) or (len(key) == len(other) and i < j):
                    continue
                contained = len(key) >= MIN_CONTAINED_CHARS and re.search(rf"(?<!\w){re.escape(key)}(?!\w)", other)
                if key == other or contained:
                    out.add("duplicate_text", here, f"the line '{text[:80]}' repeats text of the same box; say it once")
                    break
        for text, key in paras:
            if len(key) < MIN_SHARED_CHARS or not any(ch.isalpha() for ch in key):
                continue  # "12 %" or "Q3" on two shapes is a design, not a repeat
            first = seen.get(key)
            if first is not None and first is not shape:
                out.add("duplicate_text", here, f"the line '{text[:80]}' repeats {first.label}; say it once")
            seen.setdefault(key, shape)


def _check_fonts(shape: Shape, here: str, table: FontTable, brand: Brand | None, out: Collector) -> None:
    scale = shape.body.font_scale if shape.body.autofit == "shrink" else 1.0
    for para in shape.paras:
        for run in para.runs:
            if not run.text.strip():
                continue
            families = [run.font] if run.font else []
            if run.ea_font and any(unicodedata.east_asian_width(ch) in ("W", "F") for ch in run.text):
                families.append(run.ea_font)
            for family in families:
                if brand is not None and family == run.font and not brand.allows_font(family):
                    out.add("brand_font", here, f"uses the font '{family}', not one of the brand's fonts "
                            f"({brand.font_list})")
                if not table.has(family):
                    alias = table.alias(family)
                    if alias:
                        out.add("font_substituted", here, f"the font '{family}' is not in the sandbox image; it "
                                f"renders with the metric-compatible '{alias}'")
                    else:
                        out.add("font_missing", here, f"the font '{family}' is not in the sandbox image, so renders "
                                "substitute another face; use a font the image has (python -m orchestrator sandbox "
                                "fonts)")
            if brand is not None and run.color and not brand.allows_color(run.color):
                out.add("brand_color", here, f"text colour #{run.color} is not one of the brand's colours "
                        f"({brand.color_list})")
            if brand is not None and brand.min_pt and run.size_pt * scale < brand.min_pt:
                out.add("small_text", here, f"text at {run.size_pt * scale:g} pt is below the brand's minimum of "
                        f"{brand.min_pt:g} pt")
