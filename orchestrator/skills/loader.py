"""The skills library: discovery, L1 index, L2 body, L3 references and confined reads.

Discovery finds every file named ``SKILL.md`` under the root at any depth; the skill id is its folder's path
relative to the root, with ``/`` and in Unicode NFC (``brand-guidelines``, ``document-skills/pptx``). A
``SKILL.md`` directly in the root is the skill ``"."``. No folder name is special; ``.git``, ``node_modules``,
``__pycache__`` and virtualenvs are skipped, and symlinked folders are never entered (so nothing outside the
root is found). A skill folder inside another skill is a skill of its own and is not part of the outer one.

A broken skill never stops the listing: every defect becomes a :class:`Problem` on that skill. Mentions of
the runtime's work areas (``build/...`` outputs, ``inputs/...`` goal inputs) are not skill references.
"""

from __future__ import annotations

import builtins
import difflib
import hashlib
import os
import posixpath
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import PathEscapeError, SkillError
from orchestrator.logs import get_logger
from orchestrator.prompts import render_prompt
from orchestrator.skills.confine import (
    SKIP_DIRS,
    Verdict,
    confine,
    display_text,
    is_absolute_like,
    locate,
    normalize_rel,
    walk_files,
)
from orchestrator.skills.frontmatter import SKILL_MD, ParsedSkillMd, parse_skill_md
from orchestrator.skills.parsed import DisclosedText, Problem, Reference, Severity, Skill, SkillSummary
from orchestrator.skills.read_cache import DEFAULT_MAX_BYTES, NotARegularFile, ReadCache
from orchestrator.skills.refs import glob_match, resolve_references
from orchestrator.tokens import cut_to_tokens, estimate_tokens

LOADER_SCOPE = "skills-loader"

RUNTIME_WORK_DIRS = ("build", "inputs")
"""The Act runtime's own folders; a runtime library passes them as ``work_dirs`` so outputs-to-be are not
reported as missing references. The plain library (``skills show``) treats no folder name specially."""
SKILL_MD_MAX_BYTES = 2 * 1024 * 1024
DOCUMENT_MAX_BYTES = 1024 * 1024
READ_TEXT_MAX_BYTES = 1024 * 1024
_MAX_FOLDERS = 200_000
_BINARY_SNIFF = 8192

log = get_logger(__name__)


@dataclass(frozen=True)
class _Found:
    id: str  # NFC, "/"-separated; "." for the root
    disk_rel: str  # the same path as it is spelled on disk
    folder: Path  # resolved absolute folder
    scan_problems: tuple[Problem, ...] = ()  # e.g. an id that had to be disambiguated


@dataclass(frozen=True)
class _Loaded:
    parsed: ParsedSkillMd
    sha256: str
    problems: list[Problem]  # read problems + parse problems


def _l2_marker(cut_tokens: int, offset: int) -> str:
    return "\n\n" + render_prompt("notes/l2_cut", tokens=cut_tokens, offset=offset) + "\n"


