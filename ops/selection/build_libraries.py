"""Build the selection libraries C, D and T (SKILL.md files only) from snapshots of public repositories.

The libraries are inputs of the recall measurements in docs/concepts/selection-measurements.md and of the goal adapter's
training (ops/selection/train_goal_adapter.py); they are never committed. Each repository is a snapshot with a
``repo`` git directory under MIRROR (as the team's fetch tool leaves it: ``MIRROR/<owner>+<name>/repo``).

    python ops/selection/build_libraries.py MIRROR OUT [C] [D] [T] [U] [V] [W] [H] [X]

C: whole collections (anthropics/skills, openai/skills, obra/superpowers, UiPath/skills,
K-Dense-AI/claude-scientific-skills, modelstudioai/skills), up to 80 from each of ten personal collections and
Chinese skills of thcjp/hermes-skills, 1,000 in all. D: the AgentWorkers/skills registry mirror, at most two per
author. T and U (training only): 1,500 more of that mirror each, one per author, no author of D (nor of T, for
U). V (training only): 1,000 more, one per author, no author of D, T or U. W (training only): the personal
collections' skills that C left out (past its 80 a collection; at most 500 of kazuyaegusa/claude-skills, one per
source repository first). H (measure only): 1,000 more of the mirror, one per author, no author of D, T, U or V,
so no goal adapter trained here has seen a skill of it. X (training only): 2,000 more, one per author, no author of
D or H and no skill of T, U or V. Writes only under OUT.
"""
import hashlib
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

