#!/usr/bin/env python3
"""Builds an .xlsx workbook with live formulas (row formulas, totals rows, native charts) from a JSON spec.

Args: a JSON object on stdin (or as the only command-line argument): {"spec": PATH, "output": PATH?, "brand":
PATH?} or the spec inline as {"workbook": {...}, "output": PATH}. Result: JSON on stdout. Bad input exits 2 with
{"ok": false, "error": ...} on stdout and the reason on stderr.
"""
import csv
import json
import math
import re
import sys
from pathlib import PurePosixPath

MAX_SHEETS = 20
MAX_ROWS = 50_000
MAX_COLUMNS = 100
MAX_INPUT_BYTES = 20 * 1024 * 1024
SHEET_NAME = re.compile(r"^[^\[\]:*?/\\']{1,31}$")
FUNCTIONS = {"SUM", "AVERAGE", "MIN", "MAX", "COUNT", "COUNTA", "ROUND", "IF", "ABS", "MEDIAN", "SUMIF",
             "COUNTIF", "AVERAGEIF", "IFERROR", "PRODUCT"}
TOTAL_FUNCTIONS = {"SUM", "AVERAGE", "MIN", "MAX", "COUNT", "MEDIAN"}
PLACEHOLDER = re.compile(r"\{(row|first|last)\}")
KNOWN_ARGS = {"spec", "workbook", "output", "brand"}
KNOWN_SHEET = {"name", "columns", "rows", "csv", "formulas", "totals", "number_formats", "widths", "chart", "freeze"}


class BadInput(Exception):
    pass


def fail(message):
    sys.stderr.write(f"build_workbook: {message}\n")
    print(json.dumps({"ok": False, "error": message}))
    sys.exit(2)


def read_args():
    text = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    try:
        args = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise BadInput(f"args are not valid JSON: {exc}") from exc
    if not isinstance(args, dict):
        raise BadInput('args must be a JSON object such as {"spec": "build/workbook.json"}')
    unknown = sorted(set(args) - KNOWN_ARGS)
    if unknown:
        raise BadInput(f"unknown args {unknown}; known: {sorted(KNOWN_ARGS)}")
    if ("spec" in args) == ("workbook" in args):
        raise BadInput("give exactly one of 'spec' (a path such as build/workbook.json) or 'workbook' (the spec)")
    return args


def input_path(value, what):
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{what} must be a path")
    path = PurePosixPath(value)
    if ".." in path.parts:
        raise BadInput(f"{what} {value!r} must not contain '..'")
    if path.is_absolute() and path.parts[1:2] != ("inputs",):
        raise BadInput(f"{what} {value!r}: absolute paths must be under /inputs/")
    return str(path)


def output_path(value):
    path = PurePosixPath(value if isinstance(value, str) else "")
    if path.is_absolute() or ".." in path.parts or path.parts[:1] != ("build",) or len(path.parts) < 2:
        raise BadInput(f"output {value!r} must be a path under build/, e.g. build/workbook.xlsx")
    if path.suffix.lower() != ".xlsx":
        raise BadInput(f"output {value!r} must end with .xlsx")
    return str(path)


