#!/usr/bin/env python3
"""Summarises a CSV file (per-column statistics, optional group totals) and can draw a bar chart PNG.

Args: a JSON object on stdin (or as the only command-line argument). Result: JSON on stdout.
Bad input exits 2 with {"ok": false, "error": ...} on stdout and the reason on stderr.
"""
import csv
import io
import json
import math
import statistics
import sys
from pathlib import PurePosixPath

MAX_BYTES = 20 * 1024 * 1024
MAX_COLUMNS = 200
MAX_GROUPS = 1000
CHART_MAX_BARS = 20
TOP_VALUES = 5
KNOWN_ARGS = {"csv", "output", "group_by", "value", "chart", "chart_title", "brand", "delimiter"}


class BadInput(Exception):
    pass


def fail(message, code=2):
    sys.stderr.write(f"summarize: {message}\n")
    print(json.dumps({"ok": False, "error": message}))
    sys.exit(code)


def read_args():
    text = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    try:
        args = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise BadInput(f"args are not valid JSON: {exc}") from exc
    if not isinstance(args, dict):
        raise BadInput("args must be a JSON object such as {\"csv\": \"/inputs/sales.csv\"}")
    unknown = sorted(set(args) - KNOWN_ARGS)
    if unknown:
        raise BadInput(f"unknown args {unknown}; known: {sorted(KNOWN_ARGS)}")
    if not isinstance(args.get("csv"), str) or not args["csv"].strip():
        raise BadInput("'csv' is required: the path of the CSV file, e.g. /inputs/sales.csv")
    for key in ("output", "group_by", "value", "chart", "chart_title", "brand", "delimiter"):
        if key in args and not isinstance(args[key], str):
            raise BadInput(f"'{key}' must be a string")
    if bool(args.get("group_by")) != bool(args.get("value")):
        raise BadInput("'group_by' (the category column) and 'value' (the number column) go together")
    if args.get("chart") and not args.get("group_by"):
        raise BadInput("a chart needs 'group_by' and 'value': it draws the total of 'value' per group")
    if "delimiter" in args and len(args["delimiter"]) != 1:
        raise BadInput("'delimiter' must be a single character")
    return args


def input_path(value, what):
    path = PurePosixPath(value)
    if ".." in path.parts:
        raise BadInput(f"{what} {value!r} must not contain '..'")
    if path.is_absolute() and path.parts[1:2] != ("inputs",):
        raise BadInput(f"{what} {value!r}: absolute paths must be under /inputs/")
    return str(path)


def output_path(value, what, suffix):
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts or path.parts[:1] != ("build",) or len(path.parts) < 2:
        raise BadInput(f"{what} {value!r} must be a path under build/, e.g. build/{what}{suffix}")
    if path.suffix.lower() != suffix:
        raise BadInput(f"{what} {value!r} must end with {suffix}")
    return str(path)


def load_rows(path, delimiter):
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError as exc:
        raise BadInput(f"CSV file not found: {path}") from exc
    except IsADirectoryError as exc:
        raise BadInput(f"{path} is a folder, not a CSV file") from exc
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_BYTES:
        raise BadInput(f"{path} is larger than {MAX_BYTES // (1024 * 1024)} MiB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path} is not UTF-8 text (byte {exc.start})") from exc
    if not text.strip():
        raise BadInput(f"{path} is empty")
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    try:
        rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    except csv.Error as exc:
        raise BadInput(f"{path} is not readable as CSV: {exc}") from exc
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if not rows:
        raise BadInput(f"{path} has no header row")
    header = [cell.strip() for cell in rows[0]]
    if len(header) > MAX_COLUMNS:
        raise BadInput(f"{path} has {len(header)} columns, more than {MAX_COLUMNS}")
    if any(not name for name in header):
        raise BadInput(f"{path}: every column needs a name in the header row")
    if len(set(header)) != len(header):
        raise BadInput(f"{path}: column names repeat in the header row: {header}")
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise BadInput(f"{path}: data row {number} has {len(row)} cells, the header has {len(header)}")
    return header, rows[1:], delimiter


def as_number(cell):
    try:
        value = float(cell.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def tidy(value):
    value = round(value, 6)
    return int(value) if value == int(value) and abs(value) < 2**53 else value


def describe(name, cells):
    present = [cell.strip() for cell in cells if cell.strip()]
    numbers = [as_number(cell) for cell in present]
    column = {"name": name, "count": len(present), "missing": len(cells) - len(present)}
    if present and all(n is not None for n in numbers):
        column.update(type="number", sum=tidy(math.fsum(numbers)), mean=tidy(statistics.fmean(numbers)),
                      min=tidy(min(numbers)), max=tidy(max(numbers)), median=tidy(statistics.median(numbers)))
    else:
        counts = {}
        for cell in present:
            counts[cell] = counts.get(cell, 0) + 1
        top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:TOP_VALUES]
        column.update(type="text", distinct=len(counts), top=[{"value": v, "count": c} for v, c in top])
    return column


