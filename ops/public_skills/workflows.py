"""The steps of each public skill's workflow, as its SKILL.md tells a model to run them (see check.py).

Code a model would write goes to ``build/`` with a ``write`` step and runs like the skill's own scripts; the
skill's scripts run with the command lines their SKILL.md shows, the files they work on under ``build/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Step:
    kind: Literal["write", "script", "command"]
    path: str = ""
    argv: tuple[str, ...] = ()
    text: str = ""
    timeout_s: float = 120
    expect: tuple[str, ...] = ()  # files (under build/) the step must leave, non-empty

    @property
    def label(self) -> str:
        if self.kind == "write":
            return f"write build/{self.path}"
        if self.kind == "script":
            return " ".join([self.path, *self.argv])[:160]
        return " ".join(self.argv)[:160]


def write(path: str, text: str) -> Step:
    return Step("write", path=path, text=text)


def script(path: str, *argv: str, expect: tuple[str, ...] = (), timeout_s: float = 120) -> Step:
    return Step("script", path=path, argv=argv, expect=expect, timeout_s=timeout_s)


def command(*argv: str, expect: tuple[str, ...] = (), timeout_s: float = 120) -> Step:
    return Step("command", argv=argv, expect=expect, timeout_s=timeout_s)


EXPECTED_TO_FAIL = {"web-artifacts-builder": "its scripts install packages with pnpm/npm over the network by design"}

# A page opened in headless Chromium and captured (webapp-testing's pattern, the launch line verbatim).
SCREENSHOT = """
import sys
from playwright.sync_api import sync_playwright

url, out = sys.argv[1], sys.argv[2]
with sync_playwright() as p:
    browser = p.chromium.launch(headless=True)
    page = browser.new_page(viewport={"width": 1000, "height": 700})
    page.goto(url)
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(500)
    page.screenshot(path=out, full_page=True)
    errors = page.evaluate("window.__errors || []")
    browser.close()
print({"shot": out, "errors": errors})
"""

ALGORITHMIC_ART_CHECK = """
import sys
from playwright.sync_api import sync_playwright

with sync_playwright() as p:
    browser = p.chromium.launch(headless=True)
    page = browser.new_page()
    page.goto("file:///skill/build/art.html")
    page.wait_for_function("typeof p5 !== 'undefined' && document.querySelector('canvas') !== null", timeout=30000)
    page.wait_for_timeout(1500)
    page.locator("canvas").first.screenshot(path="build/art.png")
    browser.close()
"""

FRONTEND_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Aurora Coffee</title>
<style>
:root { --ink: #1b1b1f; --accent: #d9480f; }
body { margin: 0; font-family: "DejaVu Serif", serif; color: var(--ink); background: #fff8f0; }
header { padding: 64px; background: linear-gradient(135deg, #ffe8cc, #ffc9c9); }
h1 { font-size: 64px; letter-spacing: -2px; margin: 0; }
.grid { display: grid; grid-template-columns: repeat(3, 1fr); gap: 24px; padding: 48px 64px; }
.card { background: white; border-radius: 16px; padding: 24px; box-shadow: 0 8px 24px rgba(0,0,0,.08); }
button { background: var(--accent); color: white; border: 0; padding: 12px 20px; border-radius: 999px; }
</style></head>
<body><header><h1>Aurora Coffee</h1><p>Roasted at dawn.</p><button id="order">Order</button></header>
<section class="grid"><div class="card">Single origin</div><div class="card">Blends</div><div class="card">Gear</div>
</section><script>document.getElementById("order").onclick = () => document.title = "ordered";</script></body></html>
"""

WEBAPP = """<!doctype html><html><body><h1 id="count">0</h1><button id="inc">+1</button>
<script>let n = 0; document.getElementById("inc").onclick = () => { n++; document.getElementById("count").textContent = n; };
</script></body></html>
"""

WEBAPP_TEST = """
from playwright.sync_api import sync_playwright

with sync_playwright() as p:
    browser = p.chromium.launch(headless=True) # Always launch chromium in headless mode
    page = browser.new_page()
    page.goto('http://localhost:8765/index.html') # Server already running and ready
    page.wait_for_load_state('networkidle') # CRITICAL: Wait for JS to execute
    page.screenshot(path='/tmp/inspect.png', full_page=True)
    buttons = page.locator('button').all()
    page.click('#inc'); page.click('#inc')
    assert page.inner_text('#count') == '2', page.inner_text('#count')
    page.screenshot(path='build/after.png')
    browser.close()
print("clicked", len(buttons))
"""