class SkillLibrary:
    """All skills under one root folder. Cheap to build; the folder is scanned on first use."""

    def __init__(
        self,
        root: Path,
        *,
        l2_max_tokens: int = 5000,
        cache: ReadCache | None = None,
        work_dirs: tuple[str, ...] = (),
    ) -> None:
        root = Path(root)
        if not root.is_dir():
            raise SkillError(
                f"skills root {str(root)!r} is not a folder",
                where="skills",
                next_step="pass --root with an existing folder that holds skill folders",
                root=str(root),
            )
        self.root = root.resolve()
        self.l2_max_tokens = l2_max_tokens
        self.work_dirs = frozenset(work_dirs)
        self.cache = cache if cache is not None else ReadCache()
        self.scan_problems: list[Problem] = []
        self._found: dict[str, _Found] | None = None
        self._parsed: dict[tuple[str, str], ParsedSkillMd] = {}

    # -- discovery -------------------------------------------------------------------------------------------

    def _scan(self) -> dict[str, _Found]:
        found: dict[str, _Found] = {}
        problems: list[Problem] = []
        stack = ["."]
        folders = 0
        while stack and folders < _MAX_FOLDERS:
            disk_rel = stack.pop()
            folders += 1
            folder = self.root / disk_rel
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as e:
                problems.append(
                    _problem(
                        "folder_unreadable",
                        f"cannot list {display_text(disk_rel)}: {e.strerror}",
                        display_text(disk_rel),
                    )
                )
                continue
            names = {e.name for e in entries}
            if SKILL_MD in names:
                skill_id = unicodedata.normalize("NFC", display_text(disk_rel))
                if skill_id in found:
                    # Two folders that read alike (NFC/NFD spellings, different undecodable bytes): keep both. The
                    # one spelled exactly like the id keeps it; the other is listed under its own exact spelling
                    # (undecodable bytes as \xNN), so no skill silently disappears.
                    here = _Found(skill_id, disk_rel, folder)
                    if disk_rel == skill_id:
                        here, found[skill_id] = found[skill_id], here
                    unique = _escaped_id(here.disk_rel, found)
                    clash = _problem(
                        "duplicate_id", f"{unique} reads like {skill_id}; listed under its exact spelling", unique
                    )
                    problems.append(clash)
                    found[unique] = _Found(unique, here.disk_rel, here.folder, (clash,))
                else:
                    found[skill_id] = _Found(skill_id, disk_rel, folder)
            subdirs = []
            for entry in entries:
                try:
                    if entry.name not in SKIP_DIRS and entry.is_dir(follow_symlinks=False):
                        subdirs.append(entry.name if disk_rel == "." else f"{disk_rel}/{entry.name}")
                except OSError:
                    continue
            stack.extend(reversed(subdirs))
        if stack:
            problems.append(_problem("scan_limit", f"stopped after {_MAX_FOLDERS} folders", "."))
        self.scan_problems = problems
        self._found = dict(sorted(found.items()))
        log.debug("skills.scanned", root=str(self.root), skills=len(found), folders=folders)
        return self._found

    def _lookup(self, skill_id: str) -> _Found:
        exact = posixpath.normpath(skill_id.strip("/") or ".")
        found = self._found if self._found is not None else self._scan()
        if exact in found:  # an id spelled out exactly (the disambiguated ones are not NFC)
            return found[exact]
        wanted = unicodedata.normalize("NFC", exact)
        if wanted not in found:
            found = self._scan()
        if wanted in found:
            return found[wanted]
        close = difflib.get_close_matches(wanted, list(found), n=5, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else "run `skills list` to see the ids"
        raise SkillError(
            f"unknown skill {skill_id!r} under {self.root}",
            where="skills",
            next_step=hint,
            skill_id=skill_id,
            close_matches=close,
            known=list(found),
        )

    # -- SKILL.md --------------------------------------------------------------------------------------------

    def _load(self, f: _Found) -> _Loaded:
        located = locate(f.folder, SKILL_MD)
        read_problem: Problem | None = None
        if located.verdict is Verdict.SYMLINK_ESCAPE:
            read_problem = _skill_problem(
                "skill_md_escape", "SKILL.md is a symlink to a file outside the skill folder; not read"
            )
        elif located.verdict is not Verdict.INSIDE or located.resolved is None:
            read_problem = _skill_problem(
                "skill_md_unreadable", f"SKILL.md cannot be resolved: {located.reason}"
            )
        elif located.is_dir:
            read_problem = _skill_problem("skill_md_not_a_file", "SKILL.md is a directory, not a file")
        elif not located.exists:
            read_problem = _skill_problem("skill_md_unreadable", "SKILL.md is a dangling symlink")
        if read_problem is not None:
            return _Loaded(ParsedSkillMd(), "", [read_problem])
        assert located.resolved is not None
        try:
            read = self.cache.read(located.resolved, max_bytes=SKILL_MD_MAX_BYTES, scope=LOADER_SCOPE)
        except NotARegularFile:
            return _Loaded(
                ParsedSkillMd(), "", [_skill_problem("skill_md_not_a_file", "SKILL.md is not a regular file")]
            )
        except OSError as e:
            reason = "permission denied" if isinstance(e, PermissionError) else (e.strerror or str(e))
            return _Loaded(
                ParsedSkillMd(),
                "",
                [_skill_problem("skill_md_unreadable", f"SKILL.md cannot be read: {reason}")],
            )
        key = (f.id, read.sha256)
        parsed = self._parsed.get(key)
        if parsed is None:
            parsed = parse_skill_md(read.data, folder_name=self._folder_name(f))
            self._parsed[key] = parsed
        problems = list(parsed.problems)
        if read.truncated:
            problems.insert(
                0,
                _skill_problem(
                    "skill_md_too_large",
                    f"SKILL.md has {read.size} bytes; only the first {SKILL_MD_MAX_BYTES} were parsed",
                    severity="warning",
                ),
            )
        return _Loaded(parsed, read.sha256, problems)

    def _folder_name(self, f: _Found) -> str:
        return unicodedata.normalize("NFC", display_text(f.folder.name if f.id != "." else self.root.name))

    def _summary(self, f: _Found) -> SkillSummary:
        loaded = self._load(f)
        p = loaded.parsed
        l1_text = f"{p.name or ''}: {p.description or ''}" if (p.name or p.description) else ""
        return SkillSummary(
            id=f.id,
            name=p.name,
            description=p.description,
            path=display_text(str(f.folder)),
            problems=[*f.scan_problems, *loaded.problems],
            l1_tokens=estimate_tokens(l1_text),
            disable_model_invocation=p.disable_model_invocation,
        )

    # -- public API ------------------------------------------------------------------------------------------

    def list(self) -> list[SkillSummary]:
        """Every skill under the root, sorted by id; a broken one is listed with its problems."""
        summaries = [self._summary(f) for f in self._scan().values()]
        by_name = Counter(s.name for s in summaries if s.name)
        result = []
        for s in summaries:
            if s.name and by_name[s.name] > 1:
                others = [o.id for o in summaries if o.name == s.name and o.id != s.id]
                dup = _skill_problem(
                    "duplicate_name",
                    f"name {s.name!r} is also used by {', '.join(others)}",
                    severity="warning",
                    field="name",
                )
                s = s.model_copy(update={"problems": [*s.problems, dup]})
            result.append(s)
        return result

    def l1_index(self) -> builtins.list[SkillSummary]:
        """The skills a model may choose from (a name and a description), in id order."""
        return [s for s in self.list() if s.usable_at_l1]

    def get(self, skill_id: str) -> Skill:
        """The full skill with its references; raises :class:`SkillError` for an unknown id."""
        f = self._lookup(skill_id)
        loaded = self._load(f)
        p = loaded.parsed
        references: builtins.list[Reference] = []
        ref_problems: builtins.list[Problem] = []
        if loaded.sha256:
            nested = self._nested(f)
            references, ref_problems = resolve_references(
                f.folder,
                p.body,
                body_line_offset=p.body_line - 1,
                read_doc=lambda rel: self._read_document(f, rel),
                files=lambda: list(walk_files(f.folder, prune=nested[1])),
                nested=nested[0],
                work_dirs=self.work_dirs,
            )
        return Skill(
            id=f.id,
            root=f.folder,
            name=p.name,
            description=p.description,
            license=p.license,
            allowed_tools=p.allowed_tools,
            compatibility=p.compatibility,
            metadata=p.metadata,
            body=p.body,
            body_tokens=estimate_tokens(p.body),
            references=references,
            problems=[*loaded.problems, *ref_problems],
            declarations=p.declarations,
            disable_model_invocation=p.disable_model_invocation,
            skill_md_sha256=loaded.sha256,
        )

    def parsed(self, skill_id: str) -> tuple[ParsedSkillMd, str]:
        """The parsed SKILL.md of a skill and the sha256 of its bytes ("" when it could not be read)."""
        loaded = self._load(self._lookup(skill_id))
        return loaded.parsed, loaded.sha256

    def l2(self, skill_id: str) -> DisclosedText:
        """The SKILL.md body as shown at L2: cut at ``l2_max_tokens``, with a marker saying what was cut."""
        body = self._load(self._lookup(skill_id)).parsed.body
        total = estimate_tokens(body)
        if total <= self.l2_max_tokens:
            text, cut = body, 0
        else:
            budget = max(0, self.l2_max_tokens - estimate_tokens(_l2_marker(total, len(body))))
            prefix, cut = cut_to_tokens(body, budget)
            text = prefix + _l2_marker(cut, len(prefix))  # the offset counts characters of the body
        return DisclosedText(
            text=text,
            tokens=estimate_tokens(text),
            truncated=cut > 0,
            cut_tokens=cut,
            sha256=hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest(),
        )

    def resolve(self, skill_id: str, rel_path: str) -> Path:
        """The resolved absolute path of ``rel_path`` inside the skill; raises :class:`PathEscapeError`."""
        f = self._lookup(skill_id)
        return confine(f.folder, rel_path, where=f"skill:{f.id}")

    def read_text(
        self, skill_id: str, rel_path: str, *, max_bytes: int = READ_TEXT_MAX_BYTES
    ) -> tuple[str, str]:
        """(text, sha256) of a text file inside the skill, read through the cache.

        A file over ``max_bytes`` is cut there with a visible marker (the hash covers the bytes read). Raises
        :class:`PathEscapeError` for a path leaving the skill and :class:`SkillError` for a missing, binary or
        unreadable file.
        """
        f = self._lookup(skill_id)
        where = f"skill:{f.id}"
        path = confine(f.folder, rel_path, where=where)
        if path.is_dir():
            raise SkillError(
                f"{rel_path!r} is a folder",
                where=where,
                next_step="list its files with a glob",
                path=rel_path,
            )
        try:
            read = self.cache.read(path, max_bytes=max(1, min(max_bytes, DEFAULT_MAX_BYTES)))
        except FileNotFoundError as e:
            raise SkillError(
                f"{rel_path!r} does not exist in skill {f.id}",
                where=where,
                next_step="check the path against the skill's references or list files with a glob",
                path=rel_path,
            ) from e
        except OSError as e:
            raise SkillError(
                f"{rel_path!r} cannot be read: {e.strerror or e}", where=where, path=rel_path
            ) from e
        if b"\0" in read.data[:_BINARY_SNIFF]:
            raise SkillError(
                f"{rel_path!r} is a binary file ({read.size} bytes)",
                where=where,
                next_step="binary files are used by scripts, not read as text",
                path=rel_path,
                kind="binary",
                size=read.size,
            )
        text = read.text
        if read.truncated:
            text += "\n" + render_prompt("notes/read_text_cut", shown=len(read.data), size=read.size) + "\n"
        return text, read.sha256

    def glob(self, skill_id: str, pattern: str) -> builtins.list[str]:
        """Files of the skill matching ``pattern`` (relative POSIX paths, sorted), nested skills excluded."""
        f = self._lookup(skill_id)
        pattern = pattern.strip() or "**/*"
        normalized = None if is_absolute_like(pattern) or "\0" in pattern else normalize_rel(pattern)
        if normalized is None:
            raise PathEscapeError(
                f"glob {pattern!r} is refused: it leaves the skill folder",
                where=f"skill:{f.id}",
                next_step="use a pattern relative to the skill folder",
                path=pattern,
            )
        if normalized == ".":
            normalized = "**/*"
        return sorted(
            rel for rel in walk_files(f.folder, prune=self._nested(f)[1]) if glob_match(normalized, rel)
        )

    # -- helpers ---------------------------------------------------------------------------------------------

    def _nested(self, f: _Found) -> tuple[frozenset[str], frozenset[str]]:
        """Folders of skills nested in ``f``, relative to it: (NFC ids, on-disk spellings)."""
        found = self._found if self._found is not None else self._scan()
        ids, disk = set(), set()
        for other in found.values():
            if other.id == f.id:
                continue
            if f.id == ".":
                ids.add(other.id)
                disk.add(other.disk_rel)
            elif other.id.startswith(f.id + "/"):
                ids.add(other.id[len(f.id) + 1 :])
                disk.add(other.disk_rel[len(f.disk_rel) + 1 :])
        return frozenset(ids), frozenset(disk)

    def _read_document(self, f: _Found, rel: str) -> str:
        path = confine(f.folder, rel, where=f"skill:{f.id}")
        return self.cache.read(path, max_bytes=DOCUMENT_MAX_BYTES, scope=LOADER_SCOPE).text


def _problem(code: str, message: str, path: str) -> Problem:
    return Problem(code=code, message=message, severity="warning", path=path)


def _skill_problem(
    code: str, message: str, *, severity: Severity = "error", field: str | None = None
) -> Problem:
    return Problem(code=code, message=message, severity=severity, path=SKILL_MD, field=field)


def _escaped_id(disk_rel: str, taken: dict[str, _Found]) -> str:
    """An id for a folder whose normal id is taken: its exact spelling, undecodable bytes as ``\\xNN``."""
    base = disk_rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}#{n}", n + 1
    return candidate
