"""Prompts are package data, versioned and reviewed like code: every text the model is sent lives here.

Each text is ``orchestrator/prompts/<name>.md`` (``name`` may name a sub-folder: ``tools/read_file``). This module
is the only reader of these files. :func:`load_prompt` gives a text as it is; :func:`render_prompt` fills it as a
Jinja2 template in a sandboxed environment (``{{ field }}``, ``{% if %}`` for optional lines; a missing field is an
error, never an empty string; values are never rendered as templates themselves). Rendering adds and removes
nothing around the text: a separator the caller needs (a leading newline) stays in the caller.

The folders: ``tools/`` holds tool descriptions (``tools/<tool>.md``) and argument descriptions
(``tools/<tool>.<field>.md``, or ``tools/args.<field>.md`` when tools share one), read with :func:`tool_text`;
``notes/`` the notes, hints and cut markers inside tool results; ``errors/`` the errors tools answer with;
``reflect/`` the feedback a re-plan or a retry gets. The rest are the system prompts and requests.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from jinja2 import StrictUndefined, Template
from jinja2.sandbox import SandboxedEnvironment

_ENV = SandboxedEnvironment(
    undefined=StrictUndefined, autoescape=False, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True
)


@cache
def load_prompt(name: str) -> str:
    """The text of ``orchestrator/prompts/<name>.md``, without surrounding blank space."""
    *folders, file = name.split("/")
    return resources.files(__package__).joinpath(*folders, f"{file}.md").read_text(encoding="utf-8").strip()


@cache
def _template(name: str) -> Template:
    return _ENV.from_string(load_prompt(name))


def render_prompt(name: str, /, **fields: object) -> str:
    """The prompt ``name`` rendered with ``fields``; a field the template uses but is not given raises (our bug)."""
    return _template(name).render(**fields)


def tool_text(name: str) -> str:
    """A tool's description (``read_file``) or an argument's (``read_file.path``, ``args.timeout_s``)."""
    return load_prompt(f"tools/{name}")