def group_totals(header, rows, by, value):
    for name in (by, value):
        if name not in header:
            raise BadInput(f"column {name!r} is not in the CSV; columns: {header}")
    key_at, value_at = header.index(by), header.index(value)
    groups = {}
    for number, row in enumerate(rows, start=2):
        cell = row[value_at].strip()
        if not cell:
            continue
        amount = as_number(cell)
        if amount is None:
            raise BadInput(f"column {value!r} must hold numbers; data row {number} has {cell!r}")
        groups.setdefault(row[key_at].strip() or "(blank)", []).append(amount)
    if len(groups) > MAX_GROUPS:
        raise BadInput(f"column {by!r} has {len(groups)} distinct values, more than {MAX_GROUPS}")
    out = [{"key": key, "count": len(v), "sum": tidy(math.fsum(v)), "mean": tidy(statistics.fmean(v))}
           for key, v in groups.items()]
    out.sort(key=lambda g: (-g["sum"], g["key"]))
    return {"by": by, "value": value, "groups": out}


def brand_colours(path):
    if not path:
        return "#1F2A44", "#222222"
    try:
        with open(input_path(path, "brand"), encoding="utf-8") as handle:
            colours = json.load(handle)["colors"]
        return colours["primary"], colours.get("text", "#222222")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadInput(f"brand file {path} is not usable ({type(exc).__name__}: {exc}); "
                       "give a brand.json with colors.primary") from exc


def draw_chart(totals, path, title, brand):
    from PIL import Image, ImageColor, ImageDraw, ImageFont

    bar_colour, text_colour = brand_colours(brand)
    try:
        bar_rgb, text_rgb = ImageColor.getrgb(bar_colour), ImageColor.getrgb(text_colour)
    except ValueError as exc:
        raise BadInput(f"brand colour is not a colour: {exc}") from exc
    groups = totals["groups"][:CHART_MAX_BARS]
    width, height, left, right, top, bottom = 960, 540, 90, 30, 70, 110
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    title_font, font = ImageFont.load_default(size=24), ImageFont.load_default(size=14)
    draw.text((left, 20), title or f"{totals['value']} by {totals['by']}", fill=text_rgb, font=title_font)
    values = [g["sum"] for g in groups]
    high, low = max(max(values), 0), min(min(values), 0)
    span = (high - low) or 1
    plot_h = height - top - bottom
    zero_y = top + plot_h * high / span
    draw.line((left, zero_y, width - right, zero_y), fill=text_rgb, width=1)
    slot = (width - left - right) / max(len(groups), 1)
    for index, group in enumerate(groups):
        x0 = left + index * slot + slot * 0.15
        x1 = left + (index + 1) * slot - slot * 0.15
        y = zero_y - plot_h * group["sum"] / span
        draw.rectangle((x0, min(y, zero_y), x1, max(y, zero_y)), fill=bar_rgb)
        label = f"{group['sum']:,.2f}".rstrip("0").rstrip(".")
        draw.text(((x0 + x1) / 2, min(y, zero_y) - 4), label, fill=text_rgb, font=font, anchor="mb")
        name = group["key"] if len(group["key"]) <= 14 else group["key"][:13] + "…"
        draw.text(((x0 + x1) / 2, height - bottom + 12), name, fill=text_rgb, font=font, anchor="mt")
    image.save(path, format="PNG")
    return {"path": path, "bars": len(groups), "width": width, "height": height}


def main():
    try:
        args = read_args()
        source = input_path(args["csv"], "csv")
        output = output_path(args.get("output", "build/summary.json"), "summary", ".json")
        chart = output_path(args["chart"], "chart", ".png") if args.get("chart") else None
        header, rows, delimiter = load_rows(source, args.get("delimiter"))
        columns = [describe(name, [row[i] for row in rows]) for i, name in enumerate(header)]
        summary = {"source": PurePosixPath(source).name, "rows": len(rows), "delimiter": delimiter,
                   "columns": columns}
        if args.get("group_by"):
            summary["totals"] = group_totals(header, rows, args["group_by"], args["value"])
        if chart:
            if not summary["totals"]["groups"]:
                raise BadInput(f"column {args['value']!r} has no numbers to chart")
            summary["chart"] = draw_chart(summary["totals"], chart, args.get("chart_title"), args.get("brand"))
    except BadInput as exc:
        fail(str(exc))
    with open(output, "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2, ensure_ascii=False)
    print(json.dumps({"ok": True, "output": output, **summary}, ensure_ascii=False))


if __name__ == "__main__":
    main()