BRAND_DECK = """
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.util import Inches, Pt

deck = Presentation()
deck.slide_width, deck.slide_height = Inches(13.333), Inches(7.5)
slide = deck.slides.add_slide(deck.slide_layouts[6])
slide.background.fill.solid(); slide.background.fill.fore_color.rgb = RGBColor(0xFA, 0xF9, 0xF5)
box = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(11), Inches(1.5))
run = box.text_frame.paragraphs[0].add_run(); run.text = "Quarterly update"
run.font.name, run.font.size, run.font.color.rgb = "Poppins", Pt(40), RGBColor(0x14, 0x14, 0x13)
body = slide.shapes.add_textbox(Inches(1), Inches(3), Inches(11), Inches(2)).text_frame.paragraphs[0].add_run()
body.text, body.font.name, body.font.size = "Revenue grew 12 % on subscriptions.", "Lora", Pt(20)
accent = slide.shapes.add_shape(1, Inches(1), Inches(6), Inches(3), Inches(0.2))
accent.fill.solid(); accent.fill.fore_color.rgb = RGBColor(0xD9, 0x77, 0x57)
deck.save("build/brand.pptx")
"""

CANVAS = """
from PIL import Image, ImageDraw, ImageFont
from reportlab.lib.pagesizes import A4
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas
import random

random.seed(7)
image = Image.new("RGB", (1200, 1600), (245, 240, 230))
draw = ImageDraw.Draw(image)
for _ in range(400):
    x, y, r = random.randint(0, 1200), random.randint(0, 1600), random.randint(2, 40)
    draw.ellipse((x - r, y - r, x + r, y + r), outline=(30, 60, 90), width=2)
font = ImageFont.truetype("canvas-fonts/BigShoulders-Bold.ttf", 140)
draw.text((80, 1300), "TIDE", font=font, fill=(200, 60, 40))
image.save("build/poster.png")
pdfmetrics.registerFont(TTFont("BigShoulders", "canvas-fonts/BigShoulders-Bold.ttf"))
page = canvas.Canvas("build/poster.pdf", pagesize=A4)
page.drawImage("build/poster.png", 0, 0, width=A4[0], height=A4[1])
page.setFont("BigShoulders", 48); page.drawString(60, 60, "TIDE")
page.save()
"""

DOCX_JS = """
const fs = require("fs");
const { Document, Packer, Paragraph, TextRun, HeadingLevel, Table, TableRow, TableCell, WidthType } = require("docx");
const doc = new Document({
  sections: [{
    properties: { page: { size: { width: 12240, height: 15840 } } },
    children: [
      new Paragraph({ heading: HeadingLevel.HEADING_1, children: [new TextRun("Minutes")] }),
      new Paragraph({ children: [new TextRun({ text: "Decisions", bold: true }), new TextRun(" were taken.")] }),
      new Table({ width: { size: 9360, type: WidthType.DXA }, columnWidths: [4680, 4680],
        rows: [new TableRow({ children: [
          new TableCell({ width: { size: 4680, type: WidthType.DXA }, children: [new Paragraph("Owner")] }),
          new TableCell({ width: { size: 4680, type: WidthType.DXA }, children: [new Paragraph("Due")] })] })] }),
    ],
  }],
});
Packer.toBuffer(doc).then((buffer) => fs.writeFileSync("build/doc.docx", buffer));
"""

MCP_SERVER = """
from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel, Field

mcp = FastMCP("weather_mcp")


class Forecast(BaseModel):
    city: str = Field(..., description="City name")
    days: int = Field(1, ge=1, le=7)


@mcp.tool(name="weather_forecast", annotations={"readOnlyHint": True})
async def weather_forecast(params: Forecast) -> str:
    '''A made-up forecast for a city.'''
    return f"{params.city}: sunny for {params.days} days"


if __name__ == "__main__":
    mcp.run()
"""

MCP_CLIENT = """
import asyncio, json, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main():
    server = StdioServerParameters(command=sys.executable, args=["build/server.py"])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            result = await session.call_tool("weather_forecast", {"params": {"city": "Oslo", "days": 2}})
            print(json.dumps({"tools": [t.name for t in tools.tools], "result": result.content[0].text}))


asyncio.run(main())
"""

