"""Japanese read as the English words a dictionary gives for it.

Hiragana and katakana carry much of a Japanese text's meaning ("テストがたまに落ちる": test, sometimes, fall), and
neither the character pairs of the lexical index nor the English sentence encoder can read them. A Japanese run is
cut into words by SudachiPy (Works Applications' analyzer, Apache-2.0) with its ``sudachidict_small`` dictionary,
each word taken in its dictionary form ("落ちる" for "落ち"), and looked up in JMdict (EDRDG, CC-BY-SA 4.0) as
compiled into SQLite by the ``jamdict-data`` package. Both dictionaries ship inside installed packages: nothing is
downloaded. Both are loaded once per process and only when a text has kana; without them a text is left as it is
(logged once) and Chinese-dictionary reading of its kanji (:mod:`orchestrator.select.gloss`) stays the fallback.
"""

from __future__ import annotations

import importlib.util
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

from orchestrator.logs import get_logger

_log = get_logger("orchestrator.select")

#: Bumped whenever the reading changes: it names the index cache (``gloss.reading_tag``), so no cache keeps the old
#: terms and vectors of Japanese skills.
READING_VERSION = "2"
#: The ``ja`` extra of pyproject.toml: SudachiPy, its small dictionary and the compiled JMdict.
_PACKAGES = ("sudachipy", "sudachidict_small", "jamdict_data")
#: A Japanese goal and English words its reading must have (the app image's build checks it, :func:`unavailable`):
#: "落ちて" read as 落ちる, and compounds only the analyzer and JMdict together give (文字 + 起こし: transcription).
SAMPLE = ("テストがたまに落ちて、文字起こしも議事録もない", ("fall", "transcription", "minutes"))
_KANA = re.compile(r"[\u3041-\u309f\u30a0-\u30ff\uff66-\uff9f]")
#: A run the analyzer reads: kanji, kana, Japanese punctuation and marks. Latin letters and digits mixed into a
#: Japanese sentence ("mp3にして") are outside the runs and stay as they are.
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
#: The share of kana among a text's CJK letters from which it is read as Japanese. In C29 and D29 the Japanese goals
#: have 41 % or more and the Japanese skills 22 % or more; Chinese skills that quote Japanese words (one teaches
#: Japanese vocabulary) 0.2-6 %. A heading of kanji compounds and one particle ("営業日報の自動作成") has 12 %.
KANA_SHARE = 0.1
_RUN = re.compile(r"[\u3000-\u303f\u3041-\u309f\u30a0-\u30ff\u3400-\u9fff\uf900-\ufaff\uff66-\uff9f]+")
#: Japanese characters read per text: a skill's body is already cut at 20,000 characters; a hostile megabyte goal
#: is read only this far (measured: 0.1 s of CPU for a body with 5,800 Japanese characters, first use).
MAX_CHARS = 20_000
#: The analyzer refuses inputs above about 49 kB: runs are fed in pieces of at most this many characters.
_PIECE = 2_000
#: Words joined when the dictionary knows the compound ("文字" + "起こし" -> "文字起こし": transcription).
_MAX_JOIN = 4
#: Parts of speech that carry no meaning of their own: particles, auxiliaries, symbols, conjunctions, pronouns.
_GRAMMAR = ("助詞", "助動詞", "補助記号", "記号", "空白", "接続詞", "感動詞", "連体詞", "代名詞")
#: Prefixes and suffixes count inside a compound the dictionary knows ("お願い", "議事録"), not alone ("お": cord).
_AFFIX = ("接頭辞", "接尾辞")
#: Glosses that are grammar notes or the obvious ("to do") rather than what the text is about.
_NOISE = re.compile(r"\([^)]*\)|\[[^\]]*\]|\{[^}]*\}|\bto ")
_ENGLISH = re.compile(r"[a-z][a-z0-9-]*[a-z0-9]|[a-z]")
#: Glosses used per word, of its first (most common) sense: the first ones are the common meanings.
GLOSSES = 2
#: English words one Japanese word adds at most (a few glosses are whole phrases).
MAX_ENGLISH = 8