MIRROR = Path(sys.argv[1])
OUT = Path(sys.argv[2])
WHICH = set(sys.argv[3:]) or {"C", "D", "T", "U", "V", "W", "H", "X"}
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
def h(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def paths(repo: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(MIRROR / repo / "repo"), "ls-tree", "-r", "--name-only", "HEAD"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(p for p in out.splitlines() if p.endswith("SKILL.md") and "/." not in "/" + p)


def blob(repo: str, path: str) -> bytes:
    return subprocess.run(["git", "-C", str(MIRROR / repo / "repo"), "show", f"HEAD:{path}"],
                          capture_output=True, check=True).stdout


def leaf(path: str) -> str:
    parts = path.split("/")[:-1]
    return re.sub(r"[^A-Za-z0-9._-]", "-", parts[-1] if parts else "root")


def write(dest: Path, sid: str, data: bytes) -> None:
    folder = dest / sid
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_bytes(data)


def description(data: bytes) -> str:
    text = data.decode("utf-8", "replace")[:4000]
    m = re.search(r"^description:\s*(.*(?:\n[ \t]+.*)*)", text, re.M)
    return m.group(1) if m else ""


def build_c() -> int:
    dest = OUT / "C"
    whole = ["anthropics+skills", "openai+skills", "obra+superpowers", "UiPath+skills",
             "K-Dense-AI+claude-scientific-skills", "modelstudioai+skills"]
    personal = ["takusaotome+claude-skills-library", "secondsky+claude-skills", "jamditis+claude-skills-journalism",
                "JeongTaehwan+claude-skills", "simota+agent-skills", "oaustegard+claude-skills",
                "kazuyaegusa+claude-skills", "mblode+agent-skills", "newkayak12+claude-skills",
                "vercel-labs+agent-skills"]
    n = 0
    for repo in whole + personal:
        owner = repo.split("+")[0]
        ps = paths(repo)
        if repo in personal:
            ps = sorted(ps, key=h)[:80]
        seen: set[str] = set()
        for p in ps:
            sid = f"{owner}/{leaf(p)}"
            while sid in seen:
                sid += "-2"
            seen.add(sid)
            write(dest, sid, blob(repo, p))
            n += 1
    # Chinese skills: one edition per -free/-pro family, described in Chinese.
    families: dict[str, tuple[str, bytes]] = {}
    for p in paths("thcjp+hermes-skills"):
        fam = re.sub(r"-(free|pro|lite|plus)$", "", leaf(p))
        if fam in families:
            continue
        data = blob("thcjp+hermes-skills", p)
        if CJK.search(description(data)):
            families[fam] = (p, data)
    for fam in sorted(families, key=h)[: max(0, 1000 - n)]:
        write(dest, f"thcjp/{fam}", families[fam][1])
        n += 1
    return n


def build_d() -> int:
    """At most two skills per author. First pass: two per author by hash, the first 1,000 by hash, those whose
    SKILL.md kept its frontmatter (the mirror lost it for some); then filled from other authors' valid skills."""
    dest = OUT / "D"
    by_author: dict[str, list[str]] = {}
    for p in paths("AgentWorkers+skills"):
        parts = p.split("/")
        if len(parts) == 4 and parts[0] == "skills":
            by_author.setdefault(parts[1], []).append(p)
    first = sorted([p for ps in by_author.values() for p in sorted(ps, key=h)[:2]], key=h)[:1000]
    kept = {p: blob("AgentWorkers+skills", p) for p in first}
    kept = {p: d for p, d in kept.items() if d.lstrip().startswith(b"---")}
    authors = {p.split("/")[1] for p in first}
    fill: dict[str, bytes] = {}
    for author, ps in sorted(by_author.items(), key=lambda kv: h(kv[0]))[:900]:
        if author in authors:
            continue
        n = 0
        for p in sorted(ps, key=h):
            d = blob("AgentWorkers+skills", p)
            if d.lstrip().startswith(b"---"):
                fill[p] = d
                n += 1
                if n == 2:
                    break
    order = sorted(fill, key=lambda p: h(str(Path("D") / p.split("/")[1] / p.split("/")[2])))
    for p in order[: 1000 - len(kept)]:
        kept[p] = fill[p]
    for p, d in kept.items():
        _, author, name, _ = p.split("/")
        write(dest, f"{author}/{name}", d)
    return len(kept)




def usable(data: bytes) -> bool:
    """A SKILL.md that kept its frontmatter (the mirror lost it for some) and says something."""
    return data.lstrip().startswith(b"---") and len(data) >= 200


def mirror_by_author(keep: Callable[[str, str], bool]) -> dict[str, list[str]]:
    """The registry mirror's SKILL.md paths by author, for the (author, skill folder) pairs ``keep`` accepts."""
    by_author: dict[str, list[str]] = {}
    for p in paths("AgentWorkers+skills"):
        parts = p.split("/")
        if len(parts) == 4 and parts[0] == "skills" and keep(parts[1], parts[2]):
            by_author.setdefault(parts[1], []).append(p)
    return by_author


def unseen_description(data: bytes, seen: set[str]) -> bool:
    """False for a skill whose description (words only, first 300 characters) an earlier skill of the same library
    already has, or that has none: twins would be each other's negatives in training."""
    key = " ".join(re.findall(r"\w+", description(data).lower()))[:300]
    if not key or key in seen:
        return False
    seen.add(key)
    return True


def build_extra(name: str, excluded: tuple[str, ...], size: int = 1500) -> int:
    """``size`` skills of the registry mirror into OUT/name, one per author, from authors none of the ``excluded``
    libraries holds, frontmatter intact."""
    taken = {p.name for lib in excluded for p in (OUT / lib).iterdir() if p.is_dir()}
    by_author = mirror_by_author(lambda author, _: author not in taken)
    n = 0
    descriptions: set[str] = set()
    for author in sorted(by_author, key=h):
        p = sorted(by_author[author], key=h)[0]
        data = blob("AgentWorkers+skills", p)
        # T and U were built before twins were dropped; they stay as they were trained on.
        if usable(data) and (name in ("T", "U") or unseen_description(data, descriptions)):
            write(OUT / name, f"{author}/{p.split('/')[2]}", data)
            n += 1
            if n == size:
                break
    return n


def build_x() -> int:
    """2,000 skills of the mirror into OUT/X: one per author not in D or H, a skill T, U and V do not hold."""
    banned = {p.name for lib in ("D", "H") for p in (OUT / lib).iterdir() if p.is_dir()}
    held = {f"{a.name}/{s.name}" for lib in ("T", "U", "V") for a in (OUT / lib).iterdir() if a.is_dir()
            for s in a.iterdir()}
    by_author = mirror_by_author(lambda author, skill: author not in banned and f"{author}/{skill}" not in held)
    n = 0
    descriptions: set[str] = set()
    for author in sorted(by_author, key=h):
        for p in sorted(by_author[author], key=h):
            data = blob("AgentWorkers+skills", p)
            if usable(data) and unseen_description(data, descriptions):
                write(OUT / "X", f"{author}/{p.split('/')[2]}", data)
                n += 1
                break
        if n == 2000:
            break
    return n


def build_w() -> int:
    """The personal collections' skills past the 80 C took from each (their order by hash, as in ``build_c``);
    kazuyaegusa/claude-skills gathers many repositories' skills, so at most 500 of it, one per source repository
    before a second."""
    dest = OUT / "W"
    n = 0
    descriptions: set[str] = set()
    for repo in ("takusaotome+claude-skills-library", "secondsky+claude-skills", "oaustegard+claude-skills",
                 "newkayak12+claude-skills", "kazuyaegusa+claude-skills"):
        owner = repo.split("+")[0]
        ps = sorted(paths(repo), key=h)[80:]
        if repo.startswith("kazuyaegusa"):
            rank: dict[str, int] = {}
            order = []
            for p in ps:
                source = p.split("/")[0]
                order.append((rank.get(source, 0), p))
                rank[source] = rank.get(source, 0) + 1
            ps = [p for _, p in sorted(order)][:500]
        seen: set[str] = set()
        for p in ps:
            data = blob(repo, p)
            if not usable(data) or not unseen_description(data, descriptions):
                continue
            sid = f"{owner}/{leaf(p)}"
            while sid in seen:
                sid += "-2"
            seen.add(sid)
            write(dest, sid, data)
            n += 1
    return n


if __name__ == "__main__":
    builds = {
        "C": build_c,
        "D": build_d,
        "T": lambda: build_extra("T", ("D",)),
        "U": lambda: build_extra("U", ("D", "T")),
        "V": lambda: build_extra("V", ("D", "T", "U"), 1000),
        "W": build_w,
        "H": lambda: build_extra("H", ("D", "T", "U", "V"), 1000),
        "X": build_x,
    }
    for name, build in builds.items():
        if name in WHICH:
            print(name, build())