PDF_RECIPES = """
import pdfplumber, pytesseract
from pdf2image import convert_from_path
from PIL import Image
from pypdf import PdfReader, PdfWriter
from reportlab.lib.pagesizes import letter
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.lib import colors
from reportlab.platypus import Image as RLImage, PageBreak, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

chart = Image.new("RGB", (400, 200), (40, 90, 160)); chart.save("build/chart.png")
styles = getSampleStyleSheet()
story = [Paragraph("Quarterly Report", styles["Title"]), Paragraph("Revenue grew strongly.", styles["Normal"]),
         Spacer(1, 12), Table([["Region", "Sales"], ["North", "120"], ["South", "95"]],
                              style=TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.black)])),
         RLImage("build/chart.png"),
         PageBreak(), Paragraph("Page two", styles["Heading1"])]
SimpleDocTemplate("build/report.pdf", pagesize=letter).build(story)

reader = PdfReader("build/report.pdf")
assert len(reader.pages) == 2
writer = PdfWriter()
for pdf_file in ["build/report.pdf", "build/report.pdf"]:
    for page in PdfReader(pdf_file).pages:
        writer.add_page(page)
with open("build/merged.pdf", "wb") as output:
    writer.write(output)
for i, page in enumerate(reader.pages):
    single = PdfWriter(); single.add_page(page)
    with open(f"build/page_{i+1}.pdf", "wb") as output:
        single.write(output)
rotated = PdfWriter(); page = reader.pages[0]; page.rotate(90); rotated.add_page(page)
with open("build/rotated.pdf", "wb") as output:
    rotated.write(output)

Image.new("RGB", (612, 792), (255, 255, 255)).save("build/watermark.pdf")  # Pillow straight to PDF
watermark = PdfReader("build/watermark.pdf").pages[0]
marked = PdfWriter()
for page in PdfReader("build/report.pdf").pages:
    page.merge_page(watermark)
    marked.add_page(page)
with open("build/watermarked.pdf", "wb") as output:
    marked.write(output)

with pdfplumber.open("build/report.pdf") as pdf:
    text = "".join(page.extract_text() or "" for page in pdf.pages)
    tables = [t for page in pdf.pages for t in page.extract_tables()]
assert "Quarterly Report" in text and tables, (text, tables)

images = convert_from_path("build/report.pdf", dpi=150)
ocr = "".join(pytesseract.image_to_string(image) for image in images)
assert "Quarterly" in ocr, ocr
print({"pages": len(reader.pages), "tables": len(tables), "ocr_chars": len(ocr)})
"""

PPTX_JS = """
const pptxgen = require("pptxgenjs");
const React = require("react");
const ReactDOMServer = require("react-dom/server");
const sharp = require("sharp");
const { FaCheckCircle, FaChartLine } = require("react-icons/fa");

function renderIconSvg(IconComponent, color = "#000000", size = 256) {
  return ReactDOMServer.renderToStaticMarkup(React.createElement(IconComponent, { color, size: String(size) }));
}
async function iconToBase64Png(IconComponent, color, size = 256) {
  const svg = renderIconSvg(IconComponent, color, size);
  const pngBuffer = await sharp(Buffer.from(svg)).png().toBuffer();
  return "image/png;base64," + pngBuffer.toString("base64");
}

(async () => {
  const pres = new pptxgen();
  pres.layout = "LAYOUT_16x9";
  const check = await iconToBase64Png(FaCheckCircle, "#4472C4", 256);
  const chart = await iconToBase64Png(FaChartLine, "#C0504D", 256);
  const title = pres.addSlide();
  title.background = { color: "1E2761" };
  title.addText("Q3 Results", { x: 0.5, y: 2, w: 9, h: 1.2, fontSize: 40, color: "FFFFFF", bold: true });
  const body = pres.addSlide();
  body.addText("Highlights", { x: 0.5, y: 0.4, w: 9, h: 0.8, fontSize: 28, bold: true });
  body.addImage({ data: check, x: 0.6, y: 1.6, w: 0.5, h: 0.5 });
  body.addText("Revenue up 12 %", { x: 1.3, y: 1.6, w: 7, h: 0.5, fontSize: 18 });
  body.addImage({ data: chart, x: 0.6, y: 2.4, w: 0.5, h: 0.5 });
  body.addText("Churn down to 2.1 %", { x: 1.3, y: 2.4, w: 7, h: 0.5, fontSize: 18 });
  await pres.writeFile({ fileName: "build/deck.pptx" });
})();
"""

SKILL_DRAFT = """---
name: demo-skill
description: Turns meeting notes into a one-page summary. Use when someone shares raw notes and wants a summary.
---

# Demo skill

Read the notes, list decisions and owners, and write `summary.md`.
"""

