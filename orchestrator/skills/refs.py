"""L3 reference resolution: what a skill's documents point at, in the order links -> paths -> globs.

1. **Links**: relative Markdown links and images, inline or reference-style, plus ``href``/``src`` of inline
   HTML, found with markdown-it-py. URLs with a scheme, ``//host`` and pure ``#anchors`` are skipped;
   ``?query`` and ``#fragment`` are dropped; the rest is percent-decoded and resolved against the document's
   folder.
2. **Paths**: path-like tokens in code spans, fenced code and prose, resolved against the skill folder (then
   the document's folder). A token is a reference when it is *explicit* (``./x``, ``../x.md``, or
   ``dir/file.ext`` with a known extension) or when it names something that exists (``editing.md``,
   ``scripts/``). Bare words, ``e.g.``, ``and/or``, URLs, domains, ``@scope/pkg`` and templated names
   (``slide{N}.xml``) never are. Absolute paths in text (``/tmp/out.png``, ``/path/to/file``,
   ``~/.config/x``) name places on the machine that runs the skill, not files of the skill: they are not
   references (an absolute *link* is still refused and reported).
3. **Globs**: tokens with ``*`` (``templates/*.html``, ``**/*.md``, ``*.txt``) expanded inside the skill
   folder. A glob with a folder part that matches nothing is reported (``glob_no_match``); a bare ``*.ext``
   that matches nothing is ignored, since it is almost always a shell pattern about the user's files.

In code (code spans and fenced blocks) a path or glob whose first folder the skill does not have is an example
of the user's project or of a document's inside (``src/index.ts``, ``ppt/presentation.xml``, ``"./dist"``): it
counts only if it exists. Under a folder the skill has (``scripts/missing.py``) a missing file is reported.

A reference whose letter case differs from the file on disk (``FORMS.md`` for ``forms.md``) resolves to that
file, with a ``reference_case`` warning.

Paths into the runtime's own areas (``work_dirs``, e.g. ``build/`` for outputs and ``inputs/`` or ``/inputs/``
for a goal's inputs) are what a run writes or receives, not files of the skill: unless the skill ships such a
file, they are not references.

References are deduplicated by resolved path (the first one wins). Markdown documents that exist are followed
breadth-first (bounded depth and count) so their references are reported too, with ``source`` set to them;
cycles between documents are reported once as ``reference_cycle``. Folders of nested skills are not part of
the outer skill: globs skip them and their documents are not followed (a direct reference is still reported).
"""

from __future__ import annotations

import functools
import posixpath
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote

from markdown_it import MarkdownIt
from markdown_it.token import Token

from orchestrator.skills.confine import Located, Verdict, locate, normalize_rel
from orchestrator.skills.parsed import Problem, Reference, Severity, Via

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx"})
_EXTENSIONS = """
md markdown mdx txt rst adoc tex py pyi sh bash zsh ps1 bat js mjs cjs ts tsx jsx json jsonl ndjson
yaml yml toml ini cfg conf env csv tsv xml xsd xsl xslt dtd html htm xhtml css scss less svg png jpg
jpeg gif webp ico bmp tif tiff pdf docx xlsx xlsm pptx doc xls ppt odt ods odp rtf ttf otf woff woff2
j2 jinja jinja2 tmpl tpl template mustache hbs sql rb go rs java kt c h cc cpp hpp cs php pl r lua
swift dart vue svelte proto graphql gql ipynb zip tar gz tgz wasm lock log mp3 mp4 wav ogg webm mov
npy parquet dot mmd puml
"""
KNOWN_EXTENSIONS = frozenset(_EXTENSIONS.split())
# The look-behind makes a URL start only where a word starts, and the scheme is bounded: without both, a long word
# is rescanned from every position (quadratic time on one 200 KB word).
_URL = re.compile(r"(?<![A-Za-z0-9+.\-])(?:[A-Za-z][A-Za-z0-9+.\-]{0,31}://|mailto:|www\.)\S*")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
# whitespace, quotes, brackets and separators, ASCII and full-width/CJK
_SPLIT = re.compile(r"[\s\"'`()\[\]<>,;|=、。，；：（）「」『』【】《》！？“”‘’]+")
_LINE_SUFFIX = re.compile(r":\d+(?::\d+)?$")
_TOKEN_OK = re.compile(r"^[\w.\-/+~@*]+$")
_DOMAIN = re.compile(r"^[\w\-]+(?:\.[\w\-]+)*\.([A-Za-z]{2,6})$")
_MAX_GLOB_MATCHES = 200
_MAX_DOC_CHARS = 1_000_000


