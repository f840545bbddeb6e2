"""Spanish, Portuguese, French and Italian read as English by machine translation (Apertium, Debian's packages).

A word-by-word dictionary reading (:mod:`orchestrator.select.european`) misses what people type: conjugated verbs
("desaparece"), words its small dictionaries lack ("semana") and idiom ("se da de alta"). Apertium, a rule-based
translation engine, reads them as a sentence: "la gente se da de alta en la app, la usa una semana y desaparece" ->
"The people gives of tall in the app, uses it a week and disappears". Spanish is translated to English directly
(``apertium-eng-spa``); Portuguese, French and Italian go through Spanish (``apertium-es-pt``, ``apertium-fr-es``,
``apertium-spa-ita``), the pairs Debian ships. German and Dutch keep the dictionary reading (no pair to English).

Each language pair runs as one long-lived pipeline of Apertium's programs in null-flush mode: a text goes in
followed by a NUL and its translation comes out followed by a NUL, so a goal costs a few milliseconds rather than
the 50-150 ms that starting the pipeline takes. A pipeline belongs to the process that started it (a forked worker
forgets its parent's at the fork and starts its own); it is killed when it misses its deadline or answers out of
step, and the text is then read by the dictionary alone. Nothing here runs unless a text is in one of the four
languages.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path

from orchestrator.logs import get_logger

log = get_logger(__name__)

MODES_DIR = Path("/usr/share/apertium/modes")
#: Each language's way to English: one Apertium mode after another (names as Debian bookworm's packages install
#: them; the first that exists of each step's spellings is used).
ROUTES: dict[str, tuple[tuple[str, ...], ...]] = {
    "es": (("spa-eng", "es-en"),),
    "pt": (("pt-es", "por-spa"), ("spa-eng", "es-en")),
    "fr": (("fr-es", "fra-spa"), ("spa-eng", "es-en")),
    "it": (("ita-spa", "it-es"), ("spa-eng", "es-en")),
}
#: Characters of a text that are translated: the sentence encoder reads 128 tokens of a goal and 48 of a
#: description, so a long body adds only its dictionary words past this.
MAX_CHARS = 2_000
#: Seconds a pipeline may take for one text before it is killed (2,000 characters take well under one).
DEADLINE_S = 5.0
#: Seconds a pipeline is kept after its last text: the four pipelines hold about 310 MB between them (PSS, measured on
#: bookworm's packages), so they are not kept for a process's whole life.
IDLE_S = 120.0
#: A pipeline that failed this many times in a process is not started again.
MAX_FAILURES = 3
#: Part of cache keys: index entries derived with another translation are not reused.
VERSION = 3

_ESCAPED = re.compile(r"([\\^$\[\]{}/@<>])")
_UNESCAPE = re.compile(r"\\(.)", re.DOTALL)
_TAG = re.compile(r"\\<[A-Za-z0-9_]+\\>")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _escape(text: str) -> str:
    """``text`` in Apertium's stream format: its reserved characters escaped, control characters (a NUL would end
    the text early) made blanks."""
    return _ESCAPED.sub(r"\\\1", _CONTROL.sub(" ", text))


def _unescape(stream: str) -> str:
    """Plain text of a pipeline's output: escapes undone, and the odd analysis tag a pair lets through ("<prn>")
    left out."""
    return _UNESCAPE.sub(r"\1", _TAG.sub(" ", stream))


def _mode_file(spellings: tuple[str, ...]) -> Path | None:
    return next((p for name in spellings if (p := MODES_DIR / f"{name}.mode").is_file()), None)


@cache
def _pipeline_command(mode: Path) -> str | None:
    """The shell pipeline of ``mode`` with every program in null-flush mode, as Apertium itself writes it."""
    if shutil.which("apertium-wblank-mode") is None or shutil.which("bash") is None:
        return None
    try:
        done = subprocess.run(
            ["apertium-wblank-mode", "-z", str(mode)], capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


@cache
def route(language: str) -> tuple[Path, ...] | None:
    """The mode files that take ``language`` to English, or ``None`` when a pair is not installed."""
    steps = ROUTES.get(language)
    if steps is None:
        return None
    modes = [_mode_file(spellings) for spellings in steps]
    if any(m is None or _pipeline_command(m) is None for m in modes):
        return None
    return tuple(m for m in modes if m is not None)


def available_languages() -> tuple[str, ...]:
    return tuple(language for language in ROUTES if route(language) is not None)


class PipelineFailed(Exception):
    """A pipeline died, missed its deadline or answered out of step."""


@dataclass
class _Pipeline:
    mode: Path
    #: The shell pipeline it runs: the mode's own (``None``) or another made from it (the analyser alone).
    command: str | None = None
    process: subprocess.Popen[bytes] | None = None
    failures: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    idle: threading.Timer | None = None

    def translate(self, text: str) -> str:
        with self.lock:
            process = self._running()
            try:
                answer = self._exchange(process, text)
            except (OSError, ValueError, PipelineFailed) as error:  # ValueError: a closed pipe, a text it cannot encode
                self.failures += 1
                self.stop()
                raise PipelineFailed(f"{self.mode.stem}: {error}") from error
            self._stop_when_idle()
            return answer

    def _stop_when_idle(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
        self.idle = threading.Timer(IDLE_S, self._expire)
        self.idle.daemon = True
        self.idle.start()

    def _expire(self) -> None:
        with self.lock:
            self.stop()

    def _running(self) -> subprocess.Popen[bytes]:
        if self.process is not None and self.process.poll() is None:
            return self.process
        self.stop()
        if self.failures >= MAX_FAILURES:
            raise PipelineFailed(f"{self.mode.stem} failed {self.failures} times; not started again")
        command = self.command or _pipeline_command(self.mode)
        if command is None:
            raise PipelineFailed(f"{self.mode.stem}: no pipeline")
        # bash runs the mode's pipeline with its two parameters: -n (unknown words without a mark), no tagger option.
        self.process = subprocess.Popen(
            ["bash", "-c", command, "apertium", "-n", ""],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        return self.process

    def _exchange(self, process: subprocess.Popen[bytes], text: str) -> str:
        assert process.stdin is not None and process.stdout is not None
        # The newline matters: the bilingual lookup reads one character past a word before it flushes.
        process.stdin.write(_escape(text).encode(errors="replace") + b"\n\0")  # a lone surrogate too
        process.stdin.flush()
        out = process.stdout.fileno()
        deadline = time.monotonic() + DEADLINE_S
        received = bytearray()
        while b"\0" not in received:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                raise PipelineFailed(f"no answer in {DEADLINE_S} s")
            chunk = os.read(out, 65536)
            if not chunk:
                raise PipelineFailed("the pipeline ended")
            received += chunk
        answer, _, rest = bytes(received).partition(b"\0")
        if rest:
            raise PipelineFailed("more than one answer to one text")
        return _unescape(answer.decode(errors="replace")).strip()

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        global _stopped_cpu_s
        _stopped_cpu_s += _group_cpu_seconds(process.pid)
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.SubprocessError):
            process.wait(timeout=5)


def _group_cpu_seconds(group: int) -> float:
    """CPU time (user and system) of the live processes of one process group, from ``/proc``."""
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group:  # fields after the command: state, ppid, pgrp, ... utime (12th), stime (13th)
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


_stopped_cpu_s = 0.0


def cpu_seconds() -> float:
    """CPU time the translation pipelines of this process have used so far (they are other processes, which a
    process's own CPU clock does not count): for ``bench selection``."""
    return _stopped_cpu_s + sum(
        _group_cpu_seconds(p.process.pid)
        for p in list(_pipelines.values())
        if p.process is not None
    )


_pipelines: dict[Path, _Pipeline] = {}
_pipelines_lock = threading.Lock()


def _pipeline(mode: Path, command: str | None = None) -> _Pipeline:
    """The pipeline of ``mode`` (or of ``command``, made from it), kept by the file it reads."""
    key = Path(command.split("'")[1]) if command else mode
    with _pipelines_lock:
        return _pipelines.setdefault(key, _Pipeline(mode, command))


def _forget_parents_pipelines() -> None:
    """In a forked child: the parent's pipelines (and a lock another thread may have held at the fork) are the
    parent's; the child starts its own."""
    global _pipelines_lock, _stopped_cpu_s
    _pipelines.clear()
    _pipelines_lock = threading.Lock()
    _stopped_cpu_s = 0.0


os.register_at_fork(after_in_child=_forget_parents_pipelines)


@atexit.register
def stop_all() -> None:
    for pipeline in list(_pipelines.values()):
        pipeline.stop()


def to_english(text: str, language: str) -> str | None:
    """``text`` (its first :data:`MAX_CHARS` characters) translated from ``language`` to English; ``None`` when
    that language has no installed route or its pipeline failed (logged), and for a text with nothing to read."""
    sample = text[:MAX_CHARS].strip()
    if not sample or route(language) is None:
        return None
    try:
        return _translated(sample, language) or None
    except PipelineFailed as error:
        log.warning("select.translation_failed", language=language, error=str(error))
        return None


@lru_cache(maxsize=512)
def _translated(sample: str, language: str) -> str:
    """Remembered: a goal is read for words and for meaning, a skill's description for both too. A failure raises,
    so it is not remembered."""
    for mode in route(language) or ():
        sample = _pipeline(mode).translate(sample)
    return re.sub(r"\s+", " ", sample).strip()


@cache
def _analyser_command(language: str) -> str | None:
    """The first program of ``language``'s route alone: its morphological analyser (``lt-proc -z '...automorf.bin'``),
    which says of each word whether the language knows it."""
    modes = route(language)
    command = _pipeline_command(modes[0]) if modes else None
    first = command.split(" | ", 1)[0].strip() if command else ""
    is_analyser = first.startswith("lt-proc ") and first.count("'") == 2 and first.endswith(".automorf.bin'")
    return first if is_analyser else None


_ANALYSIS = re.compile(r"\^([^/$^]*)/([^$]*)\$")


def known_words(words: list[str], language: str) -> set[str] | None:
    """Those of ``words`` (letters only) that ``language``'s analyser knows; ``None`` when it is not installed or
    failed (logged)."""
    modes, command = route(language), _analyser_command(language)
    if not modes or command is None:
        return None
    if not words:
        return set()
    try:
        # A full stop between words keeps the analyser from reading two neighbours as one multi-word entry.
        answer = _pipeline(modes[0], command).translate(" .\n".join(words))
    except PipelineFailed as error:
        log.warning("select.analysis_failed", language=language, error=str(error))
        return None
    return {m.group(1) for m in _ANALYSIS.finditer(answer) if not m.group(2).startswith("*")}


#: A sentence in each language and an English word its translation must have: the app image's build checks them.
SAMPLES: dict[str, tuple[str, str]] = {
    "es": ("la gente se registra y a la semana desaparece", "disappears"),
    "pt": ("quero parar de perder horas no celular", "hours"),
    "fr": ("je veux sauvegarder ce lien pour plus tard", "later"),
    "it": ("il mio capo vuole un grafico delle vendite", "boss"),
}


def untranslated_languages() -> list[str]:
    """The languages whose sample does not come out in English (a pair missing or broken)."""
    return [
        language
        for language, (sentence, word) in SAMPLES.items()
        if word not in (to_english(sentence, language) or "").lower().split()
    ]
