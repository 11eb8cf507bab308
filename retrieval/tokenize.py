"""BM25 tokenization. ``plain`` is the ADR's lowercase + punctuation stripping (one function, also used for
highlighting); ``snowball`` adds stop-word removal and Snowball stemming chosen by language (en, es, pt)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

_WORD = re.compile(r"[^\W_]+")

TOKENIZERS = ("plain", "snowball")

# Short stop-word lists (the most frequent function words of each language). Digits and codes are never stop words.
STOPWORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        "a about above after again against all am an and any are as at be because been before being below between "
        "both but by can could did do does doing down during each few for from further had has have having he her "
        "here hers him his how i if in into is it its itself just me more most my no nor not now of off on once only "
        "or other our ours out over own same she should so some such than that the their theirs them then there "
        "these they this those through to too under until up very was we were what when where which while who whom "
        "why will with would you your yours".split()
    ),
    "es": frozenset(
        "a al algo algunas algunos ante antes como con contra cual cuando de del desde donde durante e el ella ellas "
        "ellos en entre era es esa esas ese eso esos esta estas este esto estos fue ha hay la las le les lo los mas "
        "me mi mis mucho muy nada ni no nos o os otra otro para pero poco por porque que quien se sea ser si sin "
        "sobre su sus también te tu tus un una uno unos y ya yo".split()
    ),
    "pt": frozenset(
        "a ao aos as até com como da das de dela dele do dos e ela elas ele eles em entre era essa esse esta este "
        "eu foi há isso isto já lhe mais mas me meu minha muito na nas nem no nos não o os ou para pela pelo por "
        "quando que quem se sem ser seu sua são também te tem um uma você".split()
    ),
}
_STEMMER_NAMES = {"en": "english", "es": "spanish", "pt": "portuguese"}


def tokenize(text: str) -> list[str]:
    """Lowercase ``text`` and split it on everything that is not a letter or digit (unicode-aware).

    >>> tokenize("GlucoSense GS-40: error E-07!")
    ['glucosense', 'gs', '40', 'error', 'e', '07']
    """
    return _WORD.findall(text.lower())


def spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` for every token of ``text``, for highlighting query terms in a snippet."""
    return [(m.start(), m.end(), m.group().lower()) for m in _WORD.finditer(text)]


def base_language(lang: str) -> str:
    """``es-419`` -> ``es``, ``pt-BR`` -> ``pt``; anything unknown -> ``en``."""
    base = (lang or "en").split("-")[0].lower()
    return base if base in _STEMMER_NAMES else "en"


def detect_language(text: str) -> str:
    """The language (en, es, pt) whose stop words the turn uses most (at least two); else ``en``.

    Cheap and explainable: a turn has no ``lang`` field, and the stemmer must match the one its cards used.
    """
    tokens = tokenize(text)
    counts = {lang: sum(t in words for t in tokens) for lang, words in STOPWORDS.items()}
    accents = sum(ch in "ñ¿¡" for ch in text), sum(ch in "ãõç" for ch in text)
    counts["es"] += 2 * accents[0]
    counts["pt"] += 2 * accents[1]
    best = max(counts, key=lambda lang: (counts[lang], lang == "en"))
    return best if counts[best] > counts["en"] and counts[best] >= 2 else "en"


@lru_cache(maxsize=8)
def _stemmer(lang: str):
    import Stemmer

    return Stemmer.Stemmer(_STEMMER_NAMES[lang])


def analyze(text: str, tokenizer: str = "plain", lang: str = "en") -> list[str]:
    """BM25 terms of ``text``: ``plain`` tokens, or ``snowball`` (stop words removed, stemmed for ``lang``)."""
    tokens = tokenize(text)
    if tokenizer == "plain":
        return tokens
    if tokenizer != "snowball":
        raise ValueError(f"unknown tokenizer {tokenizer!r}: use one of {TOKENIZERS}.")
    base = base_language(lang)
    stop = STOPWORDS[base]
    return _stemmer(base).stemWords([t for t in tokens if t not in stop])


def analyzer(tokenizer: str, lang: str = "en") -> Callable[[str], list[str]]:
    """``analyze`` with its options bound, for one language."""
    return lambda text: analyze(text, tokenizer, lang)