@dataclass(frozen=True)
class _Candidate:
    text: str  # as written
    line: int | None  # 1-based line in the document
    strong: bool = True  # reported even when missing
    in_code: bool = False  # from a code span or a fenced/indented code block


@dataclass
class _Extracted:
    links: list[_Candidate] = field(default_factory=list)
    paths: list[_Candidate] = field(default_factory=list)
    globs: list[_Candidate] = field(default_factory=list)


@functools.cache
def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


class _HtmlRefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("href", "src") and value:
                self.found.append(value)


def _html_refs(html: str) -> list[str]:
    parser = _HtmlRefs()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # noqa: BLE001 - malformed HTML just yields no references
        pass
    return parser.found


def extract(text: str, line_offset: int = 0) -> _Extracted:
    """Reference candidates of one Markdown document, each kind in document order."""
    out = _Extracted()
    env: dict[str, Any] = {}
    md = _markdown()
    tokens = md.parse(text, env)
    prose: list[tuple[str, int | None, bool]] = []  # code and prose text with its line and whether it is code

    def line_of(token: Token) -> int | None:
        return token.map[0] + 1 + line_offset if token.map else None

    for token in tokens:
        line = line_of(token)
        if token.type in ("fence", "code_block"):
            first = (line or 0) + (1 if token.type == "fence" else 0)
            for i, code_line in enumerate(token.content.split("\n")):
                prose.append((code_line, first + i if line else None, True))
        elif token.type == "html_block":
            out.links.extend(_Candidate(h, line) for h in _html_refs(token.content))
        elif token.type == "inline":
            for child in token.children or []:
                if child.type in ("softbreak", "hardbreak") and line is not None:
                    line += 1
                elif child.type == "link_open":
                    out.links.append(_Candidate(str(child.attrs.get("href", "")), line))
                elif child.type == "image":
                    out.links.append(_Candidate(str(child.attrs.get("src", "")), line))
                elif child.type == "html_inline":
                    out.links.extend(_Candidate(h, line) for h in _html_refs(child.content))
                elif child.type == "code_inline" or child.type == "text":
                    prose.append((child.content, line, child.type == "code_inline"))
    seen_links = {c.text for c in out.links}
    for definition in env.get("references", {}).values():
        href = str(definition.get("href", ""))
        if href and href not in seen_links:
            seen_links.add(href)
            out.links.append(_Candidate(href, None))
    for chunk, line, in_code in prose:
        for word in _path_tokens(chunk):
            kind = _classify_token(word)
            if kind == "glob":
                out.globs.append(_Candidate(word, line, in_code=in_code))
            elif kind is not None:
                out.paths.append(_Candidate(word, line, strong=kind == "strong", in_code=in_code))
    return out


def _path_tokens(chunk: str) -> Iterable[str]:
    for raw in _SPLIT.split(_URL.sub(" ", chunk)):
        token = _LINE_SUFFIX.sub("", raw.rstrip(".,:;!?"))
        if 2 <= len(token) <= 255 and ("/" in token or "." in token):
            yield token


def _has_known_extension(name: str) -> bool:
    suffix = PurePosixPath(name).suffix
    return len(suffix) > 1 and suffix[1:].lower() in KNOWN_EXTENSIONS


def _classify_token(token: str) -> str | None:
    """'strong' / 'weak' path, 'glob', or None when the token is not a file reference."""
    if not _TOKEN_OK.match(token) or token.startswith(("@", "/", "~")) or "//" in token:
        return None  # absolute paths in text name the host's files, never the skill's
    segments = [s for s in token.split("/") if s]
    if not segments or all(s in (".", "..") for s in segments):
        return None
    last = segments[-1]
    if "*" in token:
        wanted = "/" in token.strip("/") or _has_known_extension(last.replace("*", "x"))
        return "glob" if wanted else None
    if len(segments) > 1 and _looks_like_domain(segments[0]):
        return None
    if token.startswith("./") or (token.startswith("../") and _has_known_extension(last)):
        return "strong"
    if len(segments) > 1 and _has_known_extension(last) and not token.endswith("/"):
        return "strong"
    return "weak"


