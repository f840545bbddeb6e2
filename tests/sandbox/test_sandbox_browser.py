"""The browser: Playwright driving Debian's headless Chromium in its own image, for the calls that start it, with
the browser profile's limits, and a browser that dies of a limit reported by that limit's name."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import TEST_LABEL_PREFIX

from orchestrator.config import LimitProfile, SandboxSettings
from orchestrator.sandbox.browser import call_needs_browser
from orchestrator.sandbox.docker import SandboxRunner

# The public webapp-testing and algorithmic-art shapes: a page served on localhost by the call itself, p5.js from
# a CDN (answered from the image: there is no network), and the launch line verbatim.
SCREENSHOT = """
import json, subprocess, sys, time, urllib.request
from playwright.sync_api import sync_playwright

page_html = '''<html><head>
<script src="https://cdnjs.cloudflare.com/ajax/libs/p5.js/1.7.0/p5.min.js"></script></head><body><script>
function setup() { createCanvas(320, 200); randomSeed(42); background(20); }
function draw() { fill(random(255), 120, 200); circle(random(320), random(200), 30); if (frameCount > 30) noLoop(); }
</script></body></html>'''
open("build/art.html", "w").write(page_html)
server = subprocess.Popen([sys.executable, "-m", "http.server", "8765", "--bind", "localhost", "-d", "build"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(100):
    try:
        urllib.request.urlopen("http://localhost:8765/art.html", timeout=1); break
    except OSError:
        time.sleep(0.1)
with sync_playwright() as p:
    browser = p.chromium.launch(headless=True)
    page = browser.new_page()
    page.goto("http://localhost:8765/art.html")
    page.wait_for_load_state("networkidle")
    page.wait_for_function("typeof p5 !== 'undefined' && document.querySelector('canvas') !== null")
    page.screenshot(path="build/art.png", full_page=True)
    version = page.evaluate("p5.prototype.VERSION")
    browser.close()
server.kill()
json.dump({"p5": version}, sys.stdout)
"""

# No word of this file names a browser: it runs in the sandbox image.
HAS_BROWSER = """
import importlib.util, json, sys
json.dump({"driver": importlib.util.find_spec("play" + "wright") is not None,
           "memory_mb": int(open("/sys/fs/cgroup/memory/memory.limit_in_bytes").read()) // 1048576}, sys.stdout)
"""

EAT_MEMORY = """
from playwright.sync_api import sync_playwright
with sync_playwright() as p:
    browser = p.chromium.launch(headless=True)
    page = browser.new_page()
    page.set_content("<p>hungry</p>")
    page.evaluate("() => { const a = []; for (let i = 0; i < 1e9; i++) a.push(new Array(1e5).fill(i)); }")
"""

# A browser that loses a thread to the pids limit may wait forever instead of crashing, and say nothing: this one
# takes every process it can, then waits (the word "playwright" here gives it the browser image and launcher).
HANG_AT_PIDS = """
import os, time
children = []
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        children.append(pid)
except OSError:
    time.sleep(600)
"""

SPIN = """
from playwright.sync_api import sync_playwright
with sync_playwright() as p:
    page = p.chromium.launch(headless=True).new_page()
    page.set_content("<p>busy</p>")
    page.evaluate("() => { while (true) {} }")
"""


def browser_runner(sandbox_image, browser_image, docker_client, work: Path, **profile) -> SandboxRunner:
    settings = SandboxSettings(  # small defaults, so the profile's values are the ones that apply
        image=sandbox_image,
        browser_image=browser_image,
        label_prefix=TEST_LABEL_PREFIX,
        memory_mb=256,
        pids_limit=32,
        profiles={"browser-automation": LimitProfile(timeout_cap_s=120, **profile)},
    )
    return SandboxRunner(settings, docker_client, work_dir=work)


@pytest.fixture(scope="module")
def runner(sandbox_image, browser_image, docker_client, tmp_path_factory) -> Iterator[SandboxRunner]:
    """Production limits and the production browser profile (2048 MiB, 512 pids, 512 MiB /tmp and /dev/shm)."""
    settings = SandboxSettings(image=sandbox_image, browser_image=browser_image, label_prefix=TEST_LABEL_PREFIX)
    runner = SandboxRunner(settings, docker_client, work_dir=tmp_path_factory.mktemp("browser-work"))
    yield runner
    runner.close()


def test_a_call_starting_playwright_gets_the_browser_and_others_do_not(make_skill, runner):
    root = make_skill({"SKILL.md": "# art\n", "scripts/shot.py": SCREENSHOT, "scripts/probe.py": HAS_BROWSER})
    with runner.open_job("browser-undeclared", root) as job:
        plain = job.run_script("scripts/probe.py", timeout_s=30)
        shot = job.run_script("scripts/shot.py", timeout_s=120)
        files = {f.path: f.size for f in job.list_files()}
    assert plain.ok and plain.stdout_json == {"driver": False, "memory_mb": 512}, plain.stderr_summary
    assert shot.ok, shot.stderr_summary
    assert shot.stdout_json == {"p5": "1.11.13"}  # the CDN's p5 came from the image's node_modules
    assert files["art.png"] > 2000


def test_a_skill_declaring_the_browser_runs_every_call_with_the_browser_profile(make_skill, runner):
    root = make_skill({"SKILL.md": "# b\n", "probe.py": HAS_BROWSER})
    with runner.open_job("browser-declared", root, operations=["browser-automation"]) as job:
        result = job.run_script("probe.py", timeout_s=30)
    assert result.ok and result.stdout_json == {"driver": True, "memory_mb": 2048}, result.stderr_summary


@pytest.mark.parametrize(
    ("script", "profile", "timeout_s", "limit"),
    [
        (EAT_MEMORY, {"memory_mb": 400, "pids_limit": 512, "tmp_size_mb": 256}, 120, "memory"),
        (SCREENSHOT, {"memory_mb": 2048, "pids_limit": 48, "tmp_size_mb": 256}, 120, "pids"),
        ("# playwright\n" + HANG_AT_PIDS, {"memory_mb": 2048, "pids_limit": 48, "tmp_size_mb": 256}, 5, "pids"),
        (SPIN, {"memory_mb": 2048, "pids_limit": 512, "tmp_size_mb": 256}, 15, "timeout"),
    ],
    ids=["memory", "pids", "pids-then-hung", "timeout"],
)
def test_a_browser_killed_by_a_limit_is_reported_with_the_limit_name(
    make_skill, sandbox_image, browser_image, docker_client, tmp_path, script, profile, timeout_s, limit
):
    root = make_skill({"SKILL.md": "# b\n", "run.py": script})
    runner = browser_runner(sandbox_image, browser_image, docker_client, tmp_path / "work", **profile)
    try:
        with runner.open_job(f"browser-{limit}", root) as job:
            result = job.run_script("run.py", timeout_s=timeout_s)
    finally:
        runner.close()
    assert not result.ok
    assert result.limit == limit, (result.reason, result.violations, result.stderr_summary[-2000:])
    assert result.next_step


# -- which calls need it (no engine) --------------------------------------------------------------------------------


def _skill(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text))
    return tmp_path


def test_a_call_needs_the_browser_when_it_or_a_file_it_names_mentions_one(tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("from playwright.sync_api import sync_playwright\n")
    root = _skill(
        tmp_path / "skill",
        {
            "scripts/with_server.py": "import subprocess  # starts servers, then the command after --\n",
            "scripts/shot.py": "from playwright.sync_api import sync_playwright\n",
            "scripts/plain.py": "print('no browser here')\n",
        },
    )
    (root / "escape.py").symlink_to(outside)
    build = {"build/test.py": b"import asyncio\nfrom playwright.async_api import async_playwright\n"}
    read = build.get

    def needs(*words: str) -> bool:
        return call_needs_browser(root, words, read)

    assert needs("python3", "/skill/scripts/shot.py")
    assert needs("python3", "-c", "from playwright.sync_api import sync_playwright")
    assert needs("python3", "/skill/scripts/with_server.py", "--server", "python3 -m http.server 8765",
                 "--", "python3", "build/test.py")
    assert needs("bash", "-c", "cd /skill && python3 scripts/shot.py")
    assert needs("chromium-headless-shell", "--version")
    assert not needs("python3", "/skill/scripts/plain.py")
    assert not needs("python3", "/skill/scripts/with_server.py", "--", "python3", "build/absent.py")
    assert not needs("python3", "escape.py")  # a link out of the skill is never read
    assert not needs("python3", "../outside.py")
