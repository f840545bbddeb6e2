"""Print the image's fonts as one JSON object: every family fontconfig knows, and advance widths of Latin families.

Run by ``python -m orchestrator sandbox fonts`` (never at run time). The host keeps the result as the layout
check's font table (``orchestrator/validate/layout/fontmetrics.json``), so text widths are estimated from the
same font files LibreOffice renders with, on any host, without the fonts being installed there.

Widths are measured with Pillow (FreeType) at 1000 px per em, so every number is in thousandths of an em:
``regular``/``bold`` hold the advance of each character of ``chars``; ``ascent``, ``descent`` and ``height``
(ascent + descent + line gap) are the face's vertical metrics.
"""

import json
import subprocess
import sys

from PIL import ImageFont

EM = 1000
CHARS = (
    "".join(chr(c) for c in range(0x20, 0x7F))
    + "".join(chr(c) for c in range(0xA0, 0x100))
    + "\u2013\u2014\u2018\u2019\u201a\u201c\u201d\u201e\u2020\u2021\u2022\u2026\u2030\u2032\u2033\u2039\u203a"
    + "\u20ac\u2122\u2212"
)
FIELDS = ("file", "index", "family", "style", "weight", "slant", "lang")
REGULAR, BOLD = 80, 200  # fontconfig weights


def faces():
    fmt = "\t".join(f"%{{{name}}}" for name in FIELDS) + "\n"
    out = subprocess.run(["fc-list", "--format", fmt], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) != len(FIELDS):
            continue
        face = dict(zip(FIELDS, parts))
        face["families"] = [name.strip() for name in face["family"].split(",") if name.strip()]
        face["index"] = int(face["index"] or 0)
        face["weight"] = int(float(face["weight"] or REGULAR))
        face["slant"] = int(float(face["slant"] or 0))
        face["latin"] = "en" in face["lang"].split("|")
        yield face


def pick(candidates, weight):
    upright = [f for f in candidates if f["slant"] == 0] or candidates
    return min(upright, key=lambda f: (abs(f["weight"] - weight), f["file"]))


def measure(face):
    font = ImageFont.truetype(face["file"], EM, index=face["index"])
    ascent, descent = font.font.ascent, font.font.descent
    return {
        "widths": [round(font.getlength(ch)) for ch in CHARS],
        "ascent": ascent,
        "descent": descent,
        "height": max(font.font.height, ascent + descent),
    }


def main():
    by_family = {}
    for face in faces():
        for name in face["families"]:
            by_family.setdefault(name, []).append(face)
    metrics = {}
    for name, candidates in sorted(by_family.items()):
        latin = [f for f in candidates if f["latin"]]
        if not latin:
            continue
        regular, bold = measure(pick(latin, REGULAR)), measure(pick(latin, BOLD))
        metrics[name] = {
            "ascent": regular["ascent"],
            "descent": regular["descent"],
            "height": regular["height"],
            "regular": " ".join(map(str, regular["widths"])),
            "bold": " ".join(map(str, bold["widths"])),
        }
    json.dump({"em": EM, "chars": CHARS, "families": sorted(by_family), "metrics": metrics}, sys.stdout,
              ensure_ascii=False, sort_keys=True)


if __name__ == "__main__":
    main()
