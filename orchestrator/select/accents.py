"""Words typed without their accents, written with them again before a text is read.

People type "almacen", "usuario", "piu" and "m'inquiete" for almacén, usuário, più and m'inquiète. Neither a
dictionary nor the translation engine knows the bare spelling, so the word, often the one that carries the goal,
was left unread ("tenemos el almacen lleno" -> "Have the almacen full"). Each word of a Spanish, Portuguese, French or
Italian text that the language's own morphological analyser (Apertium's, the first program of its translation
route, :func:`translation.known_words`) does not know is tried with one or two of the accents that language writes,
and the spelling the analyser knows takes its place ("Have the full warehouse"). Words the analyser knows are never
changed, even where an accent would make another word ("mas" stays "but" rather than "más"). German words typed with
"ae", "oe", "ue" or "ss" are looked up with their umlauts in the German dictionary (:mod:`european`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from functools import lru_cache

from orchestrator.select import translation

#: The letters of each language that may have lost a mark, and the marked letters tried for each (the more common
#: first: a word with two known spellings keeps the first found).
MARKS: dict[str, dict[str, str]] = {
    "es": {"a": "á", "e": "é", "i": "í", "o": "ó", "u": "úü", "n": "ñ"},
    "pt": {"a": "ãáâà", "e": "éê", "i": "í", "o": "óõô", "u": "ú", "c": "ç"},
    "fr": {"a": "àâ", "e": "éèêë", "i": "îï", "o": "ô", "u": "ûù", "c": "ç"},
    "it": {"a": "à", "e": "èé", "i": "ì", "o": "òó", "u": "ù"},
}
#: Marks put back in one word at most ("informacoes" -> "informações" needs two).
MAX_MARKS = 2
#: Letters a word may have to be tried (longer ones are names, code or compounds, and would make many spellings).
MAX_LETTERS = 16
#: Unknown words tried in one text, so a hostile text costs a bounded number of spellings.
MAX_WORDS = 40

_WORD = re.compile(r"[^\W\d_]+")
_BARE = re.compile(r"[a-z]{3,}")


def spellings(word: str, language: str) -> Iterator[str]:
    """``word`` with one, then two, of ``language``'s marks put back, nearest the word's end first (where these
    languages write most of theirs: -ción, -ão, più)."""
    marks = MARKS[language]
    spots = [i for i in range(len(word) - 1, -1, -1) if word[i] in marks]
    for count in range(1, MAX_MARKS + 1):
        for chosen in itertools.combinations(spots, count):
            for marked in itertools.product(*(marks[word[i]] for i in chosen)):
                letters = list(word)
                for i, letter in zip(chosen, marked, strict=True):
                    letters[i] = letter
                yield "".join(letters)


@lru_cache(maxsize=512)
def restored(text: str, language: str) -> str:
    """``text`` with each word that ``language``'s analyser knows only with accents written with them; ``text``
    itself for other languages, when the analyser is not installed, or when nothing is to be restored."""
    if language not in MARKS:
        return text
    bare = sorted({w.lower() for w in _WORD.findall(text) if _BARE.fullmatch(w.lower()) and len(w) <= MAX_LETTERS})
    if not bare or (known := translation.known_words(bare, language)) is None:
        return text
    unknown = [w for w in bare if w not in known][:MAX_WORDS]
    if not unknown:
        return text
    tried = {word: list(dict.fromkeys(spellings(word, language))) for word in unknown}
    accepted = translation.known_words(sorted({s for options in tried.values() for s in options}), language) or set()
    fixed = {word: next((s for s in options if s in accepted), None) for word, options in tried.items()}

    def put_back(match: re.Match[str]) -> str:
        word = match.group(0)
        spelled = fixed.get(word.lower())
        if spelled is None:
            return word
        return spelled.capitalize() if word[:1].isupper() else spelled

    return _WORD.sub(put_back, text)
