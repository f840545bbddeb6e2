"""Print the image's tool list as one JSON object ({"tool": "version"}); run once at build time.

The build stores the output as the image label org.orchestrator.sandbox.tools, which skills' declared
requirements are checked against.
"""

import json
import re
import shutil
import subprocess
import sys
from importlib import metadata

LIBRARIES = ("python-pptx", "openpyxl", "python-docx", "pypdf", "Pillow", "lxml", "reportlab", "Jinja2")
COMMANDS = {
    "node": ["node", "--version"],
    "bash": ["bash", "-c", "echo $BASH_VERSION"],
    "coreutils": ["ls", "--version"],
}


def command_version(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    match = re.search(r"(\d+(?:\.\d+)+)", out)
    return match.group(1) if match else "present"


def main() -> None:
    tools = {"python3": "%d.%d.%d" % sys.version_info[:3]}
    for name, argv in COMMANDS.items():
        version = command_version(argv)
        if version:
            tools[name] = version
    for lib in LIBRARIES:
        try:
            tools[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            pass
    json.dump(tools, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
