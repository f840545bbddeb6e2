"""Make the folders Playwright looks for under PLAYWRIGHT_BROWSERS_PATH, linked to Debian's headless Chromium.

Usage: browser_layout.py BROWSERS_JSON TARGET. Playwright finds a browser at
TARGET/<name with "_" for "-">-<revision>/<platform folder>/<executable>; the revision is read from the
browsers.json of the Playwright that is installed, so the layout always matches its pin.
"""

import json
import sys
from pathlib import Path

HEADLESS_SHELL = "/usr/lib/chromium/chromium-headless-shell"
# Playwright's folder and executable names for Linux x86-64 and arm64.
LAYOUT = {
    "chromium-headless-shell": {
        "x86_64": ("chrome-headless-shell-linux64", "chrome-headless-shell"),
        "aarch64": ("chrome-headless-shell-linux-arm64", "chrome-headless-shell"),
    },
}


def main() -> None:
    browsers_json, target = Path(sys.argv[1]), Path(sys.argv[2])
    machine = __import__("platform").machine()
    for browser in json.loads(browsers_json.read_text())["browsers"]:
        names = LAYOUT.get(browser["name"], {}).get(machine)
        if names is None:
            continue
        folder = target / f"{browser['name'].replace('-', '_')}-{browser['revision']}" / names[0]
        folder.mkdir(parents=True)
        (folder / names[1]).symlink_to(HEADLESS_SHELL)
        (folder.parent / "INSTALLATION_COMPLETE").touch()
        print(f"{folder / names[1]} -> {HEADLESS_SHELL}")


if __name__ == "__main__":
    main()
