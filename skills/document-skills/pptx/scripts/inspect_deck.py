#!/usr/bin/env python3
"""Prints the slide count and titles of a .pptx deck as JSON."""
import json
import sys

from pptx import Presentation


def main():
    args = json.load(sys.stdin)
    deck = Presentation(args["path"])
    titles = []
    for slide in deck.slides:
        title = slide.shapes.title
        titles.append(title.text if title is not None else "")
    print(json.dumps({"path": args["path"], "slides": len(titles), "titles": titles}))


if __name__ == "__main__":
    main()
