#!/usr/bin/python3 -I
"""``soffice``/``libreoffice`` as skills call them, for a sandbox whose working folder is read-only.

LibreOffice writes a conversion (``--convert-to``) into the working folder unless ``--outdir`` says otherwise. In
the sandbox the working folder is the skill root, mounted read-only: LibreOffice then writes nothing and still
exits 0. This front runs before the real program (it is first on PATH as ``soffice`` and ``libreoffice``): when a
conversion has no ``--outdir`` and the working folder cannot be written, it adds ``--outdir`` naming the folder of
the first input file if that can be written, else ``build/`` of the working folder, and says so on stderr. Every
other call goes to LibreOffice unchanged.
"""

import os
import sys
from pathlib import Path

REAL = "/usr/lib/libreoffice/program/soffice"
TAKES_VALUE = {"--convert-to", "--outdir", "--printer-name", "--infilter"}
CONVERTS = {"--convert-to", "--print-to-file"}


def option(word: str) -> str:
    """``-convert-to``, ``--convert-to`` and ``--convert-to=X`` all name ``--convert-to``."""
    return "--" + word.lstrip("-").split("=", 1)[0]


def inputs(args: list[str]) -> list[str]:
    found: list[str] = []
    skip = False
    for word in args:
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            skip = option(word) in TAKES_VALUE and "=" not in word
            continue
        found.append(word)
    return found


def writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


def outdir_for(args: list[str]) -> Path | None:
    """Where a conversion without ``--outdir`` should write, or None to leave the call as it is."""
    names = {option(word) for word in args if word.startswith("-")}
    if not names & CONVERTS or "--outdir" in names or writable(Path.cwd()):
        return None
    files = inputs(args)
    if files:
        folder = Path(files[0]).parent
        if writable(folder):
            return folder
    build = Path.cwd() / "build"
    return build if writable(build) else None


def main() -> None:
    args = sys.argv[1:]
    target = outdir_for(args)
    if target is not None:
        print(
            f"soffice: the working folder {Path.cwd()} is read-only; writing the converted file to {target}/ "
            "(pass --outdir DIR to choose another folder)",
            file=sys.stderr,
            flush=True,
        )
        args = [*args, "--outdir", str(target)]
    os.execv(REAL, [REAL, *args])


if __name__ == "__main__":
    main()
