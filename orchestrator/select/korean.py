"""Korean read as the English words of its words.

The sentence encoder knows no Korean, and a Korean goal's words never meet an English skill's: Korean goals were the
ones most often missed. Neither Debian nor PyPI has a Korean-English dictionary we could find, but free software
carries one in pieces: every program translated into Korean ships a gettext catalog of its English messages and
their Korean ("Folder" / "폴더", "Make a backup" / "백업 만들기"). The reader mines the catalogs of a fixed
list of Debian packages (:data:`CATALOG_PACKAGES`: LibreOffice's Korean language pack, GTK, GLib, Git, coreutils,
...; their Korean catalogs are extracted by ``ops/setup.sh`` and the app image's build into
:data:`CATALOG_DIR`) for pairs of a Korean and an English word that keep appearing in the same short messages (Dice
coefficient at least :data:`MIN_DICE`, together in at least :data:`MIN_PAIRS` messages). Sino-Korean words the
catalogs lack (회원 會員 "member", 계약 契約 "agreement") are read through libhangul's Hangul-to-Hanja table (Debian's
``libhangul-data``, BSD-3-Clause) and then as Chinese (CC-CEDICT, :mod:`orchestrator.select.gloss`).

Each run of Hangul (a word with its particles) is cut longest-first into words the reader knows; a particle or ending
after a known word ends the cut ("폴더를" -> 폴더 + 를), and an unknown piece ends it too (a native verb, a name).
Catalogs and table are read in place, once per process and only when a text has Hangul in it.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from orchestrator.logs import get_logger

_log = get_logger("orchestrator.select")

#: Bumped whenever the reading changes: it names the index cache (``gloss.reading_tag``).
READING_VERSION = "1"
#: Where ops/setup.sh and the app image put the Korean catalogs of :data:`CATALOG_PACKAGES`, one folder a package.
CATALOG_DIR = Path("/usr/share/orchestrator/catalogs/ko")
#: The Debian packages whose Korean gettext catalogs are mined: office, desktop and command-line vocabulary.
CATALOG_PACKAGES = (
    "libreoffice-l10n-ko",
    "libgtk-3-common",
    "libglib2.0-data",
    "shared-mime-info",
    "appstream",
    "packagekit",
    "systemd",
    "git",
    "coreutils",
    "libc-l10n",
    "bash",
    "tar",
    "wget",
    "dpkg",
    "apt",
    "gawk",
    "findutils",
    "grep",
    "sed",
)
#: libhangul's table of Sino-Korean words: ``hangul:hanja:note`` a line.
HANJA_TABLE = Path("/usr/share/libhangul/hanja/hanja.txt")

#: A pair is kept when the two words share at least this part of the messages either is in ...
MIN_DICE = 0.3
#: ... (for a Korean word of one syllable, this part) ...
MIN_DICE_ONE_SYLLABLE = 0.6
#: ... and are in at least this many messages together.
MIN_PAIRS = 3
#: English words kept for a Korean word (the best-paired first).
ENGLISH_PER_WORD = 2
#: Messages longer than this (in English words, in Korean words) pair too many words to say anything.
MAX_ENGLISH_WORDS = 6
MAX_KOREAN_WORDS = 8
#: The longest word tried when cutting a run, in syllables.
MAX_SYLLABLES = 8
#: Characters of a text that are read.
MAX_CHARS = 20_000

_HANGUL = re.compile(r"[\uac00-\ud7a3]+")
_ENGLISH = re.compile(r"[A-Za-z]{2,}")
#: Placeholders and markup of a message, which are no words; accelerator marks, which stand inside words ("Sa~ve").
_MARKUP = re.compile(r"%[-+#0-9.]*[a-zA-Z]|%\d+|\{[^}]*\}|\$\w+\$?|<[^>]*>")
_ACCELERATOR = re.compile(r"[~&_]")
_ENGLISH_STOP = frozenset(
    (  # noqa: SIM905 - a word list reads best as words
        "the of to in on for and or with by from is are be as at this that it its your you not no can cannot"
    ).split()
)
#: Particles and endings that close a Korean word: after a known word they end the cut.
_PARTICLES = tuple(
    sorted(
        set(
            (  # noqa: SIM905 - a word list reads best as words
                "이랑 랑 에서 에게 에는 에도 으로 로 까지 부터 처럼 보다 한테 하고 이나 나 와 과 을 를 "
                "이 가 은 는 의 도 만 에 요 야 이에요 예요 입니다 이다 해 해줘 해서 하는 한 할 하게 "
                "했 된 되는 되 들 들이 들을 들은"
            ).split()
        ),
        key=len,
        reverse=True,
    )
)

_PARTICLE_SET = frozenset(_PARTICLES)


def has_hangul(text: str) -> bool:
    return _HANGUL.search(text) is not None


def _catalogs() -> list[Path]:
    return sorted(CATALOG_DIR.glob("*/*.mo")) if CATALOG_DIR.is_dir() else []


#: The first word of a GNU gettext catalog (.mo), read little- or big-endian.
_MO_MAGIC = 0x950412DE
_CHARSET = re.compile(r"charset=([-\w]+)")


def _messages(catalog: Path) -> Iterator[tuple[str, str]]:
    """The (English, Korean) messages of a GNU .mo catalog, read by its documented layout: a header of counts and
    offsets, then a table of (length, offset) for the originals and one for the translations, in the charset its
    header entry names (two of the catalogs here are EUC-KR). Plural forms give their first form, a message context
    is left out."""
    try:
        data = catalog.read_bytes()
        order = next(o for o in ("<", ">") if struct.unpack(f"{o}I", data[:4])[0] == _MO_MAGIC)
        count, originals, translations = struct.unpack(f"{order}3I", data[8:20])

        def entry(table: int, n: int) -> bytes:
            length, offset = struct.unpack(f"{order}2I", data[table + 8 * n : table + 8 * n + 8])
            return data[offset : offset + length].split(b"\0")[0]

        pairs = [(entry(originals, n), entry(translations, n)) for n in range(count)]
        header = next((korean for english, korean in pairs if not english), b"").decode("ascii", "replace")
        charset = found.group(1) if (found := _CHARSET.search(header)) else "utf-8"
        for english, korean in pairs:
            if english:  # the empty original is the header
                yield english.decode(charset).split("\x04")[-1], korean.decode(charset)
    except (OSError, UnicodeDecodeError, LookupError, struct.error, StopIteration) as error:
        _log.warning("select.korean_catalog_unreadable", catalog=str(catalog), error=str(error))


def _plain(message: str) -> str:
    return _ACCELERATOR.sub("", _MARKUP.sub(" ", message))


@lru_cache(maxsize=1)
def lexicon() -> dict[str, tuple[str, ...]]:
    """Korean word -> its English words (the best-paired first), mined from the installed catalogs; empty without
    them. A catalog's word with a particle ("폴더를") counts as the word ("폴더") where the catalogs have that too."""
    messages: list[tuple[set[str], set[str]]] = []
    for catalog in _catalogs():
        for english_text, korean_text in _messages(catalog):
            english = {w.lower() for w in _ENGLISH.findall(_plain(english_text))} - _ENGLISH_STOP
            korean = set(_HANGUL.findall(_plain(korean_text)))
            if english and korean and len(english) <= MAX_ENGLISH_WORDS and len(korean) <= MAX_KOREAN_WORDS:
                messages.append((korean, english))
    vocabulary = {word for korean, _ in messages for word in korean}
    korean_count: Counter[str] = Counter()
    english_count: Counter[str] = Counter()
    together: Counter[tuple[str, str]] = Counter()
    for korean, english in messages:
        words = {_without_particle(word, vocabulary) for word in korean}
        english_count.update(english)
        korean_count.update(words)
        together.update((k, e) for k in words for e in english)
    paired: dict[str, list[tuple[float, str]]] = {}
    for (korean_word, english_word), both in together.items():
        dice = 2 * both / (korean_count[korean_word] + english_count[english_word])
        # A word of one syllable is often a counter, a particle or part of a longer word: it must pair better.
        if both >= MIN_PAIRS and dice >= (MIN_DICE_ONE_SYLLABLE if len(korean_word) == 1 else MIN_DICE):
            paired.setdefault(korean_word, []).append((-dice, english_word))
    return {k: tuple(e for _, e in sorted(pairs)[:ENGLISH_PER_WORD]) for k, pairs in paired.items()}