GIF = """
from core.gif_builder import GIFBuilder
from core.validators import validate_gif, is_slack_ready
from core.easing import interpolate
from PIL import Image, ImageDraw

builder = GIFBuilder(width=128, height=128, fps=10)
for i in range(12):
    frame = Image.new('RGB', (128, 128), (240, 248, 255))
    draw = ImageDraw.Draw(frame)
    y = int(interpolate(start=20, end=100, t=i / 11, easing='ease_out'))
    draw.ellipse([44, y - 20, 84, y + 20], fill=(255, 100, 100))
    builder.add_frame(frame)
builder.save('build/output.gif', num_colors=48, optimize_for_emoji=True)
passes, info = validate_gif('build/output.gif', is_emoji=True, verbose=True)
print({"passes": passes, "slack_ready": is_slack_ready('build/output.gif')})
"""

THEMED_DECK = """
import subprocess
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.util import Inches, Pt

families = subprocess.run(["fc-list", ":", "family"], capture_output=True, text=True).stdout
assert "FreeSans" in families and "FreeSerif" in families, "the theme's fonts are missing"
deck = Presentation()
deck.slide_width, deck.slide_height = Inches(13.333), Inches(7.5)
slide = deck.slides.add_slide(deck.slide_layouts[6])
slide.background.fill.solid(); slide.background.fill.fore_color.rgb = RGBColor(0x2D, 0x4A, 0x2B)
title = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(11), Inches(1.5)).text_frame.paragraphs[0].add_run()
title.text, title.font.name, title.font.bold, title.font.size = "Forest Canopy", "FreeSerif", True, Pt(44)
title.font.color.rgb = RGBColor(0xFA, 0xF9, 0xF6)
body = slide.shapes.add_textbox(Inches(1), Inches(3), Inches(11), Inches(2)).text_frame.paragraphs[0].add_run()
body.text, body.font.name, body.font.size = "Grounded and natural.", "FreeSans", Pt(22)
deck.save("build/themed.pptx")
"""

THEME_FONTS = """
import pdfplumber
with pdfplumber.open("build/themed.pdf") as pdf:
    fonts = {c["fontname"].split("+")[-1] for c in pdf.pages[0].chars}
assert any("FreeSerif" in f for f in fonts) and any("FreeSans" in f for f in fonts), fonts
print(sorted(fonts))
"""

XLSX = """
from openpyxl import Workbook
wb = Workbook(); ws = wb.active; ws.title = "Q3"
ws.append(["Region", "Revenue", "Cost", "Margin"])
for region, revenue, cost in [("North", 120, 80), ("South", 95, 70), ("West", 60, 61)]:
    row = ws.max_row + 1
    ws.append([region, revenue, cost, f"=(B{row}-C{row})/B{row}"])
ws["A6"], ws["B6"], ws["C6"] = "Total", "=SUM(B2:B4)", "=SUM(C2:C4)"
ws["D6"] = "=(B6-C6)/B6"
wb.save("build/q3.xlsx")
"""