def _looks_like_domain(segment: str) -> bool:
    match = _DOMAIN.match(segment)
    if match is None or segment.startswith("."):
        return False
    return match.group(1).lower() not in KNOWN_EXTENSIONS


def _link_target(href: str) -> str | None:
    """The percent-decoded path part of a link; None for URLs, anchors and empty links."""
    href = href.strip()
    decoded = unquote(href)
    if not href or href.startswith("#") or href.startswith("//"):
        return None
    if _SCHEME.match(decoded) and not re.match(r"^[A-Za-z]:[\\/]", decoded):
        return None
    path = href.split("#", 1)[0].split("?", 1)[0]  # split before decoding: %23 and %3F are part of the name
    return unquote(path) or None


def glob_match(pattern: str, path: str) -> bool:
    """POSIX glob match: ``*``/``?``/``[..]`` within a segment, ``**`` across segments; no hidden files."""
    return _match(pattern.strip("/").split("/"), path.split("/"))


def _match(pattern: list[str], parts: list[str]) -> bool:
    if not pattern:
        return not parts
    head = pattern[0]
    if head == "**":
        for i in range(len(parts) + 1):
            if i and parts[i - 1].startswith("."):
                break
            if _match(pattern[1:], parts[i:]):
                return True
        return False
    if not parts or (parts[0].startswith(".") and not head.startswith(".")):
        return False
    return fnmatchcase(parts[0], head) and _match(pattern[1:], parts[1:])


@dataclass
class _Context:
    root: Path
    read_doc: Callable[[str], str]
    files: Callable[[], list[str]]
    nested: frozenset[str]
    work_dirs: frozenset[str] = frozenset()
    references: list[Reference] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    canonical: dict[str, str] = field(default_factory=dict)  # resolved path -> first relative path seen
    folders: dict[tuple[str, str], bool] = field(default_factory=dict)  # (first folder, base) -> the skill has it
    located: dict[tuple[str, str], Located] = field(default_factory=dict)

    def locate(self, path: str, base: str = ".") -> Located:
        """:func:`locate` under the root, remembered for this resolution (a body repeats the same tokens)."""
        key = (path, base)
        if key not in self.located:
            self.located[key] = locate(self.root, path, base)
        return self.located[key]

    def problem(
        self, code: str, message: str, severity: Severity, source: str, line: int | None, **extra: Any
    ) -> None:
        self.problems.append(Problem(code=code, message=message, severity=severity, path=source, line=line, **extra))

    def add(self, ref: Reference, key: str) -> bool:
        if key in self.keys:
            return False
        self.keys.add(key)
        self.references.append(ref)
        return True

    def in_work_dir(self, text: str) -> bool:
        """Whether ``text`` points into a runtime area (``build/x``, ``./inputs/y``, ``/inputs/z``)."""
        first = next((part for part in text.split("/") if part not in ("", ".")), "")
        return first in self.work_dirs and (text.startswith(("/", "./")) or text.startswith(first + "/"))

    def in_nested(self, rel: str) -> bool:
        rel = unicodedata.normalize("NFC", rel)
        return any(rel == n or rel.startswith(n + "/") for n in self.nested)


def _refuse(ctx: _Context, cand: _Candidate, located: Located, via: Via, source: str) -> None:
    refused = Reference(ref=cand.text, path=None, exists=False, via=via, source=source)
    if not ctx.add(refused, f"x:{source}:{cand.text}"):
        return
    if located.verdict is Verdict.SYMLINK_ESCAPE:
        ctx.problem(
            "symlink_escape",
            f"{cand.text!r} is refused: a symlink leads outside the skill folder",
            "error",
            source,
            cand.line,
        )
    elif located.verdict is Verdict.ESCAPE:
        ctx.problem(
            "reference_escape", f"{cand.text!r} is refused: {located.reason}", "warning", source, cand.line
        )
    else:
        ctx.problem(
            "reference_missing",
            f"{cand.text!r} cannot be resolved: {located.reason}",
            "warning",
            source,
            cand.line,
        )


