"""Render the pages of a PDF as PNGs: a contact sheet of every page (numbered), or one page at a larger size.

    python3 /opt/sandbox/render_pages.py PDF OUTDIR --sheet contact.png [--first NAME.png] [--max-pages N]
                                                    [--cell PX] [--keep-pages]
    python3 /opt/sandbox/render_pages.py PDF OUTDIR --page K [--size PX]

Runs inside the sandbox (the PDF comes from a hostile document): every page is scaled so its longer side is at
most ``--cell``/``--size`` pixels whatever size the PDF claims, and at most ``--max-pages`` pages are drawn.
Prints one JSON object: ``pages`` (in the PDF), ``rendered``, ``files`` (written, relative to OUTDIR).
"""

import argparse
import json
import math
import sys
from pathlib import Path

import pypdfium2 as pdfium
from PIL import Image, ImageDraw, ImageFont

GUTTER = 16
LABEL = 22
BACKGROUND = (230, 232, 236)
MAX_SIDE = 4096
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def render(page, longest):
    width, height = page.get_size()
    if not (math.isfinite(width) and math.isfinite(height)) or width <= 0 or height <= 0:
        return Image.new("RGB", (longest, longest * 9 // 16), "white")
    scale = longest / max(width, height)
    image = page.render(scale=scale).to_pil().convert("RGB")
    if max(image.size) > longest:  # rounding or a rotated page
        image.thumbnail((longest, longest))
    return image


def columns_for(count):
    return 1 if count == 1 else 2 if count <= 4 else 3 if count <= 9 else 4 if count <= 16 else 5


def sheet(images, total, cell):
    font = ImageFont.truetype(FONT, 14) if Path(FONT).is_file() else ImageFont.load_default()
    cols = columns_for(len(images))
    rows = math.ceil(len(images) / cols)
    cell_h = max(image.height for image in images)
    more = total - len(images)
    width = GUTTER + cols * (cell + GUTTER)
    height = GUTTER + rows * (cell_h + LABEL + GUTTER) + (LABEL if more else 0)
    canvas = Image.new("RGB", (min(width, MAX_SIDE), min(height, MAX_SIDE)), BACKGROUND)
    draw = ImageDraw.Draw(canvas)
    for number, image in enumerate(images):
        col, row = number % cols, number // cols
        x = GUTTER + col * (cell + GUTTER) + (cell - image.width) // 2
        y = GUTTER + row * (cell_h + LABEL + GUTTER)
        canvas.paste(image, (x, y))
        draw.rectangle((x - 1, y - 1, x + image.width, y + image.height), outline=(150, 150, 150))
        draw.text((x, y + image.height + 3), str(number + 1), fill=(60, 60, 60), font=font)
    if more:
        draw.text((GUTTER, height - LABEL), f"+{more} more pages not shown", fill=(60, 60, 60), font=font)
    return canvas


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("pdf")
    parser.add_argument("outdir")
    parser.add_argument("--sheet")
    parser.add_argument("--first")
    parser.add_argument("--max-pages", type=int, default=24)
    parser.add_argument("--cell", type=int, default=400)
    parser.add_argument("--keep-pages", action="store_true")
    parser.add_argument("--page", type=int)
    parser.add_argument("--size", type=int, default=1280)
    args = parser.parse_args()
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    try:
        pdf = pdfium.PdfDocument(args.pdf)
    except Exception as exc:  # noqa: BLE001 - pdfium raises its own error type for any unreadable file
        print(json.dumps({"ok": False, "error": f"cannot open {args.pdf}: {exc}"}))
        sys.exit(1)
    total = len(pdf)
    files = []
    if args.page is not None:
        if not 1 <= args.page <= total:
            print(json.dumps({"ok": False, "error": f"page {args.page} does not exist (the PDF has {total})"}))
            sys.exit(2)
        name = f"page-{args.page}.png"
        render(pdf[args.page - 1], max(16, min(args.size, MAX_SIDE))).save(out / name, optimize=True)
        print(json.dumps({"ok": True, "pages": total, "rendered": 1, "files": [name]}))
        return
    cell = max(16, min(args.cell, 800))
    shown = [render(pdf[index], cell) for index in range(min(total, max(1, args.max_pages)))]
    if not shown:
        print(json.dumps({"ok": False, "error": f"{args.pdf} has no pages"}))
        sys.exit(1)
    if args.sheet:
        sheet(shown, total, cell).save(out / args.sheet, optimize=True)
        files.append(args.sheet)
    if args.first:
        shown[0].save(out / args.first, optimize=True)
        files.append(args.first)
    if args.keep_pages:
        for number, image in enumerate(shown, start=1):
            image.save(out / f"page-{number}.png", optimize=True)
            files.append(f"page-{number}.png")
    print(json.dumps({"ok": True, "pages": total, "rendered": len(shown), "files": files}))


if __name__ == "__main__":
    main()