WORKFLOWS: dict[str, list[Step]] = {
    "algorithmic-art": [
        command("python3", "-c", "import shutil; shutil.copy('templates/viewer.html', 'build/art.html')"),
        write("render.py", ALGORITHMIC_ART_CHECK),
        script("build/render.py", expect=("art.png",)),
    ],
    "brand-guidelines": [
        write("brand.py", BRAND_DECK),
        script("build/brand.py", expect=("brand.pptx",)),
        command("soffice", "--headless", "--convert-to", "pdf", "build/brand.pptx", expect=("brand.pdf",)),
        command("pdftoppm", "-png", "-r", "40", "build/brand.pdf", "build/brand", expect=("brand-1.png",)),
    ],
    "canvas-design": [write("poster.py", CANVAS), script("build/poster.py", expect=("poster.png", "poster.pdf"))],
    "claude-api": [
        command("python3", "-c", "import pathlib; assert len(list(pathlib.Path('.').rglob('*.md'))) > 10"),
    ],
    "doc-coauthoring": [
        write("doc.md", "# Proposal\n\n## Problem\n\nNotes are lost.\n\n## Proposal\n\n- Keep one page.\n"),
        command("pandoc", "build/doc.md", "-o", "build/doc.docx", expect=("doc.docx",)),
    ],
    "docx": [
        write("make.js", DOCX_JS),
        command("node", "build/make.js", expect=("doc.docx",)),
        script("scripts/office/validate.py", "build/doc.docx"),
        script("scripts/office/soffice.py", "--headless", "--convert-to", "pdf", "build/doc.docx",
               expect=("doc.pdf",)),
        script("scripts/office/unpack.py", "build/doc.docx", "build/unpacked", expect=("unpacked/word/document.xml",)),
        script("scripts/office/pack.py", "build/unpacked", "build/repacked.docx", "--original", "build/doc.docx",
               expect=("repacked.docx",)),
        script("scripts/accept_changes.py", "build/doc.docx", "build/accepted.docx", expect=("accepted.docx",)),
    ],
    "frontend-design": [
        write("site/index.html", FRONTEND_PAGE),
        write("shot.py", SCREENSHOT),
        script("build/shot.py", "file:///skill/build/site/index.html", "build/site.png", expect=("site.png",)),
    ],
    "internal-comms": [
        command("python3", "-c", "import pathlib; print(sorted(p.name for p in pathlib.Path('examples').glob('*.md')))"),
        write("update.md", "## 3P update\n\n**Progress:** shipped the beta.\n**Plans:** GA in May.\n"),
    ],
    "mcp-builder": [
        write("server.py", MCP_SERVER),
        write("client.py", MCP_CLIENT),
        script("build/client.py", timeout_s=60),
        command("python3", "-c", "import sys; sys.path.insert(0, 'scripts'); import connections"),
    ],
    "pdf": [
        write("recipes.py", PDF_RECIPES),
        script("build/recipes.py", expect=("report.pdf", "merged.pdf", "watermarked.pdf", "rotated.pdf")),
        command("qpdf", "--check", "build/report.pdf"),
        command("qpdf", "--empty", "--pages", "build/report.pdf", "1", "--", "build/first.pdf", expect=("first.pdf",)),
        command("pdftotext", "-layout", "build/report.pdf", "build/report.txt", expect=("report.txt",)),
        command("pdfimages", "-list", "build/report.pdf"),
        command("pdfimages", "-png", "build/report.pdf", "build/img", expect=("img-000.png",)),
        script("scripts/check_fillable_fields.py", "build/report.pdf"),
        command("bash", "-c", "mkdir -p build/pages"),
        script("scripts/convert_pdf_to_images.py", "build/report.pdf", "build/pages", expect=("pages/page_1.png",)),
    ],
    "pptx": [
        write("deck.js", PPTX_JS),
        command("node", "build/deck.js", expect=("deck.pptx",)),
        command("python3", "-m", "markitdown", "build/deck.pptx"),
        script("scripts/thumbnail.py", "build/deck.pptx", "build/grid", expect=("grid.jpg",), timeout_s=120),
        script("scripts/office/soffice.py", "--headless", "--convert-to", "pdf", "build/deck.pptx",
               expect=("deck.pdf",)),
        command("pdftoppm", "-jpeg", "-r", "50", "build/deck.pdf", "build/slide", expect=("slide-1.jpg",)),
        script("scripts/office/unpack.py", "build/deck.pptx", "build/unpacked", expect=("unpacked/ppt/presentation.xml",)),
        script("scripts/clean.py", "build/unpacked"),
        script("scripts/office/pack.py", "build/unpacked", "build/clean.pptx", "--original", "build/deck.pptx",
               expect=("clean.pptx",)),
    ],
    "skill-creator": [
        write("demo-skill/SKILL.md", SKILL_DRAFT),
        script("scripts/quick_validate.py", "build/demo-skill"),
        command("bash", "-c", "mkdir -p build/dist build/dist2"),
        command("python3", "-m", "scripts.package_skill", "build/demo-skill", "build/dist",
                expect=("dist/demo-skill.skill",)),
        script("scripts/package_skill.py", "build/demo-skill", "build/dist2", expect=("dist2/demo-skill.skill",)),
    ],
    "slack-gif-creator": [write("make_gif.py", GIF), script("build/make_gif.py", expect=("output.gif",))],
    "theme-factory": [
        command("python3", "-c", "print(open('themes/forest-canopy.md').read()[:400])"),
        write("themed.py", THEMED_DECK),
        script("build/themed.py", expect=("themed.pptx",)),
        command("soffice", "--headless", "--convert-to", "pdf", "build/themed.pptx", expect=("themed.pdf",)),
        write("fonts.py", THEME_FONTS),
        script("build/fonts.py"),
    ],
    "web-artifacts-builder": [script("scripts/init-artifact.sh", "demo-app", timeout_s=60)],
    "webapp-testing": [
        script("scripts/with_server.py", "--help"),
        write("app/index.html", WEBAPP),
        write("test_app.py", WEBAPP_TEST),
        script("scripts/with_server.py", "--server", "python3 -m http.server 8765 -d build/app", "--port", "8765",
               "--", "python3", "build/test_app.py", expect=("after.png",)),
    ],
    "xlsx": [
        write("make.py", XLSX),
        script("build/make.py", expect=("q3.xlsx",)),
        script("scripts/recalc.py", "build/q3.xlsx", "60", timeout_s=120),
    ],
}