def _record(
    ctx: _Context, cand: _Candidate, located: Located, via: Via, source: str, self_key: str
) -> str | None:
    """Add one resolved reference; returns its relative path when it is a Markdown document to follow.

    A document is returned even when it was referenced before, so that every edge of the document graph (and
    so every cycle) is seen; the reference itself is listed once.
    """
    if located.verdict is not Verdict.INSIDE or located.rel is None:
        _refuse(ctx, cand, located, via, source)
        return None
    key = str(located.resolved)
    if key == self_key:
        return None
    ref = Reference(ref=cand.text, path=located.rel, exists=located.exists, via=via, source=source)
    is_new = ctx.add(ref, key)
    canonical = ctx.canonical.setdefault(key, located.rel)
    if is_new and located.case_differs:
        ctx.problem(
            "reference_case",
            f"{cand.text!r} matches {located.rel!r} only when letter case is ignored; resolved to it "
            f"(write {located.rel!r}: the sandbox and most systems tell case apart)",
            "warning",
            source,
            cand.line,
        )
    if not located.exists:
        if is_new:
            ctx.problem(
                "reference_missing",
                f"{cand.text!r} does not exist in the skill folder",
                "warning",
                source,
                cand.line,
            )
        return None
    if (
        located.is_dir
        or ctx.in_nested(canonical)
        or PurePosixPath(canonical).suffix.lower() not in MARKDOWN_SUFFIXES
    ):
        return None
    return canonical


def _resolve_document(ctx: _Context, source: str, text: str, line_offset: int) -> list[str]:
    """Record the references of one document (links, paths, globs); returns the Markdown documents named."""
    base = posixpath.dirname(source) or "."
    self_key = str((ctx.root / source).resolve())
    found = extract(text, line_offset)
    docs: list[str] = []
    for link in found.links:
        # markdown-it percent-encodes destinations; decode once so the ref reads as written
        cand = _Candidate(unquote(link.text), link.line)
        target = _link_target(link.text)
        if target is not None and not _run_area(ctx, target, ctx.locate(target, base)):
            docs.append(_record(ctx, cand, ctx.locate(target, base), "link", source, self_key) or "")
    for cand in found.paths:
        located = ctx.locate(cand.text)
        if base != "." and not (located.verdict is Verdict.INSIDE and located.exists):
            # prose paths are usually relative to the skill folder, but may be relative to the document
            alt = ctx.locate(cand.text, base)
            if alt.verdict is Verdict.INSIDE and (alt.exists or located.verdict is Verdict.ESCAPE):
                located = alt
        if _run_area(ctx, cand.text, located):
            continue
        strong = cand.strong and not (cand.in_code and not _folder_known(ctx, cand.text, base))
        if strong or (located.verdict is Verdict.INSIDE and located.exists):
            docs.append(_record(ctx, cand, located, "path", source, self_key) or "")
    for cand in found.globs:
        docs.extend(_expand_glob(ctx, cand, source, base, self_key))
    return [d for d in docs if d]


def _folder_known(ctx: _Context, text: str, base: str) -> bool:
    """Whether the first folder of ``text`` is one the skill has (or ``text`` climbs with ``..``)."""
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if parts and parts[0] == "..":
        return True
    if len(parts) < 2:
        return False
    key = (parts[0], base)
    if key not in ctx.folders:
        ctx.folders[key] = any(
            (found := ctx.locate(parts[0], start)).verdict is Verdict.INSIDE and found.is_dir
            for start in dict.fromkeys([".", base])
        )
    return ctx.folders[key]


def _run_area(ctx: _Context, text: str, located: Located) -> bool:
    """A path into a runtime area that the skill does not ship: an output or input of a run."""
    return ctx.in_work_dir(text) and not (located.verdict is Verdict.INSIDE and located.exists)


def _expand_glob(ctx: _Context, cand: _Candidate, source: str, base: str, self_key: str) -> list[str]:
    if ctx.in_work_dir(cand.text) and not any(glob_match(cand.text.lstrip("./"), f) for f in ctx.files()):
        return []
    matches: list[str] = []
    patterns = [p for p in (normalize_rel(cand.text, start) for start in dict.fromkeys([".", base])) if p]
    if not patterns:
        _refuse(ctx, cand, Located(Verdict.ESCAPE, reason="'..' leaves the skill folder"), "glob", source)
        return []
    for pattern in patterns:
        matches = sorted(f for f in ctx.files() if glob_match(pattern, f))
        if matches:
            break
    if not matches:
        if "/" not in cand.text:
            return []  # a bare '*.ext' with no match is almost always a shell glob about the user's files
        if cand.in_code and not _folder_known(ctx, cand.text, base):
            return []  # an example about another project's tree ("src/**/*" in a tsconfig)
        if ctx.add(
            Reference(ref=cand.text, path=None, exists=False, via="glob", source=source), f"g:{cand.text}"
        ):
            ctx.problem(
                "glob_no_match",
                f"glob {cand.text!r} matches no file in the skill folder",
                "warning",
                source,
                cand.line,
            )
        return []
    if len(matches) > _MAX_GLOB_MATCHES:
        ctx.problem(
            "glob_truncated",
            f"glob {cand.text!r} matches {len(matches)} files; the first {_MAX_GLOB_MATCHES} are listed",
            "warning",
            source,
            cand.line,
        )
        matches = matches[:_MAX_GLOB_MATCHES]
    docs = []
    for rel in matches:
        doc = _record(ctx, _Candidate(cand.text, cand.line), ctx.locate(rel), "glob", source, self_key)
        docs.append(doc or "")
    return docs


