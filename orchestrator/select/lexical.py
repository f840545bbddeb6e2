"""Lexical ranking: BM25 (``bm25s``) per field, weighted and summed.

Each field (name, description, SKILL.md body) has its own BM25 index so that a long body does not drown a
precise description, and each field's scores are scaled by that field's best score before weighting. Words are
lower-cased ASCII letters and digits minus a few stopwords, plurals folded, then Snowball-stemmed (PyStemmer);
Chinese, Japanese and Korean text has no spaces, so its runs become overlapping character pairs, and Chinese also
adds its dictionary English (goals and skills are often in different languages). Each choice was measured with
``bench selection`` on two sets of public skills (see docs/concepts/selection-measurements.md).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from orchestrator.select.gloss import english_terms

_WORD = re.compile(r"[a-z0-9]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]+")
_STOP = frozenset(STOPWORDS_EN)
_HIRAGANA = re.compile(r"[\u3040-\u309f]+")

#: Field weights after each field's scores are scaled to [0, 1] (tuned on real skills, see
#: docs/concepts/selection-measurements.md).
FIELD_WEIGHTS: dict[str, float] = {"name": 0.5, "description": 1.0, "body": 1.5}


def plural_stem(word: str) -> str:
    """English plurals folded to the singular (Harman's S-stemmer): "logs" -> "log", "queries" -> "query"."""
    if len(word) <= 3:
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def stem(words: list[str]) -> list[str]:
    """English words reduced to their Snowball stems ("deploying", "deployment" -> "deploy"), plurals first."""
    # A stemmer per call: PyStemmer's objects are not thread-safe, and making one costs under a microsecond.
    stemmer = Stemmer.Stemmer("english")
    return [str(w) for w in stemmer.stemWords([plural_stem(w) for w in words])]


def tokenize(text: str) -> list[str]:
    """Index terms of ``text``: words (stemmed), and character pairs of CJK runs."""
    text = text.lower()
    terms = stem([w for w in _WORD.findall(text) if w not in _STOP])
    for run in _CJK.findall(text):
        pairs = [run[i : i + 2] for i in range(max(1, len(run) - 1))]
        # Pairs of hiragana are Japanese grammar (particles, verb endings: "して", "たい"), shared by every Japanese
        # text; they made any Japanese skill outrank the right one for a Japanese goal.
        terms += [p for p in pairs if not _HIRAGANA.fullmatch(p)]
    return terms


def bilingual_terms(text: str, *, translate: bool = True) -> list[str]:
    """:func:`tokenize`, plus the English words of its Chinese (see :mod:`orchestrator.select.gloss`), so that an
    English goal meets a Chinese skill and the other way round; ``translate`` as in :func:`gloss.english_terms`."""
    return tokenize(text) + stem([w for w in english_terms(text, translate=translate) if w not in _STOP])


class FieldIndex:
    """BM25 over one field of every document; documents are lists of terms (tokenised once, cached)."""

    def __init__(self, docs: Sequence[list[str]]) -> None:
        self.size = len(docs)
        self._bm25: bm25s.BM25 | None = None
        # bm25s cannot index an empty vocabulary; a placeholder keeps every row without matching any query.
        if self.size and any(docs):
            logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
            self._bm25 = bm25s.BM25(k1=1.2, b=0.75)
            self._bm25.index([d or ["\x00"] for d in docs], show_progress=False)

    def scores(self, query_terms: list[str]) -> np.ndarray:
        if self._bm25 is None or not query_terms:
            return np.zeros(self.size, dtype=np.float32)
        known = [t for t in query_terms if t in self._bm25.vocab_dict]
        if not known:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(known), dtype=np.float32)


class LexicalRanker:
    """Weighted sum of the per-field BM25 scores, each field scaled by its best score for this query."""

    def __init__(self, fields: Mapping[str, Sequence[list[str]]], weights: dict[str, float] | None = None) -> None:
        self.weights = dict(weights or FIELD_WEIGHTS)
        self.indexes = {name: FieldIndex(docs) for name, docs in fields.items() if name in self.weights}
        self.size = len(next(iter(fields.values()))) if fields else 0

    def scores(self, query: str) -> np.ndarray:
        # Each query term counts once: a long goal repeating a common word should not outvote its rare words.
        terms = list(dict.fromkeys(bilingual_terms(query)))
        total = np.zeros(self.size, dtype=np.float32)
        for name, index in self.indexes.items():
            field_scores = index.scores(terms)
            best = float(field_scores.max()) if field_scores.size else 0.0
            if best > 0:
                total += self.weights[name] * field_scores / best
        return total
