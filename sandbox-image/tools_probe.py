"""Print the image's tool list as one JSON object ({"tool": "version"}); run once at build time.

The build stores the output as the image label org.orchestrator.sandbox.tools, which skills' declared
requirements are checked against. Programs are listed by the name a skill calls them with, Python libraries by
their distribution name, Node libraries as ``npm:NAME`` (and by their bare name when no Python library has it).
"""

import json
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

LIBRARIES = (
    "python-pptx",
    "openpyxl",
    "python-docx",
    "pypdf",
    "Pillow",
    "lxml",
    "reportlab",
    "Jinja2",
    "XlsxWriter",
    "defusedxml",
    "pandas",
    "numpy",
    "pdfplumber",
    "pdfminer.six",
    "pypdfium2",
    "pdf2image",
    "markitdown",
    "mammoth",
    "PyYAML",
    "imageio",
    "pytesseract",
    "mcp",
    "playwright",
)
COMMANDS = {
    "node": ["node", "--version"],
    "curl": ["curl", "--version"],
    "bash": ["bash", "-c", "echo $BASH_VERSION"],
    "coreutils": ["ls", "--version"],
    "soffice": ["soffice", "--version"],
    "pdftoppm": ["pdftoppm", "-v"],
    "pdftotext": ["pdftotext", "-v"],
    "pdfinfo": ["pdfinfo", "-v"],
    "pdfimages": ["pdfimages", "-v"],
    "tesseract": ["tesseract", "--version"],
    "chromium": ["chromium-headless-shell", "--version"],
    "qpdf": ["qpdf", "--version"],
    "pandoc": ["pandoc", "--version"],
    "markitdown": ["markitdown", "--version"],
}
# Other names skills use for the same programs.
SAME_AS = {"libreoffice": "soffice", "poppler-utils": "pdftoppm"}
NODE_MODULES = Path("/opt/node_modules")
NODE_PACKAGES = ("pptxgenjs", "docx", "sharp", "react", "react-dom", "react-icons", "p5")


def command_version(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    except subprocess.TimeoutExpired:
        return "present"
    match = re.search(r"(\d+(?:\.\d+)+)", done.stdout + "\n" + done.stderr)
    return match.group(1) if match else "present"


def node_packages() -> dict[str, str]:
    found: dict[str, str] = {}
    for name in NODE_PACKAGES:
        manifest = NODE_MODULES / name / "package.json"
        if manifest.is_file():
            found[name] = json.loads(manifest.read_text(encoding="utf-8"))["version"]
    return found


def main() -> None:
    tools = {"python3": "%d.%d.%d" % sys.version_info[:3]}
    for name, argv in COMMANDS.items():
        version = command_version(argv)
        if version:
            tools[name] = version
    for alias, name in SAME_AS.items():
        if name in tools:
            tools[alias] = tools[name]
    for lib in LIBRARIES:
        try:
            tools[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            pass
    python_names = {name.lower() for name in tools}
    for name, version in node_packages().items():
        tools[f"npm:{name}"] = version
        if name.lower() not in python_names and name not in ("docx", "pptx"):  # bare docx/pptx mean the Python libs
            tools[name] = version
    json.dump(tools, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
