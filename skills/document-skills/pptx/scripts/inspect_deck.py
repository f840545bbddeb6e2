#!/usr/bin/env python3
"""Prints the slide count, titles and pictures of a .pptx deck as JSON.

Args: {"path": "build/deck.pptx"} on stdin (or as the only command-line argument).
"""
import json
import sys
from pathlib import PurePosixPath


def fail(message):
    sys.stderr.write(f"inspect_deck: {message}\n")
    print(json.dumps({"ok": False, "error": message}))
    sys.exit(2)


def read_args():
    text = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    try:
        args = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        fail(f"args are not valid JSON: {exc}")
    if not isinstance(args, dict) or not isinstance(args.get("path"), str):
        fail('args must be {"path": "build/NAME.pptx"}')
    path = PurePosixPath(args["path"])
    if ".." in path.parts or (path.is_absolute() and path.parts[1:2] != ("inputs",)):
        fail(f"path {args['path']!r} must be under build/ or /inputs/")
    return str(path)


def main():
    from pptx import Presentation
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    path = read_args()
    try:
        deck = Presentation(path)
    except FileNotFoundError:
        fail(f"deck not found: {path}")
    except Exception as exc:  # python-pptx raises many types for a file that is not a deck
        fail(f"{path} does not open as a deck: {type(exc).__name__}: {exc}")
    titles, pictures = [], []
    for slide in deck.slides:
        title = slide.shapes.title
        titles.append(title.text if title is not None else "")
        pictures.append(sum(1 for shape in slide.shapes if shape.shape_type == MSO_SHAPE_TYPE.PICTURE))
    print(json.dumps({"ok": True, "path": path, "slides": len(titles), "titles": titles, "pictures": pictures}))


if __name__ == "__main__":
    main()
