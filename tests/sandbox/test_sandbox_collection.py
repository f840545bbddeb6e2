"""What the public skill collection needs from the sandbox, on the real engine: `localhost` with the network off,
the toolchain its workflows use (OCR, GIFs, icons rendered by sharp, FreeSans, pypdf's merge_page, Pillow's PDF,
mcp), `soffice --convert-to` without `--outdir`, a package's scripts run by path, and `--build` copied back with
the deletions a script made."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import TEST_LABEL_PREFIX

from orchestrator.config import SandboxSettings
from orchestrator.sandbox.docker import SandboxRunner


@pytest.fixture(scope="module")
def default_runner(sandbox_image, docker_client, tmp_path_factory) -> Iterator[SandboxRunner]:
    """The production limits: the public skills declare nothing, so they get these."""
    runner = SandboxRunner(
        SandboxSettings(image=sandbox_image, label_prefix=TEST_LABEL_PREFIX),
        docker_client,
        work_dir=tmp_path_factory.mktemp("collection-work"),
    )
    yield runner
    runner.close()


def open_default(runner: SandboxRunner, root: Path):
    return runner.open_job("collection", root)


# -- localhost ----------------------------------------------------------------------------------------------------

SERVE_ON_LOCALHOST = """
import errno, json, socket, subprocess, sys, time, urllib.request
server = subprocess.Popen([sys.executable, "-m", "http.server", "8765", "--bind", "localhost"],
                          cwd="/skill", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
body = None
for _ in range(100):
    try:
        body = urllib.request.urlopen("http://localhost:8765/SKILL.md", timeout=2).read().decode()
        break
    except OSError:
        time.sleep(0.1)
server.kill()
def attempt(fn):
    try:
        fn(); return "succeeded"
    except OSError as e:
        return errno.errorcode.get(e.errno, type(e).__name__) if e.errno else type(e).__name__
gateway = open("/proc/net/route").read().split()
json.dump({
    "body": body,
    "localhost": sorted({a[4][0] for a in socket.getaddrinfo("localhost", 80)}),
    "outside": attempt(lambda: socket.create_connection(("1.1.1.1", 80), timeout=3)),
    "dns": attempt(lambda: socket.getaddrinfo("pypi.org", 443)),
    "hosts": [l.split()[0] for l in open("/etc/hosts") if l.strip() and not l.startswith("#")],
}, sys.stdout)
"""


def test_localhost_resolves_and_serves_inside_one_call_while_the_network_stays_off(make_skill, default_runner):
    root = make_skill({"SKILL.md": "# served\n", "serve.py": SERVE_ON_LOCALHOST})
    with open_default(default_runner, root) as job:
        result = job.run_script("serve.py", timeout_s=30)
    assert result.ok, result.stderr_summary
    seen = result.stdout_json
    assert seen["body"] == "# served\n"
    assert set(seen["localhost"]) <= {"127.0.0.1", "::1"} and seen["localhost"]
    # loopback only: every name /etc/hosts maps goes to a loopback or link-local multicast address, nothing routes
    assert all(address.startswith(("127.", "::1", "fe00::", "ff0")) for address in seen["hosts"]), seen["hosts"]
    assert seen["outside"] != "succeeded" and seen["dns"] != "succeeded"


# -- the toolchain ------------------------------------------------------------------------------------------------

PYTHON_TOOLCHAIN = """
import io, json, subprocess, sys
import imageio.v3 as iio, numpy, pytesseract, pypdf
from PIL import Image, ImageDraw, ImageFont
import mcp
from mcp.server.fastmcp import FastMCP

frames = numpy.zeros((4, 32, 32, 3), dtype=numpy.uint8)
for i in range(4):
    frames[i, :, : 8 * (i + 1)] = 255
iio.imwrite("build/anim.gif", frames, duration=100, loop=0)

font = ImageFont.truetype("FreeSans", 64)
page = Image.new("RGB", (900, 160), "white")
ImageDraw.Draw(page).text((20, 40), "Quarterly revenue", fill="black", font=font)
ocr = pytesseract.image_to_string(page)

page.save("build/page.pdf")  # Pillow 12.2 failed on an RGB image straight to .pdf
mark = Image.new("RGB", (900, 160), "white")
ImageDraw.Draw(mark).text((20, 40), "DRAFT", fill="red", font=font)
mark.save("build/mark.pdf")
watermark = pypdf.PdfReader("build/mark.pdf").pages[0]
writer = pypdf.PdfWriter()
for p in pypdf.PdfReader("build/page.pdf").pages:
    p.merge_page(watermark)
    writer.add_page(p)
with open("build/watermarked.pdf", "wb") as out:
    writer.write(out)

app = FastMCP("probe")
json.dump({
    "gif_frames": len(iio.imread("build/anim.gif", index=None)),
    "ocr": ocr.strip(),
    "watermarked_pages": len(pypdf.PdfReader("build/watermarked.pdf").pages),
    "mcp": mcp.__name__,
    "free_fonts": sorted(set(subprocess.run(["fc-list", ":family=FreeSans", "family"], capture_output=True,
                                            text=True).stdout.split())),
}, sys.stdout)
"""

NODE_ICON = """
const React = require("react");
const ReactDOMServer = require("react-dom/server");
const sharp = require("sharp");
const { FaCheckCircle } = require("react-icons/fa");
const fs = require("fs");
const svg = ReactDOMServer.renderToStaticMarkup(React.createElement(FaCheckCircle, { color: "#4472C4", size: "256" }));
sharp(Buffer.from(svg)).png().toBuffer().then(async (png) => {
  fs.writeFileSync("build/icon.png", png);
  const meta = await sharp(png).metadata();
  const p5 = fs.existsSync(require.resolve("p5/lib/p5.min.js"));
  process.stdout.write(JSON.stringify({ width: meta.width, format: meta.format, p5 }));
});
"""


def test_the_toolchain_the_public_skills_use_is_in_the_image(make_skill, default_runner):
    root = make_skill({"SKILL.md": "# tools\n", "tools.py": PYTHON_TOOLCHAIN, "icon.js": NODE_ICON})
    with open_default(default_runner, root) as job:
        python = job.run_script("tools.py", timeout_s=90)
        node = job.run_script("icon.js", timeout_s=60)
        images = job.run_command(["pdfimages", "-list", "build/page.pdf"], timeout_s=30)
        ocr = job.run_command(["tesseract", "--list-langs"], timeout_s=30)
    assert python.ok, python.stderr_summary
    found = python.stdout_json
    assert found["gif_frames"] == 4
    assert "Quarterly revenue" in found["ocr"]
    assert found["watermarked_pages"] == 1
    assert found["mcp"] == "mcp"
    assert "FreeSans" in found["free_fonts"]
    assert node.ok, node.stderr_summary
    assert node.stdout_json == {"width": 256, "format": "png", "p5": True}
    assert images.ok and "image" in images.stdout_text, images.stderr_summary
    assert ocr.ok and "eng" in ocr.stdout_text.split()


def test_the_image_carries_no_apt_caches_and_takes_security_updates(sandbox_image, docker_client):
    out = docker_client.containers.run(
        sandbox_image,
        ["bash", "-c", "du -sk /var/cache/apt /var/lib/apt/lists | cut -f1; cat /etc/apt/sources.list "
         "/etc/apt/sources.list.d/* 2>/dev/null"],
        remove=True,
        network_mode="none",
    ).decode()
    sizes = [int(word) for word in out.split()[:2]]
    assert max(sizes) < 1024, out  # KiB: empty folders only
    assert "bookworm-security" in out


# -- soffice without --outdir ---------------------------------------------------------------------------------------

MAKE_DOCX = """
import json
from docx import Document
doc = Document(); doc.add_heading("Minutes", 0); doc.add_paragraph("Decisions taken. " * 20)
doc.save("build/minutes.docx")
print(json.dumps({"ok": True}))
"""

CONVERT_LIKE_A_SKILL = """
import subprocess, sys
done = subprocess.run(["soffice", "--headless", "--convert-to", "pdf", *sys.argv[1:]], capture_output=True, text=True)
print(done.stdout + done.stderr)
sys.exit(done.returncode)
"""


def test_soffice_convert_to_without_outdir_writes_beside_its_input(make_skill, default_runner):
    root = make_skill({"SKILL.md": "# convert\n", "make.py": MAKE_DOCX, "scripts/convert.py": CONVERT_LIKE_A_SKILL})
    with open_default(default_runner, root) as job:
        assert job.run_script("make.py", timeout_s=60).ok
        direct = job.run_command(["soffice", "--headless", "--convert-to", "pdf", "build/minutes.docx"], timeout_s=120)
        assert direct.ok, direct.stderr_summary
        assert "minutes.pdf" in {f.path for f in job.list_files()}
        assert "read-only" in direct.stderr_summary + direct.stdout_text  # the caller is told where it went
        job.write_file("other/notes.docx", job.read_file("minutes.docx"))
        by_script = job.run_script("scripts/convert.py", argv=["build/other/notes.docx"], timeout_s=120)
        assert by_script.ok, by_script.stderr_summary
        listed = {f.path for f in job.list_files()}
        assert "other/notes.pdf" in listed
        # an input that cannot be written beside (the read-only skill) goes to build/
        from_skill = job.run_command(["soffice", "--headless", "--convert-to", "txt", "SKILL.md"], timeout_s=120)
        assert from_skill.ok and "SKILL.txt" in {f.path for f in job.list_files()}
        # an explicit --outdir is left alone
        chosen = job.run_command(
            ["soffice", "--headless", "--convert-to", "pdf", "--outdir", "build/chosen", "build/minutes.docx"],
            timeout_s=120,
        )
        assert chosen.ok and "chosen/minutes.pdf" in {f.path for f in job.list_files()}
        assert "read-only" not in chosen.stdout_text + chosen.stderr_summary


# -- a skill's package ----------------------------------------------------------------------------------------------


def test_a_package_script_runs_by_its_path_and_with_python_dash_m(make_skill, default_runner):
    root = make_skill(
        {
            "SKILL.md": "# pkg\n",
            "scripts/__init__.py": "",
            "scripts/util.py": "NAME = 'util'\n",
            "scripts/office/__init__.py": "",
            "scripts/office/helper.py": "NAME = 'helper'\n",
            # skill-creator's form: package imports, documented as `python -m scripts.package_it`
            "scripts/package_it.py": """
            import json, sys
            from scripts.util import NAME
            json.dump({"name": NAME, "argv": sys.argv[1:]}, sys.stdout)
            """,
            # pptx's form: a sibling import that only works with the script's folder on the path
            "scripts/thumb.py": """
            import json, sys
            from office.helper import NAME
            json.dump({"name": NAME}, sys.stdout)
            """,
            # slack-gif-creator's form: code the model writes imports the skill's modules
            "core/__init__.py": "",
            "core/gif_builder.py": "NAME = 'gif'\n",
            # a package whose top is not at the skill root
            "tools/pkg/__init__.py": "",
            "tools/pkg/util.py": "NAME = 'nested'\n",
            "tools/pkg/run.py": """
            import json, sys
            from pkg.util import NAME
            json.dump({"name": NAME}, sys.stdout)
            """,
        }
    )
    with open_default(default_runner, root) as job:
        by_path = job.run_script("scripts/package_it.py", argv=["a b"], timeout_s=30)
        as_module = job.run_command(["python3", "-m", "scripts.package_it", "x"], timeout_s=30)
        sibling = job.run_script("scripts/thumb.py", timeout_s=30)
        nested = job.run_script("tools/pkg/run.py", timeout_s=30)
        job.write_file("make_gif.py", b"import json, sys\nfrom core.gif_builder import NAME\nprint(json.dumps(NAME))")
        model_code = job.run_script("build/make_gif.py", timeout_s=30)
        model_command = job.run_command(["python3", "build/make_gif.py"], timeout_s=30)
    assert by_path.ok, by_path.stderr_summary
    assert by_path.stdout_json == {"name": "util", "argv": ["a b"]}
    assert as_module.ok and json.loads(as_module.stdout_text) == {"name": "util", "argv": ["x"]}
    assert sibling.ok and sibling.stdout_json == {"name": "helper"}, sibling.stderr_summary
    assert nested.ok and nested.stdout_json == {"name": "nested"}, nested.stderr_summary
    assert nested.command[:2] == ["env", "PYTHONPATH=/skill/tools:/skill"]
    assert model_code.ok and model_code.stdout_json == "gif", model_code.stderr_summary
    assert model_command.ok and json.loads(model_command.stdout_text) == "gif"
    plain = make_skill({"SKILL.md": "# p\n", "tool.py": "import json,sys; json.dump(sys.path[:2], sys.stdout)"}, "p")
    with open_default(default_runner, plain) as job:
        result = job.run_script("tool.py", timeout_s=30)
    assert result.command[0] == "python3" and result.stdout_json[0] == "/skill"  # no package: nothing added


# -- --build copied back with deletions ---------------------------------------------------------------------------


def test_sandbox_run_build_copies_back_the_deletions_a_script_made(make_skill, tmp_path, cli_env):
    root = make_skill(
        {
            "clean.py": """
            import json, os, shutil
            os.remove("build/slides/old.xml"); shutil.rmtree("build/media")
            open("build/slides/new.xml", "w").write("<new/>")
            json.dump({"removed": 2}, __import__("sys").stdout)
            """
        }
    )
    build = tmp_path / "work"
    (build / "slides").mkdir(parents=True)
    (build / "media").mkdir()
    (build / "slides" / "old.xml").write_text("<old/>")
    (build / "slides" / "kept.xml").write_text("<kept/>")
    (build / "media" / "a.png").write_bytes(b"png")
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "sandbox", "run", "clean.py", "--skill-root", str(root),
         "--build", str(build), "--json"],
        capture_output=True, text=True, env=cli_env, timeout=180, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["stdout_json"] == {"removed": 2}
    left = sorted(p.relative_to(build).as_posix() for p in build.rglob("*"))
    assert left == ["slides", "slides/kept.xml", "slides/new.xml"]
    assert os.listdir(build) == ["slides"]
