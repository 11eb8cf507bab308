"""The turn's words against the cards' words, for the refusal rule: content words, the language a text is written
in, identifier-like tokens (model numbers, error codes) and their families, and the cards' ``Vocabulary``."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from retrieval.tokenize import STOPWORDS, _stemmer, cjk_language, main_script, tokenize

# A language is "the cards' language" when at least this share of the chunk texts is written in it: below it, a
# turn in that language is compared by scores, not by words (ten Spanish cards among a hundred English ones do not
# make a Spanish vocabulary).
MIN_LANGUAGE_SHARE = 0.3

# An identifier: letters then digits (GS-40, E-07, Err-4, F2, T112, A-15) or digits then a few letters (31G).
IDENTIFIER = re.compile(r"\b(?:[A-Za-z]{1,6}-?\d{1,5}[A-Za-z]?|\d{1,5}-?[A-Za-z]{1,3})\b")
# Digits followed by these are quantities, times or ordinals (5mg, 3pm, 2nd), not identifiers.
_NOT_IDENTIFIER_SUFFIX = frozenset(
    "mg mcg ug g kg ml l iu u am pm h hr hrs min mins s sec st nd rd th x k m cm mm km yo yr yrs c f d w".split()
)
_ALL_STOPWORDS = frozenset().union(*STOPWORDS.values())


def english_stems(words: Iterable[str]) -> list[str]:
    """Snowball English stems, so that a plural or another form still counts as the same word (needles, needle)."""
    return _stemmer("en").stemWords(list(words))


def content_words(text: str) -> list[str]:
    """The turn's words that carry content: plain tokens, minus the en/es/pt stop words, first occurrence kept.

    Plain tokens (no stemming) so that a brand or code matches across languages (a Spanish turn naming
    ``Lipoquell`` matches the English card's ``Lipoquell``). Chinese, Japanese and Korean text gives its character
    bigrams (``retrieval.tokenize``), the terms BM25 matches it by: "冷蔵庫" is known to cards that say "冷蔵".
    """
    return [w for w in dict.fromkeys(tokenize(text)) if w not in _ALL_STOPWORDS]


# Frequent words of Spanish or Portuguese beyond the stop words (which the two share in good part).
_MARKERS = {
    "es": frozenset(
        "puedo puede tengo tiene hago qué cómo cuándo dónde cuál mi mis olvidé ayer hoy también "
        "pero después siempre ahora mañana debo sirve el los del al un una es son estoy eso ese esa "
        "voy muy".split()
    ),
    "pt": frozenset(
        "posso pode tenho tem faço não você meu minha meus minhas esqueci ontem hoje também mas "
        "depois sempre agora amanhã devo quais qual serve ao aos à às do da dos das um uma é são "
        "estou isso esse essa vou".split()
    ),
}
_IBERIAN = frozenset().union(STOPWORDS["es"], STOPWORDS["pt"], *_MARKERS.values()) - STOPWORDS["en"]
_ENGLISH = STOPWORDS["en"] - _IBERIAN
_ONLY = {
    lang: (STOPWORDS[lang] | _MARKERS[lang]) - STOPWORDS[other] - _MARKERS[other] - STOPWORDS["en"]
    for lang, other in (("es", "pt"), ("pt", "es"))
}
_LETTERS = {"es": frozenset("ñ¿¡"), "pt": frozenset("ãõç")}


def language(text: str) -> str:
    """``en``, ``es`` or ``pt``: English if more of its words are English-only stop words than Spanish or
    Portuguese ones; between those two, by the words (and letters: ñ ¿ ¡ / ã õ ç) only one of them has (Spanish
    on a tie). ``ja``, ``zh`` or ``ko`` when CJK letters outweigh those stop words (one word per two letters):
    a Japanese turn about English cards is a turn in another language, not one whose words no card knows. The
    ISO 15924 code of another script (``cyrl``, ``grek``, ``arab``, ``hebr``, ``deva``, ``thai``...;
    ``tokenize.SCRIPT_NAMES``) when most of the turn's letters are of it: a Russian turn about English cards
    likewise. "" when nothing tells (``GS-40 E-09``, a brand alone)."""
    tokens = [t for t in tokenize(text) if len(t) > 1]  # "e" is Portuguese "and", and the E of E-07
    english = sum(t in _ENGLISH for t in tokens)
    iberian = sum(t in _IBERIAN for t in tokens) + sum(ch in "ñ¿¡ãõç" for ch in text.lower())
    cjk, letters = cjk_language(text)
    if letters >= 2 and letters > 2 * (english + iberian):
        return cjk
    script = main_script(text, letters)
    if script:
        return script
    if not english and not iberian:
        return ""
    if english >= iberian:
        return "en"
    low = text.lower()
    es = sum(t in _ONLY["es"] for t in tokens) + sum(ch in _LETTERS["es"] for ch in low)
    pt = sum(t in _ONLY["pt"] for t in tokens) + sum(ch in _LETTERS["pt"] for ch in low)
    return "pt" if pt > es else "es"


def _norm_identifier(raw: str) -> tuple[str, str]:
    """``GS-040`` -> ``("gs40", "gs")``: letters and numbers without separators or leading zeros, and its family.

    The family is the letter prefix (``gs``, ``e``, ``err``) or, for digits-then-letters (``31G``), the suffix.
    """
    parts = re.findall(r"[a-z]+|\d+", raw.lower())
    parts = [str(int(p)) if p.isdigit() else p for p in parts]
    family = parts[0] if parts and not parts[0].isdigit() else (parts[-1] if parts else "")
    return "".join(parts), family


def identifiers(text: str) -> list[tuple[str, str, str]]:
    """``(as written, normalised, family)`` for every identifier-like token of ``text`` (quantities excluded)."""
    out = []
    for m in IDENTIFIER.finditer(text):
        raw = m.group()
        letters = re.sub(r"[^a-z]", "", raw.lower())
        if raw[0].isdigit() and letters in _NOT_IDENTIFIER_SUFFIX:
            continue
        norm, family = _norm_identifier(raw)
        out.append((raw, norm, family))
    return out


@dataclass(frozen=True)
class Vocabulary:
    """What the chunk texts contain: document frequency of each plain word, and the identifiers per family.

    Build once per corpus with ``Vocabulary.from_texts`` (the same texts BM25 and the embedder index).
    """

    n_docs: int
    df: Mapping[str, int]
    identifiers: frozenset[str]
    families: Mapping[str, tuple[str, ...]]
    stems: frozenset[str] = frozenset()
    languages: Mapping[str, int] = field(default_factory=dict)  # chunk texts per detected language ("" = unsure)

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> Vocabulary:
        df: Counter[str] = Counter()
        ids: set[str] = set()
        families: dict[str, dict[str, None]] = {}
        langs: Counter[str] = Counter()
        n = 0
        for text in texts:
            n += 1
            df.update(set(tokenize(text)))
            langs[language(text)] += 1
            for raw, norm, family in identifiers(text):
                ids.add(norm)
                families.setdefault(family, {}).setdefault(raw.upper(), None)
        return cls(
            n_docs=n,
            df=dict(df),
            identifiers=frozenset(ids),
            families={f: tuple(sorted(v)) for f, v in families.items()},
            stems=frozenset(english_stems(df)),
            languages=dict(langs),
        )

    def speaks(self, lang: str) -> bool:
        """True if the cards are written in ``lang`` (at least ``MIN_LANGUAGE_SHARE`` of the texts that tell); an
        undetected language ("") is taken as the cards' own."""
        told = sum(n for k, n in self.languages.items() if k)
        return not lang or not told or self.languages.get(lang, 0) / told >= MIN_LANGUAGE_SHARE

    def idf(self, word: str) -> float:
        """``ln(1 + (N - df + 0.5) / (df + 0.5))``, BM25's idf kept positive (Lucene's form)."""
        df = self.df.get(word, 0)
        return math.log(1 + (self.n_docs - df + 0.5) / (df + 0.5))