def load_json(path, what):
    try:
        with open(input_path(path, what), encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError as exc:
        raise BadInput(f"{what} not found: {path}") from exc
    except (OSError, ValueError) as exc:
        raise BadInput(f"{what} {path} is not valid JSON: {exc}") from exc


def cell_value(value):
    """A CSV cell as a number when it is one (so formulas can add it up), else as text."""
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        return text or None
    if not math.isfinite(number):
        return text
    return int(number) if re.fullmatch(r"[+-]?\d+", text) else number


def load_csv(path):
    path = input_path(path, "csv")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError as exc:
        raise BadInput(f"CSV file not found: {path}") from exc
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_INPUT_BYTES:
        raise BadInput(f"{path} is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path} is not UTF-8 text") from exc
    try:
        delimiter = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|").delimiter
    except csv.Error:
        delimiter = ","
    rows = [r for r in csv.reader(text.splitlines(), delimiter=delimiter) if any(c.strip() for c in r)]
    if not rows:
        raise BadInput(f"{path} is empty")
    return [c.strip() for c in rows[0]], [[cell_value(c) for c in row] for row in rows[1:]]


def column_letter(index):
    from openpyxl.utils import get_column_letter

    return get_column_letter(index + 1)


def expand(template, columns, row, first, last, where):
    if not isinstance(template, str) or not template.startswith("="):
        raise BadInput(f"{where}: a formula must be text starting with '=', got {template!r}")
    check_formula(template, where)

    def by_name(match):
        name = match.group(1)
        if name not in columns:
            raise BadInput(f"{where}: [{name}] is not a column; columns: {columns}")
        return column_letter(columns.index(name))

    text = re.sub(r"\[([^\[\]]+)\]", by_name, template)
    return PLACEHOLDER.sub(lambda m: str({"row": row, "first": first, "last": last}[m.group(1)]), text)


def check_formula(formula, where):
    if "|" in formula or "://" in formula or len(formula) > 1000:
        raise BadInput(f"{where}: formulas may not link to other programs or files: {formula[:80]!r}")
    depth = 0
    for char in formula:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            break
    if depth != 0:
        raise BadInput(f"{where}: unbalanced parentheses in {formula!r}")
    for name in re.findall(r"([A-Za-z][A-Za-z0-9.]*)\s*\(", formula):
        if name.upper() not in FUNCTIONS:
            raise BadInput(f"{where}: unknown function {name} in {formula!r}; use one of {sorted(FUNCTIONS)}")


def sheet_rows(sheet, where):
    """The columns, the rows and whether the rows are data (from a CSV: text, never formulas)."""
    if "csv" in sheet:
        if "rows" in sheet:
            raise BadInput(f"{where}: give 'rows' or 'csv', not both")
        header, rows = load_csv(sheet["csv"])
        columns = sheet.get("columns", header)
        if columns != header:
            raise BadInput(f"{where}: 'columns' must match the CSV header {header} (or be left out)")
        return columns, rows, True
    columns, rows = sheet.get("columns"), sheet.get("rows", [])
    if not isinstance(columns, list) or not columns or not all(isinstance(c, str) and c for c in columns):
        raise BadInput(f"{where}: 'columns' must be a non-empty list of column names")
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise BadInput(f"{where}: 'rows' must be a list of lists (one list of cells per row)")
    return columns, rows, False


def check_sheet(sheet, index, names):
    where = f"sheet {index + 1}"
    if not isinstance(sheet, dict):
        raise BadInput(f"{where} must be an object with 'name' and 'columns'/'rows' or 'csv'")
    unknown = sorted(set(sheet) - KNOWN_SHEET)
    if unknown:
        raise BadInput(f"{where}: unknown keys {unknown}; known: {sorted(KNOWN_SHEET)}")
    name = sheet.get("name", f"Sheet{index + 1}")
    if not isinstance(name, str) or not SHEET_NAME.match(name):
        raise BadInput(f"{where}: name {name!r} must be 1-31 characters without [ ] : * ? / \\ '")
    if name.lower() in names:
        raise BadInput(f"{where}: sheet name {name!r} is used twice")
    names.add(name.lower())
    return f"sheet {name!r}", name


def write_sheet(ws, sheet, where, brand):
    from openpyxl.styles import Alignment, Font, PatternFill

    columns, rows, data_only = sheet_rows(sheet, where)
    formulas = sheet.get("formulas", {})
    if not isinstance(formulas, dict):
        raise BadInput(f"{where}: 'formulas' maps a column name to a row formula such as '=[Q1]{{row}}+[Q2]{{row}}'")
    columns = columns + [c for c in formulas if c not in columns]
    if len(columns) > MAX_COLUMNS or len(rows) > MAX_ROWS:
        raise BadInput(f"{where}: at most {MAX_COLUMNS} columns and {MAX_ROWS} rows")
    first, last = 2, len(rows) + 1
    for name, template in formulas.items():  # checked even when there are no rows yet
        expand(template, columns, first, first, max(first, last), f"{where} [{name}]")
    ws.append(columns)
    for cell in ws[1]:  # the header: bold, white on the primary colour, centred over its column
        cell.font = Font(bold=True, color="FFFFFF", name=brand["font"])
        cell.fill = PatternFill("solid", fgColor=brand["primary"])
        cell.alignment = Alignment(horizontal="center", vertical="center")
    count = 0
    for number, row in enumerate(rows, start=first):
        if len(row) > len(columns):
            raise BadInput(f"{where}: row {number - 1} has {len(row)} cells for {len(columns)} columns")
        values = list(row) + [None] * (len(columns) - len(row))
        for index, value in enumerate(values):
            if data_only:
                continue
            if isinstance(value, str) and value.startswith("="):
                values[index] = expand(value, columns, number, first, last, f"{where} row {number - 1}")
                count += 1
            elif value is not None and not isinstance(value, (str, int, float, bool)):
                raise BadInput(f"{where}: row {number - 1} cell {index + 1} must be text, a number or null")
        for name, template in formulas.items():
            values[columns.index(name)] = expand(template, columns, number, first, last, f"{where} [{name}]")
            count += 1
        ws.append(values)
        if data_only:
            as_text(ws[number], row)
    totals_row = write_totals(ws, sheet.get("totals"), columns, first, last, where)
    count += len(totals_row)
    body_fonts(ws, first, last + (1 if totals_row else 0), brand)
    apply_formats(ws, sheet, columns, rows, totals_row, where)
    if sheet.get("freeze", True):
        ws.freeze_panes = "A2"
    chart = add_chart(ws, sheet.get("chart"), columns, first, last, where) if sheet.get("chart") else None
    return {"name": ws.title, "columns": columns, "rows": len(rows), "formulas": count,
            "totals_row": last + 1 if totals_row else None, "totals": totals_row, "chart": chart}


def as_text(cells, row):
    """CSV cells that look like formulas ("=HYPERLINK(...)", "=cmd|...") stay inert text."""
    for cell, value in zip(cells, row):
        if isinstance(value, str) and value.startswith("="):
            cell.data_type = "s"


def write_totals(ws, totals, columns, first, last, where):
    if not totals:
        return {}
    if not isinstance(totals, dict) or not isinstance(totals.get("columns"), list) or not totals["columns"]:
        raise BadInput(f"{where}: 'totals' needs 'columns' (names to total) and may give 'label' and 'function'")
    function = str(totals.get("function", "SUM")).upper()
    if function not in TOTAL_FUNCTIONS:
        raise BadInput(f"{where}: totals function {function} is not one of {sorted(TOTAL_FUNCTIONS)}")
    if last < first:
        raise BadInput(f"{where}: a totals row needs at least one data row")
    from openpyxl.styles import Border, Font, Side

    row = last + 1
    ws.cell(row=row, column=1, value=str(totals.get("label", "Total"))).font = Font(bold=True)
    written = {}
    for name in totals["columns"]:
        if name not in columns:
            raise BadInput(f"{where}: totals column {name!r} is not a column; columns: {columns}")
        index = columns.index(name)
        if index == 0:
            raise BadInput(f"{where}: the first column holds the totals label; total another column")
        letter = column_letter(index)
        formula = f"={function}({letter}{first}:{letter}{last})"
        ws.cell(row=row, column=index + 1, value=formula).font = Font(bold=True)
        ws.cell(row=row, column=index + 1).border = Border(top=Side(style="thin"))
        written[name] = {"cell": f"{letter}{row}", "formula": formula}
    return written


def body_fonts(ws, first, last, brand):
    """Every data and totals cell in the body font and text colour (bold stays bold)."""
    from openpyxl.styles import Font

    if not brand["font"] and not brand["text"]:
        return
    for row in ws.iter_rows(min_row=first, max_row=last):
        for cell in row:
            cell.font = Font(name=brand["font"], color=brand["text"], bold=cell.font.bold)


def shown(value, fmt):
    """About the text a spreadsheet shows for a value under a number format (for fitting column widths)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "" if value is None else str(value)
    decimals = len(fmt.split(".")[1]) if "." in fmt else (0 if isinstance(value, int) else 2)
    return f"{value:,.{decimals}f}" if "," in fmt else f"{value:.{decimals}f}"


def default_format(values):
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not numbers:
        return None
    return "#,##0" if all(isinstance(v, int) for v in numbers) else "#,##0.00"


def apply_formats(ws, sheet, columns, rows, totals_row, where):
    """Number formats (given, or #,##0 / #,##0.00 for number columns) and widths that fit what each column shows,
    the totals included (they are estimated as the column's sum)."""
    formats = sheet.get("number_formats", {})
    widths = sheet.get("widths", {})
    if not isinstance(formats, dict) or not isinstance(widths, dict):
        raise BadInput(f"{where}: 'number_formats' and 'widths' map column names to a format / a width")
    for name, fmt in formats.items():
        if name not in columns or not isinstance(fmt, str):
            raise BadInput(f"{where}: number format for {name!r}: not a column, or the format is not text")
    last_row = len(rows) + 1 + (1 if totals_row else 0)
    for index, name in enumerate(columns):
        values = [row[index] if index < len(row) else None for row in rows]
        fmt = formats.get(name) or default_format(values)
        letter = column_letter(index)
        if fmt:
            for row in range(2, last_row + 1):
                ws[f"{letter}{row}"].number_format = fmt
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        texts = [shown(v, fmt or "") for v in values if not (isinstance(v, str) and v.startswith("="))]
        if name in totals_row and numbers:
            texts.append(shown(sum(numbers), fmt or ""))
        fitted = max([len(name) * 1.15, *(len(text) for text in texts)]) + 3
        if name in sheet.get("formulas", {}) or any(isinstance(v, str) and v.startswith("=") for v in values):
            fitted = max(fitted, 14)  # a formula's value is not known here: room for a 9-digit amount
        width = widths.get(name, max(8, min(60, round(fitted, 1))))
        if not isinstance(width, (int, float)) or not 1 <= width <= 100:
            raise BadInput(f"{where}: width for {name!r} must be a number from 1 to 100")
        ws.column_dimensions[letter].width = width


def add_chart(ws, chart, columns, first, last, where):
    from openpyxl.chart import BarChart, LineChart, Reference

    if not isinstance(chart, dict) or not chart.get("categories") or not chart.get("values"):
        raise BadInput(f"{where}: 'chart' needs 'categories' (a column) and 'values' (a list of columns)")
    kind = chart.get("type", "bar")
    if kind not in ("bar", "line"):
        raise BadInput(f"{where}: chart type must be 'bar' or 'line'")
    names = [chart["categories"], *chart["values"]]
    for name in names:
        if name not in columns:
            raise BadInput(f"{where}: chart column {name!r} is not a column; columns: {columns}")
    if last < first:
        raise BadInput(f"{where}: a chart needs at least one data row")
    plot = BarChart() if kind == "bar" else LineChart()
    plot.title = str(chart.get("title", ""))[:200] or None
    for name in chart["values"]:
        index = columns.index(name) + 1
        plot.add_data(Reference(ws, min_col=index, min_row=1, max_row=last), titles_from_data=True)
    category = columns.index(chart["categories"]) + 1
    plot.set_categories(Reference(ws, min_col=category, min_row=first, max_row=last))
    anchor = f"{column_letter(len(columns) + 1)}2"  # one empty column between the table and the chart
    ws.add_chart(plot, anchor)
    return {"type": kind, "anchor": anchor, "series": list(chart["values"])}


def brand_style(path):
    """Header fill, body font and text colour: the brand's when a brand file is given, else a neutral style."""
    if not path:
        return {"primary": "1F2A44", "font": None, "text": None}
    data = load_json(path, "brand file")
    try:
        primary = data["colors"]["primary"]
    except (KeyError, TypeError) as exc:
        raise BadInput(f"brand file {path} has no colors.primary") from exc
    if not isinstance(primary, str) or not re.fullmatch(r"#[0-9A-Fa-f]{6}", primary):
        raise BadInput(f"brand file {path}: colors.primary must look like #1F3A5F")
    fonts = data.get("fonts") if isinstance(data.get("fonts"), dict) else {}
    font = fonts.get("body")
    text = data["colors"].get("text") if isinstance(data["colors"], dict) else None
    return {"primary": primary[1:].upper(), "font": font[:60] if isinstance(font, str) else None,
            "text": text[1:].upper() if isinstance(text, str) and re.fullmatch(r"#[0-9A-Fa-f]{6}", text) else None}


def main():
    from openpyxl import Workbook

    try:
        args = read_args()
        spec = load_json(args["spec"], "spec") if "spec" in args else args["workbook"]
        if not isinstance(spec, dict) or not isinstance(spec.get("sheets"), list) or not spec["sheets"]:
            raise BadInput('the spec needs "sheets": [{"name": ..., "columns": [...], "rows": [[...]]}, ...]')
        if len(spec["sheets"]) > MAX_SHEETS:
            raise BadInput(f"at most {MAX_SHEETS} sheets")
        output = output_path(args.get("output") or spec.get("output") or "build/workbook.xlsx")
        brand = brand_style(args.get("brand") or spec.get("brand"))
        book = Workbook()
        book.remove(book.active)
        names, sheets = set(), []
        for index, sheet in enumerate(spec["sheets"]):
            where, name = check_sheet(sheet, index, names)
            sheets.append(write_sheet(book.create_sheet(name), sheet, where, brand))
    except BadInput as exc:
        fail(str(exc))
    # Spreadsheet apps recompute every formula when the file opens: openpyxl stores formulas without values.
    book.calculation.fullCalcOnLoad = True
    book.save(output)
    print(json.dumps({"ok": True, "output": output, "sheets": sheets,
                      "formulas": sum(s["formulas"] for s in sheets)}, ensure_ascii=False))


if __name__ == "__main__":
    main()
