"""MkDocs hook (mkdocs.yml ``hooks:``): adds the reference pages made from the code (orchestrator/cli/reference.py)
to the site each time it is built, so the CLI, settings and schema references cannot drift from the code."""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

from orchestrator.cli.reference import reference_pages


def on_files(files: Files, config: Any) -> Files:
    for path, text in reference_pages().items():
        files.append(File.generated(config, path, content=text))
    return files
