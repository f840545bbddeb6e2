#!/usr/bin/env python3
"""Describes a .docx or .pdf report as JSON: title, headings, counts of paragraphs, tables, images and pages.

Args: {"path": "build/report.docx"} on stdin (or as the only command-line argument).
"""
import json
import sys
from pathlib import PurePosixPath

MAX_LISTED = 60


def fail(message):
    sys.stderr.write(f"inspect_report: {message}\n")
    print(json.dumps({"ok": False, "error": message}))
    sys.exit(2)


def read_args():
    text = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    try:
        args = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        fail(f"args are not valid JSON: {exc}")
    if not isinstance(args, dict) or not isinstance(args.get("path"), str):
        fail('args must be {"path": "build/NAME.docx"} (or a .pdf)')
    path = PurePosixPath(args["path"])
    if ".." in path.parts or (path.is_absolute() and path.parts[1:2] != ("inputs",)):
        fail(f"path {args['path']!r} must be under build/ or /inputs/")
    if path.suffix.lower() not in (".docx", ".pdf"):
        fail(f"path {args['path']!r} must be a .docx or .pdf file")
    return str(path)


def describe_docx(path):
    from docx import Document

    doc = Document(path)
    headings, title, words = [], "", 0
    for paragraph in doc.paragraphs:
        words += len(paragraph.text.split())
        name = paragraph.style.name if paragraph.style is not None else ""
        if name == "Title" and not title:
            title = paragraph.text
        elif name.startswith("Heading"):
            headings.append(paragraph.text)
    return {"title": title, "headings": headings[:MAX_LISTED], "paragraphs": len(doc.paragraphs), "words": words,
            "tables": len(doc.tables), "images": len(doc.inline_shapes)}


def describe_pdf(path):
    from pypdf import PdfReader

    reader = PdfReader(path)
    text = "\n".join(page.extract_text() or "" for page in reader.pages)
    title = (reader.metadata.title if reader.metadata else None) or ""
    return {"title": title, "pages": len(reader.pages), "words": len(text.split()), "preview": text[:400]}


def main():
    path = read_args()
    try:
        info = describe_pdf(path) if path.lower().endswith(".pdf") else describe_docx(path)
    except FileNotFoundError:
        fail(f"report not found: {path}")
    except Exception as exc:  # the libraries raise many types for a file that is not a document
        fail(f"{path} does not open: {type(exc).__name__}: {exc}")
    print(json.dumps({"ok": True, "path": path, **info}, ensure_ascii=False))


if __name__ == "__main__":
    main()
