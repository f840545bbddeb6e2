#!/usr/bin/env python3
"""Describes an .xlsx workbook as JSON: sheets, sizes, header row, formulas, charts, and formula problems.

Args: {"path": "build/workbook.xlsx"} on stdin (or as the only command-line argument).
A formula problem is a reference to a cell outside the sheet's used range or to a sheet that does not exist.
"""
import json
import re
import sys
from pathlib import PurePosixPath

MAX_LISTED = 40
CELL = r"\$?([A-Z]{1,3})\$?(\d+)"
REFERENCE = re.compile(rf"(?:(?P<sheet>[A-Za-z0-9_]+|'[^']+')!)?(?P<first>{CELL})(?::(?P<last>{CELL}))?")


def fail(message):
    sys.stderr.write(f"inspect_workbook: {message}\n")
    print(json.dumps({"ok": False, "error": message}))
    sys.exit(2)


def read_args():
    text = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    try:
        args = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        fail(f"args are not valid JSON: {exc}")
    if not isinstance(args, dict) or not isinstance(args.get("path"), str):
        fail('args must be {"path": "build/NAME.xlsx"}')
    path = PurePosixPath(args["path"])
    if ".." in path.parts or (path.is_absolute() and path.parts[1:2] != ("inputs",)):
        fail(f"path {args['path']!r} must be under build/ or /inputs/")
    return str(path)


def reference_problems(book, sheet, formula):
    from openpyxl.utils import column_index_from_string

    problems = []
    text = re.sub(r'"[^"]*"', "", formula)  # string literals hold no references
    for match in REFERENCE.finditer(text):
        target = sheet
        if match.group("sheet"):
            name = match.group("sheet").strip("'")
            if name not in book.sheetnames:
                problems.append(f"refers to a missing sheet {name!r}")
                continue
            target = book[name]
        for end in ("first", "last"):
            if match.group(end) is None:
                continue
            letters, digits = re.fullmatch(CELL, match.group(end)).groups()
            if column_index_from_string(letters) > target.max_column or int(digits) > target.max_row:
                problems.append(f"{match.group(end)} is outside the used range of {target.title!r}")
    return problems


def main():
    from openpyxl import load_workbook

    path = read_args()
    try:
        book = load_workbook(path)
    except FileNotFoundError:
        fail(f"workbook not found: {path}")
    except Exception as exc:  # openpyxl raises many types for a file that is not a workbook
        fail(f"{path} does not open as a workbook: {type(exc).__name__}: {exc}")
    sheets, problems = [], []
    for sheet in book.worksheets:
        formulas = []
        for row in sheet.iter_rows():
            for cell in row:
                if cell.data_type == "f":
                    formulas.append({"cell": cell.coordinate, "formula": str(cell.value)})
                    for problem in reference_problems(book, sheet, str(cell.value)):
                        problems.append(f"{sheet.title}!{cell.coordinate} {cell.value}: {problem}")
        header = [cell.value for cell in sheet[1]] if sheet.max_row >= 1 else []
        sheets.append({"name": sheet.title, "rows": sheet.max_row, "columns": sheet.max_column,
                       "header": header, "formulas": len(formulas), "formula_cells": formulas[:MAX_LISTED],
                       "charts": len(sheet._charts)})
    print(json.dumps({"ok": not problems, "path": path, "sheets": sheets, "problems": problems[:MAX_LISTED]},
                     ensure_ascii=False, default=str))


if __name__ == "__main__":
    main()