def _without_particle(word: str, vocabulary: set[str]) -> str:
    """``word`` without the particles after it ("서버에서는" -> 서버에서 -> 서버), as far as the catalogs have the
    shorter word too."""
    shorter = True
    while shorter:
        shorter = False
        for particle in _PARTICLES:
            if word.endswith(particle) and (stem := word[: -len(particle)]) in vocabulary:
                word, shorter = stem, True
                break
    return word


@dataclass(frozen=True)
class Chinese:
    """How the Chinese reader reads a Hanja spelling: whether it knows it, and its English."""

    knows: Callable[[str], bool]
    english: Callable[[str], tuple[str, ...]]


@lru_cache(maxsize=2)
def sino_korean_words(chinese: Chinese) -> dict[str, str]:
    """Hangul spelling of a Sino-Korean word of two or more syllables -> its first Hanja spelling that ``chinese``
    knows (a tenth of the table's 220,000 words; all of them would hold some 60 MB); empty without the table."""
    table: dict[str, str] = {}
    try:
        with HANJA_TABLE.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                hangul, _, rest = line.partition(":")
                hanja = rest.partition(":")[0]
                if (
                    len(hangul) >= 2
                    and hangul not in table
                    and len(hanja) == len(hangul)
                    and _HANGUL.fullmatch(hangul)
                    and chinese.knows(hanja)
                ):
                    table[hangul] = hanja
    except OSError:
        return {}
    return table


