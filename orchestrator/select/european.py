"""German, Spanish, French, Portuguese, Italian and Dutch read as the English words a dictionary gives for them.

The sentence encoder and the lexical index read English; "Setz 'Zahnarzt anrufen' auf meine Aufgabenliste" shares no
word with a to-do skill. A Latin-script text is first told apart from English (``py3langid``, Marco Lui's langid.py
model as modernised by Adrien Barbaresi, BSD-3-Clause, model in the wheel); then each content word is looked up in
FreeDict's X-English dictionary for its language, as Debian ships them (``dict-freedict-{deu,spa,fra,por,ita,nld}-eng``:
GPL-3+ for German, GPL-2+ for the others; read at run time from ``/usr/share/dictd``): the word itself, else the
headword whose Snowball stem it shares (PyStemmer, already the lexical index's stemmer: "tenemos" and "tener" are
both "ten"), for German its inflections and the parts of a compound the dictionary lacks ("Besprechungsabschrift":
Besprechung + Abschrift). Grammar words (the stopword list of ``bm25s`` for that language) are dropped. The language
model and each dictionary are loaded once per process, only when a text may be in one of the languages; without the
package or a dictionary a text is left as it is (logged).

Spanish, Portuguese, French and Italian are also translated as sentences where Apertium's pairs are installed
(:mod:`orchestrator.select.translation`): the sentence encoder then reads the translation, and the lexical index gets
its words beside the dictionary's.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import threading
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import Stemmer
from bm25s import stopwords

from orchestrator.logs import get_logger
from orchestrator.select import accents, translation

_log = get_logger("orchestrator.select")

#: Bumped whenever the reading changes: it names the index cache (``gloss.reading_tag``).
READING_VERSION = "2"
#: Where Debian's dict-freedict-*-eng packages put their dictionaries.
DICTIONARY_DIR = Path("/usr/share/dictd")
#: ISO 639-1 code -> (FreeDict's ISO 639-3 code, Snowball stemmer, bm25s stopwords).
LANGUAGES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "de": ("deu", "german", tuple(stopwords.STOPWORDS_GERMAN)),
    "es": ("spa", "spanish", tuple(stopwords.STOPWORDS_SPANISH)),
    "fr": ("fra", "french", tuple(stopwords.STOPWORDS_FRENCH)),
    "pt": ("por", "portuguese", tuple(stopwords.STOPWORDS_PORTUGUESE)),
    "it": ("ita", "italian", tuple(stopwords.STOPWORDS_ITALIAN)),
    "nl": ("nld", "dutch", tuple(stopwords.STOPWORDS_DUTCH)),
}
_ENGLISH_STOP = frozenset(stopwords.STOPWORDS_EN) | frozenset(stopwords.STOPWORDS_EN_PLUS)
#: Grammar words of those languages that are English words too ("die", "also", "come"): no sign of a language.
_HOMOGRAPHS = frozenset(
    (  # noqa: SIM905 - a word list reads best as words
        "also man die war was will hat bin hin weg sie hier den dan ben men ja te ge u hab er es ist um "
        "con come son era eras fue nada para lo le les la el ha han hay e di da ad al ai mi tu su se ne "
        "ce il ont sur mes ses tes par pas eu c j l n qu ho per sono sei vi io dove ti ci li chi via tra "
        "mais em os ser sem teve tem na nas nos dos das ao pro de en et van"
    ).split()
)
#: Words that tell the six languages from English before the language model is loaded (it costs ~1 s and ~55 MB).
_FOREIGN_STOP = frozenset().union(*(set(s) for _, _, s in LANGUAGES.values()))
_MARKERS = _FOREIGN_STOP - _ENGLISH_STOP - _HOMOGRAPHS
#: Grammar words of the six languages that are no English grammar word (homographs such as "la", "de" included).
_FOREIGN_ONLY = _FOREIGN_STOP - _ENGLISH_STOP
#: English grammar words no other of the six languages has ("the", "my", "with"): nearly every English sentence has one.
_ENGLISH_ONLY = _ENGLISH_STOP - _FOREIGN_STOP
#: Words in a text with no accent and no marker from which it may still be foreign (typed without accents: "quero
#: parar de perder horas no celular").
UNMARKED_MIN_WORDS = 3
_ACCENTED = re.compile(r"[äöüßàâçéèêëîïôûùœãõáíóúñìò¿¡]")
_WORD = re.compile(r"[^\W\d_]+")
#: A text is read only if nearly all its letters are Latin (Korean with one Latin product name is not Dutch).
LATIN_SHARE = 0.9
#: Characters looked at to decide the language.
DETECT_CHARS = 2_000
#: The language model's normalised probability from which a text is taken to be in that language. On the goals of
#: C29, D29, E-C and E-D: the foreign goals 0.70 or more, an English goal taken for German 0.63.
MIN_CONFIDENCE = 0.5
#: Characters read per text: a skill's body is already cut at 20,000; a hostile megabyte is read only this far.
MAX_CHARS = 20_000
#: Words longer than this are not split into compounds (nothing real is; a hostile one would cost quadratic time).
MAX_WORD = 40
#: Parts of a German compound are at least this long ("Zahn", "Arzt").
MIN_PART = 4
#: Dictionary entries kept per headword: the German dictionary has one entry per sense (nouns and verbs of one
#: spelling apart), in no order of frequency.
ENTRIES = 8
#: Entries read per word, those whose headword has the word's case first (German "Setzen" the noun, "setzen" the verb).
ENTRIES_READ = 3
#: Senses of a word used for the lexical index, and English words it adds at most.
SENSES = 2
MAX_ENGLISH = 8
#: Glosses of the first sense that stand for a word in the reading given to the sentence encoder.
READING_GLOSSES = 2
#: German valency markers of a multi-word headword ("jdn anrufen": to phone sb.): the verb's common senses.
_VALENCY = ("jdn", "jdm", "jds", "etw", "sich")
_NUMBERED = re.compile(r"\s*\d+\.\s+")
_NOISE = re.compile(r"\([^)]*\)|\[[^\]]*\]|<[^>]*>|\{[^}]*\}|\b(?:sth|sb|so|jdn|jdm|etw)\b\.?")
_ENGLISH = re.compile(r"[a-z][a-z0-9-]*[a-z0-9]|[a-z]")
_GLOSS_STOP = frozenset({"to", "the", "a", "an", "of", "sth", "sb", "one", "oneself", "someone", "something"})
_INDEX_NUMBERS = re.compile(r"[A-Za-z0-9+/]{1,8}\t[A-Za-z0-9+/]{1,8}")
_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def _number(digits: str) -> int:
    """A dictd index number: base64 digits, most significant first."""
    value = 0
    for digit in digits:
        value = value * 64 + _B64[digit]
    return value


class _Dictzip:
    """Random access into a dictzip file (gzip whose header lists independently compressed chunks, dictzip(1))."""

    _HEAD = 1 << 17

    def __init__(self, path: Path) -> None:
        self.path = path
        with path.open("rb") as f:
            head = f.read(self._HEAD)
        flags = head[3] if len(head) > 12 and head[:3] == b"\x1f\x8b\x08" else 0
        if not flags & 4:
            raise ValueError(f"{path} is not a dictzip file (no gzip extra field)")
        extra_length = int.from_bytes(head[10:12], "little")
        extra, random_access = head[12 : 12 + extra_length], b""
        at = 0
        while at + 4 <= len(extra):
            size = int.from_bytes(extra[at + 2 : at + 4], "little")
            if extra[at : at + 2] == b"RA":
                random_access = extra[at + 4 : at + 4 + size]
            at += 4 + size
        if len(random_access) < 6:
            raise ValueError(f"{path} has no dictzip chunk table")
        self.chunk_length = int.from_bytes(random_access[2:4], "little")
        count = int.from_bytes(random_access[4:6], "little")
        sizes = [int.from_bytes(random_access[6 + 2 * i : 8 + 2 * i], "little") for i in range(count)]
        start = 12 + extra_length
        for flag in (8, 16):  # file name, comment: zero-terminated
            if flags & flag:
                start = head.index(b"\0", start) + 1
        start += 2 if flags & 2 else 0
        self.starts = list(itertools.accumulate(sizes, initial=start))

    def read(self, offset: int, length: int) -> bytes:
        first, last = offset // self.chunk_length, (offset + length - 1) // self.chunk_length
        if length <= 0 or last + 1 >= len(self.starts):
            return b""
        with self.path.open("rb") as f:
            f.seek(self.starts[first])
            raw = f.read(self.starts[last + 1] - self.starts[first])
        base = self.starts[first]
        text = b"".join(
            zlib.decompressobj(-zlib.MAX_WBITS).decompress(raw[self.starts[i] - base : self.starts[i + 1] - base])
            for i in range(first, last + 1)
        )
        skip = offset - first * self.chunk_length
        return text[skip : skip + length]


@dataclass(frozen=True)
class Dictionary:
    """One language's FreeDict dictionary: headword (lower-case) -> where its entries are (the index's own
    base64 numbers, decoded on use: a table of ints cost twice the memory), and the headword of each Snowball stem
    (not for German: its 280,000 headwords would cost ~40 MB more, and its inflected forms are headwords already)."""

    language: str
    index: dict[str, str]
    stems: dict[str, str] | None
    data: _Dictzip
    stop: frozenset[str]
    stemmer: str

    def key(self, word: str) -> str | None:
        """The headword ``word`` is (or shares its stem with, or is an inflection of), or ``None``."""
        if word in self.index:
            return word
        if self.stems is not None:
            return self.stems.get(_stem(self.stemmer, word))
        return next((v for v in _german_forms(word) if v in self.index), None)

    def entries(self, headword: str) -> list[tuple[int, int]]:
        numbers = self.index.get(headword, "").split("\t")
        return [(_number(o), _number(n)) for o, n in zip(numbers[::2], numbers[1::2], strict=False)]


#: German endings tried when a word is not a headword: "erstelle" -> "erstellen", "setz" -> "setzen".
_GERMAN_ENDINGS = ("ten", "te", "est", "et", "st", "en", "em", "er", "es", "e", "n", "s", "t")


def _german_forms(word: str) -> list[str]:
    stems = [word] + [word[: -len(e)] for e in _GERMAN_ENDINGS if word.endswith(e) and len(word) - len(e) >= 3]
    return [f for f in dict.fromkeys(s + tail for s in stems for tail in ("en", "n", "e", "")) if f != word]


def _stem(algorithm: str, word: str) -> str:
    # A stemmer per call: PyStemmer's objects are not thread-safe, and making one costs under a microsecond.
    return str(Stemmer.Stemmer(algorithm).stemWord(word))


def _load(language: str) -> Dictionary | None:
    code, stemmer, stop = LANGUAGES[language]
    index_path = DICTIONARY_DIR / f"freedict-{code}-eng.index"
    try:
        data = _Dictzip(DICTIONARY_DIR / f"freedict-{code}-eng.dict.dz")
        lines = index_path.read_text(encoding="utf-8").split("\n")
    except (OSError, ValueError, UnicodeDecodeError) as e:
        _log.warning("select.european_unavailable", language=language, error=str(e)[:300])
        return None
    plain: dict[str, str] = {}
    valency: dict[str, str] = {}
    for line in lines:
        headword, _, where = line.partition("\t")
        if where.count("\t") != 1 or headword.startswith("00") or not _INDEX_NUMBERS.fullmatch(where):
            continue
        words = headword.lower().split()
        if len(words) == 1:
            table, key = plain, words[0]
        elif len(words) == 2 and words[0].rstrip(".") in _VALENCY:
            table, key = valency, words[1]
        else:
            continue
        known = table.get(key)
        if known is None:
            table[key] = where
        elif known.count("\t") < 2 * ENTRIES - 1:
            table[key] = f"{known}\t{where}"
    del lines
    # A verb's entries with an object first ("jdn anrufen": phone) before its rarer plain ones ("anrufen": invoke).
    for key, where in valency.items():
        plain[key] = f"{where}\t{plain[key]}" if key in plain else where
    stems: dict[str, str] | None = None
    if language != "de":
        stems = {}
        for headword, stem in zip(plain, Stemmer.Stemmer(stemmer).stemWords(list(plain)), strict=True):
            stems.setdefault(str(stem), headword)
    return Dictionary(language, plain, stems, data, frozenset(stop), stemmer)


_lock = threading.Lock()


@lru_cache(maxsize=len(LANGUAGES))
def dictionary(language: str) -> Dictionary | None:
    """The dictionary of ``language`` (``de``, ``es``, ...), loaded on first use; ``None`` (logged) when missing."""
    with _lock:
        return _load(language)


@lru_cache(maxsize=1)
def installed() -> bool:
    """Whether the language model is installed and at least one dictionary is there (found without loading them)."""
    try:
        packages = importlib.util.find_spec("py3langid") is not None
    except (ImportError, ValueError):
        return False
    return packages and bool(available_languages())


@lru_cache(maxsize=1)
def available_languages() -> tuple[str, ...]:
    """The languages whose dictionary files are installed."""
    return tuple(
        language
        for language, (code, _, _) in LANGUAGES.items()
        if (DICTIONARY_DIR / f"freedict-{code}-eng.index").is_file()
        and (DICTIONARY_DIR / f"freedict-{code}-eng.dict.dz").is_file()
    )


@lru_cache(maxsize=1)
def _identifier() -> Any:
    try:
        # Deferred: the model costs about a second and 55 MB, and only texts that look foreign need it.
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError as e:
        _log.warning("select.european_unavailable", error=str(e))
        return None
    try:
        full = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        full.set_languages(["en", *LANGUAGES])
        # A fresh identifier over the seven languages' columns only: the full model's 97 would stay referenced.
        return LanguageIdentifier(
            full.nb_ptc.copy(),
            full.nb_pc.copy(),
            list(full.nb_classes),
            full.tk_nextmove,
            full.tk_output,
            norm_probs=True,
            tk_row=full.tk_row,
        )
    except Exception as e:  # noqa: BLE001 - a broken model install must not stop selection
        _log.warning("select.european_unavailable", error=str(e)[:300])
        return None


def language(text: str) -> str | None:
    """The language of ``text`` when it is German, Spanish, French, Portuguese, Italian or Dutch and its dictionary
    is installed; ``None`` for English, any other script and anything unsure."""
    return _language(text[:DETECT_CHARS])


# A goal is read twice (its words for BM25, its reading for the encoder): the verdict on its sample is kept, and the
# sample is bounded, so the cache is too (256 x 2,000 characters).
@lru_cache(maxsize=256)
def _language(sample: str) -> str | None:
    words = _WORD.findall(sample.lower())
    letters = sum(map(len, words))
    latin = sum(1 for w in words for c in w if c < "\u0250")
    if not letters or latin < LATIN_SHARE * letters:
        return None
    if not _ACCENTED.search(sample.lower()) and _MARKERS.isdisjoint(words) and not _unmarked_foreign(words):
        return None
    if not installed() or (identifier := _identifier()) is None:
        return None
    found, confidence = identifier.classify(sample)
    if found not in available_languages() or confidence < MIN_CONFIDENCE:
        return None
    # A last guard for English: more English grammar words than this language's is English with a foreign name.
    stop = set(LANGUAGES[found][2])
    english = sum(1 for w in words if w in _ENGLISH_STOP and w not in stop)
    foreign = sum(1 for w in words if w in stop and w not in _ENGLISH_STOP)
    return None if english > foreign else str(found)


def _unmarked_foreign(words: list[str]) -> bool:
    """Grammar words of the six languages and not one that only English has: worth asking the model."""
    return (
        len(words) >= UNMARKED_MIN_WORDS
        and _ENGLISH_ONLY.isdisjoint(words)
        and not _FOREIGN_ONLY.isdisjoint(words)
    )


def _sense_glosses(definition: str) -> list[list[str]]:
    """The glosses of each sense of one entry: the line after the headword, or its numbered lines ("1. job, work")."""
    senses: list[list[str]] = []
    for i, line in enumerate(definition.split("\n")[1:]):
        numbered = _NUMBERED.match(line)
        if i and not numbered:
            break
        text = _NOISE.sub(" ", line[numbered.end() :] if numbered else line).lower()
        glosses = [" ".join(w for w in _ENGLISH.findall(g) if w not in _GLOSS_STOP) for g in text.split(",")]
        senses.append([g for g in glosses if g])
    return [s for s in senses if s]


@lru_cache(maxsize=65_536)
def senses(language: str, headword: str, capitalised: bool = False) -> tuple[tuple[str, ...], ...]:
    """The English glosses of each sense of ``headword``, from its first entries whose headword is written with the
    same case (``capitalised``: a German noun) and the others after them; empty when it is not a headword."""
    found = dictionary(language)
    if found is None:
        return ()
    definitions = [found.data.read(o, min(n, 1 << 16)).decode("utf-8", "replace") for o, n in found.entries(headword)]
    definitions.sort(key=lambda d: d[:1].isupper() != capitalised)
    return tuple(tuple(s) for d in definitions[:ENTRIES_READ] for s in _sense_glosses(d))


def _compound(word: str, found: Dictionary, depth: int = 2) -> list[str] | None:
    """Headwords whose concatenation is ``word`` (a linking "s", "es", "n" or "en" allowed after a part)."""
    if (key := found.key(word)) is not None:
        return [key]
    if depth == 0 or len(word) < 2 * MIN_PART:
        return None
    for cut in range(MIN_PART, len(word) - MIN_PART + 1):
        right = word[cut:]
        if (right_key := found.key(right)) is None:
            continue
        left = word[:cut]
        for link in ("", "s", "es", "n", "en"):
            if link and not left.endswith(link):
                continue
            base = left[: len(left) - len(link)]
            if len(base) >= MIN_PART - 1 and (parts := _compound(base, found, depth - 1)) is not None:
                return [*parts, right_key]
    return None


def headwords(word: str, language: str) -> list[str] | None:
    """The headwords ``word`` reads as (one, or a German compound's parts); ``[]`` for a grammar word, ``None``
    when the dictionary does not know it (a name, an English word, a typo)."""
    found = dictionary(language)
    if found is None:
        return None
    lower = word.lower()
    if lower in found.stop or len(lower) < 2:
        return []
    if (key := found.key(lower)) is not None:
        return [key]
    if language != "de" or len(lower) > MAX_WORD:
        return None
    for spelled in _umlauted(lower):
        if spelled in found.stop:
            return []
        if (key := found.key(spelled)) is not None:
            return [key]
    return _compound(lower, found)


#: How German is typed without umlauts or ß; a word is tried with them only where the dictionary lacks it as typed.
_UMLAUT_SPELLINGS = re.compile(r"ae|oe|ue|ss")
_UMLAUTS = {"ae": "ä", "oe": "ö", "ue": "ü", "ss": "ß"}


def _umlauted(word: str) -> list[str]:
    """``word`` with one or two of its "ae", "oe", "ue" and "ss" written as ä, ö, ü and ß ("laedt" -> "lädt")."""
    spots = [m.span() for m in _UMLAUT_SPELLINGS.finditer(word)][:4]
    out: list[str] = []
    for count in (1, 2):
        for chosen in itertools.combinations(spots, count):
            spelled = word
            for start, end in reversed(chosen):
                spelled = spelled[:start] + _UMLAUTS[word[start:end]] + spelled[end:]
            out.append(spelled)
    return out


def english_words(text: str, *, translate: bool = True) -> list[list[str]]:
    """For each content word of ``text`` in one of the six languages, the English words of its first senses, and
    with ``translate`` the words of its translation (:mod:`orchestrator.select.translation`) where one is installed;
    empty when ``text`` is not in one of them (English never is read)."""
    found = language(text)
    if found is None or dictionary(found) is None:
        return []
    if translate:
        text = accents.restored(text[:MAX_CHARS], found)
    out: list[list[str]] = []
    for word in _WORD.findall(text[:MAX_CHARS]):
        for key in headwords(word, found) or []:
            glosses = itertools.chain(*senses(found, key, word[:1].isupper())[:SENSES])
            english = [w for gloss in glosses for w in gloss.split()]
            if english:
                out.append(list(dict.fromkeys(english))[:MAX_ENGLISH])
    translated = translation.to_english(text, found) if translate else None
    if translated:
        out.extend([word] for word in _ENGLISH.findall(translated.lower()))
    return out


def english_reading(text: str) -> str | None:
    """``text`` followed by its English in parentheses: each word of its language as the English of its first sense,
    words the dictionary does not know (names, English words) as they are, grammar words left out; ``None`` when
    ``text`` is not in one of the six languages or its dictionary is not installed. Past :data:`MAX_CHARS` the text
    is left out.

    The English is added rather than put in the text's place: cognates and borrowed words ("Deploy-Skript", "vídeo",
    "modelo") say more than a small dictionary's glosses of them (measured on the tuning halves of C29 and D29, see
    docs/concepts/selection-measurements.md).

    A Spanish, Portuguese, French or Italian text with an installed translation is read as its translation alone
    (words Apertium does not know stay in it as they are, so cognates still count)."""
    found = language(text)
    if found is None:
        return None
    text = accents.restored(text[:MAX_CHARS], found)
    return translation.to_english(text, found) or dictionary_reading(text, found)


def dictionary_reading(text: str, found: str) -> str | None:
    """``text`` followed by the dictionary's English of its words (see :func:`english_reading`); ``None`` when the
    dictionary of ``found`` is not installed."""
    if dictionary(found) is None:
        return None

    def read(match: re.Match[str]) -> str:
        word = match.group(0)
        keys = headwords(word, found)
        if keys is None:
            return word
        capitalised = word[:1].isupper()
        english = [" ".join(s[0][:READING_GLOSSES]) for s in (senses(found, k, capitalised) for k in keys) if s]
        return " ".join(english)

    original = text[:MAX_CHARS]
    english = re.sub(r"\s+", " ", _WORD.sub(read, original)).strip()
    return f"{original} ({english})"


#: A goal in each language and an English word its reading must have: the app image's build checks them all.
SAMPLES: dict[str, tuple[str, str]] = {
    "de": ("Setz 'Zahnarzt anrufen' auf meine Aufgabenliste", "dentist"),
    "es": ("¿Cuánto dinero gastamos el mes pasado?", "money"),
    "fr": ("Je me réveille toutes les nuits à 3h", "night"),
    "pt": ("Quero um resumo das minhas despesas do mês passado", "month"),
    "it": ("Traduci questo documento in tedesco", "document"),
    "nl": ("Maak een samenvatting van deze vergadering", "assembly"),
}


def unread_languages() -> list[str]:
    """The languages whose sample goal (:data:`SAMPLES`) is not read as English here: empty when the model and all
    six dictionaries are installed and work."""
    return [
        code
        for code, (goal, word) in SAMPLES.items()
        if language(goal) != code or word not in _ENGLISH.findall(dictionary_reading(goal, code) or "")
    ]
