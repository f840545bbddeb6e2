"""A .pptx read as the layout check needs it: slide size, and per slide its shapes with absolute boxes and the text
properties PowerPoint would use — each resolved through the shape, its layout and master placeholders, the
master's text styles and the theme (python-pptx reads only what a shape states itself).

Everything is read from the package's XML with the bounded reader of ``package.py``; sizes and counts are capped
(``MAX_SLIDES``, ``MAX_SHAPES``, ``MAX_GROUP_DEPTH``) and what is cut is recorded in ``Deck.cut``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from lxml import etree
from lxml.etree import _Element as Element

from orchestrator.validate.layout.package import R_EMBED, R_ID, Package, emu, q

MAX_SLIDES = 500
MAX_SHAPES = 1000
MAX_GROUP_DEPTH = 16
MAX_CHARS = 100_000
EMU_PER_PT = 12_700
DEFAULT_INSETS = (91_440, 45_720, 91_440, 45_720)
_TITLE_TYPES = frozenset({"title", "ctrTitle"})
_OTHER_TYPES = frozenset({"dt", "ftr", "sldNum", "hdr"})
_PRESET = {"black": "000000", "white": "FFFFFF", "red": "FF0000", "green": "008000", "blue": "0000FF"}



@dataclass
class Run:
    text: str
    size_pt: float
    bold: bool
    font: str
    ea_font: str
    color: str | None


@dataclass
class Para:
    runs: list[Run]
    level: int = 0
    margin_pt: float = 0.0
    align: str = "l"
    line_pct: float | None = 1.0
    line_pt: float | None = None
    before_pt: float = 0.0
    after_pt: float = 0.0
    empty_size_pt: float = 18.0

    @property
    def text(self) -> str:
        return "".join(r.text for r in self.runs)


@dataclass
class Body:
    insets: tuple[int, int, int, int] = DEFAULT_INSETS
    anchor: str = "t"
    wrap: bool = True
    autofit: str = "none"
    font_scale: float = 1.0
    scale_given: bool = False
    """The file stores the shrink PowerPoint computed (``fontScale``); without it the renderer shrinks the text."""
    line_reduction: float = 0.0
    vertical: bool = False


@dataclass
class Shape:
    id: str
    name: str
    kind: str  # text | picture | graphic | shape
    box: tuple[int, int, int, int]  # x, y, width, height in EMU, on the slide
    rotation: float = 0.0
    placeholder: str | None = None
    paras: list[Para] = field(default_factory=list)
    body: Body = field(default_factory=Body)
    colors: list[str] = field(default_factory=list)
    filled_placeholder: bool = True

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.paras)

    @property
    def has_text(self) -> bool:
        return any(p.text.strip() for p in self.paras)

    @property
    def label(self) -> str:
        return f"shape '{self.name}' (id {self.id})"


@dataclass
class Slide:
    number: int
    shapes: list[Shape]
    background: str | None = None


@dataclass
class Deck:
    width: int
    height: int
    slides: list[Slide]
    cut: list[str] = field(default_factory=list)


class _Theme:
    def __init__(self, root: Element | None) -> None:
        self.colors: dict[str, str] = {}
        self.fonts: dict[str, str] = {}
        if root is None:
            return
        scheme = root.find(f".//{q('a', 'clrScheme')}")
        for child in scheme if scheme is not None else []:
            value = _plain_color(child)
            if value:
                self.colors[etree.QName(child).localname] = value
        for kind, key in (("majorFont", "mj"), ("minorFont", "mn")):
            fonts = root.find(f".//{q('a', kind)}")
            if fonts is None:
                continue
            for script in ("latin", "ea"):
                element = fonts.find(q("a", script))
                self.fonts[f"+{key}-{'lt' if script == 'latin' else 'ea'}"] = (
                    (element.get("typeface") or "") if element is not None else ""
                )


def _present(*candidates: Element | None) -> Element | None:
    return next((c for c in candidates if c is not None), None)


def _plain_color(element: Element) -> str | None:
    srgb = element.find(q("a", "srgbClr"))
    if srgb is not None:
        return (srgb.get("val") or "").upper() or None
    sys_color = element.find(q("a", "sysClr"))
    if sys_color is not None:
        return (sys_color.get("lastClr") or "").upper() or None
    return None


class _Master:
    """A slide master or layout: its placeholders by idx and type, its colour map and (masters) text styles."""

    def __init__(self, root: Element) -> None:
        self.root = root
        self.by_idx: dict[str, Element] = {}
        self.by_type: dict[str, Element] = {}
        tree = root.find(f"{q('p', 'cSld')}/{q('p', 'spTree')}")
        for shape in tree.iter(q("p", "sp")) if tree is not None else []:
            ph = shape.find(f"{q('p', 'nvSpPr')}/{q('p', 'nvPr')}/{q('p', 'ph')}")
            if ph is None:
                continue
            kind = ph.get("type") or "obj"
            self.by_type.setdefault(kind, shape)
            if ph.get("idx") is not None:
                self.by_idx.setdefault(ph.get("idx") or "", shape)
        self.clr_map = dict(root.find(q("p", "clrMap")).attrib) if root.find(q("p", "clrMap")) is not None else {}
        styles = root.find(q("p", "txStyles"))
        self.styles = {
            name: styles.find(q("p", name)) if styles is not None else None
            for name in ("titleStyle", "bodyStyle", "otherStyle")
        }

    def match(self, kind: str, idx: str | None) -> Element | None:
        if idx is not None and idx in self.by_idx and kind not in _TITLE_TYPES:
            return self.by_idx[idx]
        if kind in _TITLE_TYPES:
            return _present(self.by_type.get(kind), self.by_type.get("title"), self.by_type.get("ctrTitle"))
        return _present(self.by_type.get(kind), self.by_idx.get(idx) if idx is not None else None)

    def master_match(self, kind: str) -> Element | None:
        if kind in _TITLE_TYPES:
            return self.by_type.get("title")
        if kind in _OTHER_TYPES:
            return self.by_type.get(kind)
        return self.by_type.get("body")


@dataclass
class _Context:
    theme: _Theme
    master: _Master
    layout: _Master
    clr_map: dict[str, str]
    default_style: Element | None

    def color(self, fill: Element | None) -> str | None:
        """The RGB hex of a ``solidFill`` (or a colour element's parent), modifiers ignored."""
        if fill is None:
            return None
        for child in fill:
            name = etree.QName(child).localname
            if name == "srgbClr":
                return (child.get("val") or "").upper() or None
            if name == "sysClr":
                return (child.get("lastClr") or "").upper() or None
            if name == "prstClr":
                return _PRESET.get(child.get("val") or "")
            if name == "schemeClr":
                value = child.get("val") or ""
                return self.theme.colors.get(self.clr_map.get(value, value))
        return None

    def font(self, typeface: str | None) -> str | None:
        if typeface is None:
            return None
        return self.theme.fonts.get(typeface, typeface) if typeface.startswith("+") else typeface


def read_deck(package: Package) -> Deck:
    main = package.main_part("ppt/presentation.xml")
    root = package.xml(main)
    size = root.find(q("p", "sldSz"))
    deck = Deck(width=emu(size.get("cx") if size is not None else None, 9_144_000),
                height=emu(size.get("cy") if size is not None else None, 6_858_000), slides=[])
    rels = package.rels(main)
    ids = root.find(q("p", "sldIdLst"))
    slide_ids = list(ids) if ids is not None else []
    if len(slide_ids) > MAX_SLIDES:
        deck.cut.append(f"only the first {MAX_SLIDES} of {len(slide_ids)} slides were checked")
    default_style = root.find(q("p", "defaultTextStyle"))
    masters: dict[str, tuple[_Master, _Theme]] = {}
    for number, slide_id in enumerate(slide_ids[:MAX_SLIDES], start=1):
        part = rels.get(slide_id.get(R_ID) or "", ("", ""))[1]
        if not part:
            continue
        deck.slides.append(_read_slide(package, part, number, default_style, masters, deck))
    return deck


def _read_slide(
    package: Package, part: str, number: int, default_style: Element | None,
    masters: dict[str, tuple[_Master, _Theme]], deck: Deck,
) -> Slide:
    root = package.xml(part)
    layout_part = package.related(part, "slideLayout") or ""
    layout = _Master(package.xml(layout_part)) if layout_part else _Master(etree.Element("empty"))
    master_part = package.related(layout_part, "slideMaster") if layout_part else None
    if master_part and master_part not in masters:
        theme_part = package.related(master_part, "theme")
        theme = _Theme(package.xml(theme_part) if theme_part else None)
        masters[master_part] = (_Master(package.xml(master_part)), theme)
    master, theme = masters.get(master_part or "", (_Master(etree.Element("empty")), _Theme(None)))
    clr_map = dict(master.clr_map)
    for source in (layout.root, root):
        override = source.find(f"{q('p', 'clrMapOvr')}/{q('a', 'overrideClrMapping')}")
        if override is not None:
            clr_map = dict(override.attrib)
    ctx = _Context(theme, master, layout, clr_map, default_style)
    tree = root.find(f"{q('p', 'cSld')}/{q('p', 'spTree')}")
    shapes: list[Shape] = []
    if tree is not None:
        identity: Callable[[int, int, int, int], tuple[int, int, int, int]] = lambda x, y, w, h: (x, y, w, h)  # noqa: E731
        for shape in _walk(tree, identity, ctx, 0):
            if len(shapes) >= MAX_SHAPES:
                deck.cut.append(f"slide {number}: only the first {MAX_SHAPES} shapes were checked")
                break
            shapes.append(shape)
    return Slide(number=number, shapes=shapes, background=_background(ctx, root))


def _background(ctx: _Context, slide: Element) -> str | None:
    for source in (slide, ctx.layout.root, ctx.master.root):
        bg = source.find(f"{q('p', 'cSld')}/{q('p', 'bg')}")
        if bg is None:
            continue
        props = bg.find(q("p", "bgPr"))
        if props is not None:
            return ctx.color(props.find(q("a", "solidFill")))
        ref = bg.find(q("p", "bgRef"))
        return ctx.color(ref) if ref is not None else None
    return None


Transform = Callable[[int, int, int, int], tuple[int, int, int, int]]


def _walk(tree: Element, transform: Transform, ctx: _Context, depth: int) -> Iterator[Shape]:
    for child in tree:
        name = etree.QName(child).localname
        if name == "grpSp" and depth < MAX_GROUP_DEPTH:
            yield from _walk(child, _group_transform(child, transform), ctx, depth + 1)
        elif name in ("sp", "pic", "graphicFrame", "cxnSp"):
            yield _shape(child, name, transform, ctx)


def _group_transform(group: Element, outer: Transform) -> Transform:
    xfrm = group.find(f"{q('p', 'grpSpPr')}/{q('a', 'xfrm')}")
    if xfrm is None:
        return outer
    off, ext = _pair(xfrm, "off", "x", "y"), _pair(xfrm, "ext", "cx", "cy")
    ch_off, ch_ext = _pair(xfrm, "chOff", "x", "y"), _pair(xfrm, "chExt", "cx", "cy")
    sx = ext[0] / ch_ext[0] if ch_ext[0] else 1.0
    sy = ext[1] / ch_ext[1] if ch_ext[1] else 1.0

    def inner(x: int, y: int, w: int, h: int) -> tuple[int, int, int, int]:
        return outer(int(off[0] + (x - ch_off[0]) * sx), int(off[1] + (y - ch_off[1]) * sy), int(w * sx), int(h * sy))

    return inner


def _pair(xfrm: Element, tag: str, a: str, b: str) -> tuple[int, int]:
    element = xfrm.find(q("a", tag))
    return (emu(element.get(a)), emu(element.get(b))) if element is not None else (0, 0)


def _shape(element: Element, tag: str, transform: Transform, ctx: _Context) -> Shape:
    nv = element.find(f"{q('p', f'nv{tag[0].upper()}{tag[1:]}Pr')}") if tag != "graphicFrame" else element.find(
        q("p", "nvGraphicFramePr"))
    c_nv = nv.find(q("p", "cNvPr")) if nv is not None else None
    ph = nv.find(f"{q('p', 'nvPr')}/{q('p', 'ph')}") if nv is not None else None
    kind_ph = (ph.get("type") or "obj") if ph is not None else None
    layout_ph = ctx.layout.match(kind_ph, ph.get("idx")) if ph is not None and kind_ph else None
    master_ph = ctx.master.master_match(kind_ph) if kind_ph else None
    sources = [element, layout_ph, master_ph]
    xfrm = _first_xfrm(sources, tag)
    box = (0, 0, 0, 0)
    rotation = 0.0
    if xfrm is not None:
        off, ext = _pair(xfrm, "off", "x", "y"), _pair(xfrm, "ext", "cx", "cy")
        box = transform(off[0], off[1], ext[0], ext[1])
        rotation = emu(xfrm.get("rot")) / 60_000
    shape = Shape(
        id=(c_nv.get("id") or "?") if c_nv is not None else "?",
        name=((c_nv.get("name") or "") if c_nv is not None else "")[:80],
        kind={"pic": "picture", "graphicFrame": "graphic", "cxnSp": "shape"}.get(tag, "shape"),
        box=box, rotation=rotation, placeholder=kind_ph,
    )
    if tag == "pic":
        shape.filled_placeholder = element.find(f".//{q('a', 'blip')}[@{R_EMBED}]") is not None
    if tag == "graphicFrame":
        shape.filled_placeholder = True
        shape.paras = [para for cell in element.iter(q("a", "tc")) for para in _paras(cell, [], ctx)]
    sp_pr = element.find(q("p", "spPr"))
    if sp_pr is not None:
        shape.colors = [c for c in (ctx.color(f) for f in sp_pr.iter(q("a", "solidFill"))) if c]
    body = element.find(q("p", "txBody"))
    if tag == "sp" and (body is not None or ph is not None):
        styles = _style_chain(element, layout_ph, master_ph, kind_ph, ctx)
        shape.paras = _paras(body, styles, ctx) if body is not None else []
        shape.body = _body([s.find(f"{q('p', 'txBody')}/{q('a', 'bodyPr')}") if s is not None else None
                            for s in sources])
        if shape.has_text or ph is not None:
            shape.kind = "text"
    if ph is not None and tag == "sp" and kind_ph == "pic":
        shape.filled_placeholder = element.find(f".//{q('a', 'blip')}") is not None
    return shape


def _first_xfrm(sources: list[Element | None], tag: str) -> Element | None:
    for source in sources:
        if source is None:
            continue
        own_frame = tag == "graphicFrame" and source is sources[0]
        path = q("p", "xfrm") if own_frame else f"{q('p', 'spPr')}/{q('a', 'xfrm')}"
        found = source.find(path)
        if found is not None:
            return found
    return None


def _style_chain(
    element: Element, layout_ph: Element | None, master_ph: Element | None, kind: str | None, ctx: _Context
) -> list[Element]:
    path = f"{q('p', 'txBody')}/{q('a', 'lstStyle')}"
    chain = [s.find(path) for s in (element, layout_ph, master_ph) if s is not None]
    if kind is None:
        chain.append(ctx.default_style)
    else:
        style = "titleStyle" if kind in _TITLE_TYPES else "otherStyle" if kind in _OTHER_TYPES else "bodyStyle"
        chain.append(ctx.master.styles.get(style))
    return [c for c in chain if c is not None]


def _body(sources: list[Element | None]) -> Body:
    found = [s for s in sources if s is not None]

    def attr(name: str) -> str | None:
        return next((s.get(name) for s in found if s.get(name) is not None), None)

    insets = tuple(emu(attr(n), d) for n, d in zip(("lIns", "tIns", "rIns", "bIns"), DEFAULT_INSETS, strict=True))
    body = Body(insets=insets, anchor=attr("anchor") or "t", wrap=attr("wrap") != "none",  # type: ignore[arg-type]
                vertical=(attr("vert") or "horz") not in ("horz", ""))
    for source in found:
        for tag, name in (("normAutofit", "shrink"), ("spAutoFit", "grow"), ("noAutofit", "none")):
            element = source.find(q("a", tag))
            if element is not None:
                body.autofit = name
                if tag == "normAutofit":
                    body.font_scale = min(1.0, max(0.01, emu(element.get("fontScale"), 100_000) / 100_000))
                    body.scale_given = element.get("fontScale") is not None
                    body.line_reduction = min(0.9, max(0.0, emu(element.get("lnSpcReduction"), 0) / 100_000))
                return body
    return body


def _paras(body: Element, styles: list[Element], ctx: _Context) -> list[Para]:
    paras: list[Para] = []
    budget = MAX_CHARS
    for p in body.iter(q("a", "p")):
        ppr = p.find(q("a", "pPr"))
        level = min(8, max(0, emu(ppr.get("lvl") if ppr is not None else None)))
        levels = [s.find(q("a", f"lvl{level + 1}pPr")) for s in styles]
        psources = [e for e in [ppr, *levels] if e is not None]
        rdefaults = [d for d in (e.find(q("a", "defRPr")) for e in psources) if d is not None]
        para = Para(runs=[], level=level)
        para.margin_pt = emu(_attr(psources, "marL"), 0) / EMU_PER_PT
        para.align = _attr(psources, "algn") or "l"
        para.line_pct, para.line_pt = _spacing(psources, "lnSpc", (1.0, None))
        para.before_pt = _space_pt(psources, "spcBef")
        para.after_pt = _space_pt(psources, "spcAft")
        end = p.find(q("a", "endParaRPr"))
        para.empty_size_pt = emu(_attr([e for e in [end, *rdefaults] if e is not None], "sz"), 1800) / 100
        for run in p:
            local = etree.QName(run).localname
            if local not in ("r", "fld", "br") or budget <= 0:
                continue
            text = "\n" if local == "br" else "".join(run.findtext(q("a", "t")) or "")[:budget]
            budget -= len(text)
            rpr = run.find(q("a", "rPr"))
            rsources = [e for e in [rpr, *rdefaults] if e is not None]
            para.runs.append(Run(
                text=text,
                size_pt=emu(_attr(rsources, "sz"), 1800) / 100,
                bold=(_attr(rsources, "b") or "0") in ("1", "true"),
                font=ctx.font(_child_attr(rsources, "latin", "typeface")) or "",
                ea_font=ctx.font(_child_attr(rsources, "ea", "typeface")) or "",
                color=next((ctx.color(f) for f in (s.find(q("a", "solidFill")) for s in rsources) if f is not None),
                           None),
            ))
        paras.append(para)
    return paras


def _attr(sources: list[Element], name: str) -> str | None:
    return next((s.get(name) for s in sources if s.get(name) is not None), None)


def _child_attr(sources: list[Element], child: str, name: str) -> str | None:
    for source in sources:
        element = source.find(q("a", child))
        value = element.get(name) if element is not None else None
        if value is not None:
            return str(value)
    return None


Spacing = tuple[float | None, float | None]


def _spacing(sources: list[Element], tag: str, default: Spacing) -> Spacing:
    for source in sources:
        element = source.find(q("a", tag))
        if element is None:
            continue
        pct, pts = element.find(q("a", "spcPct")), element.find(q("a", "spcPts"))
        if pct is not None:
            return min(10.0, max(0.0, emu(pct.get("val"), 100_000) / 100_000)), None
        if pts is not None:
            return None, min(2000.0, max(0.0, emu(pts.get("val"), 0) / 100))
    return default


def _space_pt(sources: list[Element], tag: str) -> float:
    """Space before/after a paragraph in points (a percentage counts of an 18 pt line; refined by the caller)."""
    pct, pts = _spacing(sources, tag, (None, 0.0))
    if pts is not None:
        return pts
    return -(pct or 0.0)  # negative: a share of the paragraph's font size, resolved when the size is known