def installed() -> bool:
    return bool(_catalogs()) or HANJA_TABLE.is_file()


def source_tag() -> str:
    """Names the catalogs and table read here, for cache keys."""
    digest = hashlib.sha256()
    for source in [*_catalogs(), HANJA_TABLE]:
        if source.is_file():
            digest.update(f"{source.parent.name}/{source.name}:{source.stat().st_size}\n".encode())
    return digest.hexdigest()[:8]


def _sino(word: str, chinese: Chinese) -> tuple[str, ...]:
    """The English of a Sino-Korean word, read as Chinese from its Hanja spelling."""
    hanja = sino_korean_words(chinese).get(word)
    return chinese.english(hanja) if hanja else ()


def _cut(run: str, chinese: Chinese) -> list[tuple[str, ...]]:
    """The English of each word of one run of Hangul, from its start until a particle, an ending or an unknown
    piece."""
    words = lexicon()
    out: list[tuple[str, ...]] = []
    if run in _PARTICLE_SET:
        return out  # the particle of a word in another script ("VLOOKUP이랑")
    i = 0
    while i < len(run):
        for size in range(min(MAX_SYLLABLES, len(run) - i), 0, -1):
            piece, rest = run[i : i + size], run[i + size :]
            # A word of one syllable (not itself a particle) only where a particle or nothing follows: otherwise
            # it is a syllable of something longer.
            alone = (not rest or rest.startswith(_PARTICLES)) and piece not in _PARTICLE_SET
            if piece in words and (size > 1 or alone):
                english = words[piece]
                break
            if size > 1 and (english := _sino(piece, chinese)):
                break
        else:
            break
        out.append(english)
        i += size
        if run[i:].startswith(_PARTICLES) and not any(run[i : i + s] in words for s in range(2, 5)):
            break
    return out


def english_words(text: str, chinese: Chinese) -> list[list[str]]:
    """For each word the reader knows in the Hangul of ``text``, its English words; ``chinese`` gives the English of
    a Hanja spelling (empty when it knows none)."""
    return [list(english) for run in _HANGUL.findall(text[:MAX_CHARS]) for english in _cut(run, chinese)]


def english_reading(text: str, chinese: Chinese) -> str | None:
    """``text`` with each run of Hangul replaced by the first English word of each of its known words (the encoder
    reads English only); ``None`` when neither catalogs nor table are installed."""
    if not installed():
        return None

    def read(match: re.Match[str]) -> str:
        english = [words[0] for words in _cut(match.group(0), chinese) if words]
        return " " + " ".join(english) + " " if english else " "

    return re.sub(r"\s+", " ", _HANGUL.sub(read, text[:MAX_CHARS])).strip()


#: Korean goals and an English word each must be read as: the app image's build checks them (catalogs, then table).
SAMPLES: tuple[tuple[str, str], ...] = (
    ("리눅스 폴더를 매일 밤 백업하고 싶어", "backup"),
    ("회원 가입 양식이 너무 길어요", "member"),
)


def unavailable(chinese: Chinese) -> str | None:
    """Why a Korean goal is not read here, or ``None`` when it is."""
    if not _catalogs():
        return f"no Korean catalogs in {CATALOG_DIR}"
    if not HANJA_TABLE.is_file():
        return f"no Hangul-to-Hanja table at {HANJA_TABLE}"
    for goal, word in SAMPLES:
        terms = [w for english in english_words(goal, chinese) for w in english]
        if word not in terms:
            return f"{goal!r} read as {terms}, without {word!r}"
    return None