def resolve_references(
    root: Path,
    body: str,
    *,
    body_line_offset: int,
    read_doc: Callable[[str], str],
    files: Callable[[], list[str]],
    nested: frozenset[str] = frozenset(),
    work_dirs: frozenset[str] = frozenset(),
    source: str = "SKILL.md",
    max_depth: int = 6,
    max_docs: int = 64,
) -> tuple[list[Reference], list[Problem]]:
    """All references of a skill, following its Markdown documents; never reads outside ``root`` (resolved).

    ``read_doc(rel)`` returns a confined document's text (raising ``OSError`` or a ``SkillError`` when it
    cannot); ``files()`` lists the skill's files (relative POSIX paths) for glob expansion.
    """
    ctx = _Context(root=root, read_doc=read_doc, files=_once(files), nested=nested, work_dirs=work_dirs)
    ctx.canonical[str((root / source).resolve())] = source
    graph: dict[str, list[str]] = {}
    queue: list[tuple[str, int]] = [(source, 0)]
    visited = {source}
    limited = False
    while queue:
        doc, depth = queue.pop(0)
        if doc == source:
            text, offset = body, body_line_offset
        else:
            try:
                text, offset = ctx.read_doc(doc)[:_MAX_DOC_CHARS], 0
            except Exception as e:  # noqa: BLE001 - any failure to read is reported on the document, never raised
                ctx.problem("reference_unreadable", f"{doc} could not be read: {e}", "warning", doc, None)
                continue
        targets = list(dict.fromkeys(_resolve_document(ctx, doc, text, offset)))
        graph[doc] = targets
        for target in targets:
            if target in visited:
                continue
            if depth + 1 > max_depth or len(visited) >= max_docs:
                if not limited:
                    limited = True
                    ctx.problem(
                        "reference_limit",
                        f"stopped following references at {target} "
                        f"(limits: depth {max_depth}, {max_docs} documents)",
                        "warning",
                        doc,
                        None,
                    )
                continue
            visited.add(target)
            queue.append((target, depth + 1))
    for cycle in _cycles(graph, source):
        ctx.problem(
            "reference_cycle", "reference cycle: " + " -> ".join(cycle), "warning", cycle[-2], None, cycle=tuple(cycle)
        )
    return ctx.references, ctx.problems


def _once(files: Callable[[], list[str]]) -> Callable[[], list[str]]:
    cache: list[list[str]] = []

    def get() -> list[str]:
        if not cache:
            cache.append(files())
        return cache[0]

    return get


def _cycles(graph: dict[str, list[str]], start: str) -> list[list[str]]:
    """Each distinct cycle reachable from ``start`` once, as [a, b, ..., a], found by iterative DFS."""
    found: list[list[str]] = []
    seen_keys: set[frozenset[str]] = set()
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[tuple[str, int]] = [(start, 0)]
    path: list[str] = [start]
    state[start] = 1
    while stack:
        node, i = stack[-1]
        children = graph.get(node, [])
        if i >= len(children):
            stack.pop()
            path.pop()
            state[node] = 2
            continue
        stack[-1] = (node, i + 1)
        child = children[i]
        if state.get(child) == 1:
            cycle = path[path.index(child) :] + [child]
            key = frozenset(cycle)
            if key not in seen_keys and len(found) < 20:
                seen_keys.add(key)
                found.append(cycle)
        elif child not in state:
            state[child] = 1
            path.append(child)
            stack.append((child, 0))
    return found