def has_kana(text: str) -> bool:
    return _KANA.search(text) is not None


def is_japanese(text: str) -> bool:
    """Whether ``text`` is Japanese rather than Chinese: kana make up a share of its CJK letters that Japanese
    prose always has (particles and verb endings alone give it) and a Chinese text quoting a word or two never does."""
    if not has_kana(text):
        return False
    kana = len(_KANA.findall(text))
    return kana >= KANA_SHARE * (kana + len(_HAN.findall(text)))


def _missing() -> list[str]:
    """The packages of the ``ja`` extra that cannot be found (without importing them)."""
    missing = []
    for name in _PACKAGES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a package present but broken, or blocked in sys.modules
            found = False
        if not found:
            missing.append(name)
    return missing


@lru_cache(maxsize=1)
def installed() -> bool:
    """Whether the analyzer, its dictionary and JMdict are installed (found without importing them)."""
    return not _missing()


class _Reader:
    """The analyzer and the dictionary, shared by the threads of one process (neither is thread-safe alone)."""

    def __init__(self, tokenize: Callable[[str], Any], database: sqlite3.Connection) -> None:
        self._tokenize = tokenize
        self._db = database
        self._lock = threading.Lock()

    def morphemes(self, text: str) -> list[tuple[str, str, str, str]]:
        """(surface, dictionary form, part of speech, its subclass) of each word of ``text``."""
        with self._lock:
            try:
                return [(m.surface(), m.dictionary_form(), *m.part_of_speech()[:2]) for m in self._tokenize(text)]
            except Exception as e:  # noqa: BLE001 - one unreadable piece must not stop indexing a library
                _log.warning("select.japanese_unreadable", error=str(e)[:200], chars=len(text))
                return []

    def known(self, word: str) -> bool:
        return bool(self.glosses(word))

    def glosses(self, word: str) -> tuple[str, ...]:
        return _glosses(self, word)

    def query(self, sql: str, args: tuple[str, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()


# The entry a written form most likely means: one where it is a common form (JMdict's priority tags: news1,
# ichi1, ...), then one where it is the headword rather than a rarer spelling (人手 is "manpower" before it is a
# spelling of 海星, starfish), then the oldest.
_ENTRY = """
    SELECT idseq FROM (
        SELECT k.idseq, EXISTS(SELECT 1 FROM KJP p WHERE p.kid = k.ID) AS common,
               k.ID = (SELECT MIN(o.ID) FROM Kanji o WHERE o.idseq = k.idseq) AS headword
        FROM Kanji k WHERE k.text = ?
        UNION ALL
        SELECT n.idseq, EXISTS(SELECT 1 FROM KNP p WHERE p.kid = n.ID) AS common,
               n.ID = (SELECT MIN(o.ID) FROM Kana o WHERE o.idseq = n.idseq) AS headword
        FROM Kana n WHERE n.text = ?
    ) ORDER BY common DESC, headword DESC, idseq LIMIT 1
"""
_FIRST_SENSE = """
    SELECT g.text FROM SenseGloss g WHERE g.sid = (SELECT MIN(s.ID) FROM Sense s WHERE s.idseq = ?) ORDER BY g.rowid
"""


@lru_cache(maxsize=65_536)
def _glosses(reader: _Reader, word: str) -> tuple[str, ...]:
    entry = reader.query(_ENTRY, (word, word))
    if not entry:
        return ()
    rows = reader.query(_FIRST_SENSE, (str(entry[0][0]),))
    return tuple(str(r[0]) for r in rows)


@lru_cache(maxsize=1)
def reader() -> _Reader | None:
    """The analyzer and JMdict, loaded on first use; ``None`` (logged) when either package is missing."""
    try:
        # Deferred: the analyzer and its dictionary cost ~40 MB and are needed only once a text has kana.
        import jamdict_data  # the compiled JMdict: a package of data, its path its only API
        from sudachipy import Dictionary, SplitMode
    except ImportError as e:
        _log.warning("select.japanese_unavailable", error=str(e))
        return None
    try:
        tokenizer = Dictionary(dict="small").tokenizer(mode=SplitMode.C)
        database = sqlite3.connect(
            f"file:{jamdict_data.JAMDICT_DB_PATH}?mode=ro&immutable=1", uri=True, check_same_thread=False
        )
        database.execute("SELECT 1 FROM Kanji LIMIT 1")
    except Exception as e:  # noqa: BLE001 - a broken dictionary install must not stop selection
        _log.warning("select.japanese_unavailable", error=str(e))
        return None
    return _Reader(tokenizer.tokenize, database)


def _pieces(text: str) -> Iterator[str]:
    budget = MAX_CHARS
    for match in _RUN.finditer(text):
        run = match.group(0)[:budget]
        budget -= len(run)
        for start in range(0, len(run), _PIECE):
            yield run[start : start + _PIECE]
        if budget <= 0:
            return


def words(text: str, read: _Reader) -> list[str]:
    """The content words of ``text``'s Japanese, in dictionary form, compounds the dictionary knows joined."""
    out: list[str] = []
    for piece in _pieces(text):
        morphemes = read.morphemes(piece)
        i = 0
        while i < len(morphemes):
            size = 1
            for join in range(min(_MAX_JOIN, len(morphemes) - i), 1, -1):
                parts = morphemes[i : i + join]
                if all(p[2] not in _GRAMMAR for p in parts):
                    compound = "".join(p[0] for p in parts[:-1]) + parts[-1][1]
                    if read.known(compound):
                        out.append(compound)
                        size = join
                        break
            else:
                surface, lemma, pos, subclass = morphemes[i]
                if pos not in _GRAMMAR + _AFFIX and subclass != "非自立可能" and _RUN.fullmatch(surface):
                    out.append(lemma)
            i += size
    return out


def english_of(word: str, read: _Reader) -> list[str]:
    """The English words of the first glosses of ``word``'s most common sense ("to fall down; to drop" ->
    fall, down, drop); empty when JMdict does not know it."""
    english: list[str] = []
    for gloss in [g for g in read.glosses(word) if not g.startswith(("-", "..."))][:GLOSSES]:
        english += _ENGLISH.findall(_NOISE.sub(" ", gloss.lower()))
    return english[:MAX_ENGLISH]


def english_words(text: str) -> list[list[str]]:
    """For each Japanese content word of ``text``, its English words (words JMdict lacks are left out)."""
    read = reader() if is_japanese(text) else None
    if read is None:
        return []
    return [e for e in (english_of(w, read) for w in words(text, read)) if e]


def english_reading(text: str) -> str | None:
    """``text`` with its Japanese replaced by the English of its words, Latin words kept in place; ``None`` when
    ``text`` is not Japanese (:func:`is_japanese`) or the dictionaries are not installed."""
    read = reader() if is_japanese(text) else None
    if read is None:
        return None
    parts: list[str] = []
    done, budget = 0, MAX_CHARS
    for match in _RUN.finditer(text):
        run = match.group(0)[:budget]
        budget -= len(run)
        parts += [text[done : match.start()], " ".join(" ".join(english_of(w, read)) for w in words(run, read))]
        done = match.end()
        if budget <= 0:
            break
    # Japanese past the limit is dropped unread (one pass in C, however many runs a hostile text has).
    parts.append(_RUN.sub(" ", text[done:]))
    return re.sub(r"\s+", " ", " ".join(parts)).strip()


def unavailable() -> str | None:
    """Why Japanese is not read here (a package of the ``ja`` extra missing, a dictionary not loading, or
    :data:`SAMPLE` not coming out in English); ``None`` when it is read."""
    if missing := _missing():
        return f"not installed: {', '.join(missing)} (the `ja` extra of pyproject.toml)"
    if reader() is None:
        return "installed but not loading (select.japanese_unavailable in the log says why)"
    goal, wanted = SAMPLE
    reading = english_reading(goal) or ""
    if lacking := [word for word in wanted if word not in reading.split()]:
        return f"{goal!r} reads as {reading!r}, without {', '.join(lacking)}"
    return None
