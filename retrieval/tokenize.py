r"""BM25 tokenization. ``plain`` is the ADR's lowercase + punctuation stripping (one function, also used for
highlighting); ``snowball`` adds stop-word removal and Snowball stemming chosen by language (en, es, pt).

A token is a letter or digit followed by letters, digits and combining marks (Unicode Mn, Mc, Me: the vowel signs
of Devanagari, Bengali or Tamil, Thai vowels and tone marks, Arabic harakat, Hebrew niqqud, a decomposed accent),
lowercased and in Unicode normal form C: "cafe\u0301" (decomposed, as macOS writes file names) and "café" are the
same term. Offsets (``spans``) stay those of the original text, for highlighting. Python's ``\w`` matches no mark:
``[^\W_]+`` alone cut "दवा" into "दव" and dropped its vowel sign. Plain Latin-1 text (English, Spanish, Portuguese
as usually written) has no mark and nothing that normal form C changes: it is split by that one regex, as before.

Chinese, Japanese and Korean are analysed as Lucene's ``CJKAnalyzer`` (Elasticsearch's ``cjk`` analyzer) does: a
run of CJK characters (Han, Hiragana, Katakana, Hangul) is split into overlapping character bigrams, a lone
character staying a unigram (a character with its combining marks: a decomposed "か\u3099" is "が"). These scripts
write no spaces between words, so a whole run as one token would match only a verbatim repeat of it; a bigram is
the unit a two-character word ("冷蔵", "忘记", "인슐") is matched by. Thai, Lao, Khmer and Myanmar write no spaces
either, but get no such treatment: a run between spaces or punctuation is one token (as Lucene's
``StandardTokenizer`` without a dictionary does). Snowball has no stemmer for any of these scripts: their tokens
pass through the ``snowball`` analyzer unchanged in effect (CJK bigrams are skipped; the en/es/pt stemmers leave a
word in another script as it is).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from typing import Any

_WORD = re.compile(r"[^\W_]+")
# A character beyond Latin-1: only such a text can hold a combining mark, a CJK character or a form that normal form C
# changes (every Latin-1 character is its own NFC and no mark); the others are split by ``_WORD`` alone.
_BEYOND_LATIN1 = re.compile("[^\x00-\xff]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
# The characters analysed as CJK (as far as they are letters: the lookahead below keeps punctuation such as the
# katakana middle dot ・ or 、。 a separator): Hangul jamo and syllables, the ideographic iteration marks 々 〻 and
# 〆 〇, Hiragana (with ゝゞ), Katakana (with the prolonged sound mark ー and ヽヾ), half-width Katakana and Hangul,
# and the Han ideographs of every plane.
_CJK = (
    "\u1100-\u11ff\u3005-\u3007\u303b\u3041-\u309f\u30a1-\u30ff\u3131-\u318e\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uffdc"
    "\U00020000-\U0003ffff"
)
_HAS_CJK = re.compile(f"[{_CJK}]")
# Hangul vowel and final jamo: part of the syllable begun by the initial before them (UAX #29's V and T).
_JAMO_VT = "\u1160-\u11ff\ud7b0-\ud7fb"
# By script, for telling Korean (Hangul) and Japanese (any kana) from Chinese (Han alone).
_HANGUL = re.compile("[\u1100-\u11ff\u3131-\u318e\ua960-\ua97f\uac00-\ud7ff\uffa0-\uffdc]")
_KANA = re.compile("[\u3041-\u309f\u30a1-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
# Version of the analysis: anything kept that was computed from these tokens of a text with CJK characters in it
# (a refusal calibration) carries it, so that nothing built by the whole-run tokenizer (before it) is reused.
CJK_ANALYSIS = "cjk-bigrams-1"
# The same for a text whose tokens changed when combining marks joined their letter and tokens became NFC
# (``changed_by_marks``): Hindi, Thai, Arabic with harakat, decomposed Latin.
MARK_ANALYSIS = "marks-nfc-1"


@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern, re.Pattern, re.Pattern, re.Pattern, re.Pattern]:
    """``(special, token, extend, mark, word)``: a CJK character or combining mark (a text without one, in NFC, is
    split by ``_WORD``); a token (a CJK run, letters only, each with its marks; or a run of any other letters and digits
    with their marks: the two are separate tokens, "GS40の" -> "gs40", "の"); what extends the character before it
    in a CJK run (a combining mark, a Hangul vowel or final jamo: NFD Korean "인" is three jamo, one character);
    a combining mark; the same token as ``token`` in a text with no CJK, no "_" and nothing beyond the BMP (one
    class: Hindi, Arabic or Thai text splits as fast as ``_WORD`` splits Latin).

    Built on first use from this Python's Unicode database (about 30 ms): an English corpus never needs it. The
    marks beyond the BMP are tried only for a character beyond it: ``re`` checks a class's BMP part in one table
    lookup but its other ranges one by one (150 of them, for every character of every text).
    """
    cat = unicodedata.category
    codes = [c for r in (range(0x1F000), range(0xE0000, 0xE1000)) for c in r if cat(chr(c))[0] == "M"]
    ranges, start = [], codes[0]
    for prev, code in zip(codes, codes[1:] + [-1]):
        if code != prev + 1:
            ranges.append((start, prev))
            start = code

    def chars(pairs: Iterable[tuple[int, int]]) -> str:
        return "".join(chr(x) if x == y else f"{chr(x)}-{chr(y)}" for x, y in pairs)

    bmp, astral = chars(r for r in ranges if r[0] <= 0xFFFF), chars(r for r in ranges if r[0] > 0xFFFF)
    marks = f"(?:[{bmp}]|(?=[\U00010000-\U0010ffff])[{astral}])"
    token = re.compile(f"(?P<cjk>(?:(?![\\W_])[{_CJK}]{marks}*)+)|(?:[^\\W_{_CJK}]+{marks}*)+")
    # Any character beyond the BMP takes the full analysis (rare: supplementary Han, marks of historic scripts).
    special = re.compile(f"[{_CJK}{bmp}\U00010000-\U0010ffff]")
    return (special, token, re.compile(f"{marks}|[{_JAMO_VT}]"), re.compile(marks), re.compile(f"[^\\W_][\\w{bmp}]*"))


def _latin1(text: str) -> bool:
    """True if every character of ``text`` is Latin-1: no combining mark, no CJK, nothing NFC changes."""
    return text.isascii() or not _BEYOND_LATIN1.search(text)


def changed_by_marks(text: str) -> bool:
    """True if ``text`` has a combining mark or is not in normal form C: its tokens are not what ``[^\\W_]+`` of
    the lowercased text gave before marks joined their letters (``MARK_ANALYSIS``)."""
    if _latin1(text):
        return False
    low = text.lower()
    return not unicodedata.is_normalized("NFC", low) or _patterns()[3].search(low) is not None


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


def has_cjk(text: str) -> bool:
    """True if ``text`` holds a Chinese, Japanese or Korean character (its tokens include bigrams)."""
    return _HAS_CJK.search(text) is not None


def count_cjk(text: str) -> int:
    """How many Chinese, Japanese or Korean characters ``text`` holds."""
    return len(_HAS_CJK.findall(text))


def cjk_language(text: str) -> tuple[str, int]:
    """``(language, letters)``: ``ko`` if most CJK letters of ``text`` are Hangul, else ``ja`` if any is kana, else
    ``zh``; and how many CJK letters it has (``("", 0)`` for none)."""
    if not _HAS_CJK.search(text):
        return "", 0
    _, token, extend, *_ = _patterns()
    letters = sum(len(m.group()) - len(extend.findall(m.group())) for m in token.finditer(text) if m.lastgroup == "cjk")
    if not letters:
        return "", 0
    hangul = len(_HANGUL.findall(text))
    if 2 * hangul > letters:
        return "ko", letters
    return ("ja" if _KANA.search(text) else "zh"), letters


# Scripts other than Latin and CJK, by Unicode block: (first code point, ISO 15924 code; "" up to the next block for
# none of them). A script code, not a language: Cyrillic is Russian, Ukrainian, Serbian...; Arabic also Persian and
# Urdu; Devanagari Hindi, Marathi and Nepali. What the refusal rule needs is only that the cards do not use it.
_SCRIPT_BLOCKS = (
    (0x0370, "grek"),
    (0x0400, "cyrl"),
    (0x0530, "armn"),
    (0x0590, "hebr"),
    (0x0600, "arab"),
    (0x0700, "syrc"),
    (0x0750, "arab"),
    (0x0780, "thaa"),
    (0x07C0, ""),
    (0x08A0, "arab"),
    (0x0900, "deva"),
    (0x0980, "beng"),
    (0x0A00, "guru"),
    (0x0A80, "gujr"),
    (0x0B00, "orya"),
    (0x0B80, "taml"),
    (0x0C00, "telu"),
    (0x0C80, "knda"),
    (0x0D00, "mlym"),
    (0x0D80, "sinh"),
    (0x0E00, "thai"),
    (0x0E80, "laoo"),
    (0x0F00, "tibt"),
    (0x1000, "mymr"),
    (0x10A0, "geor"),
    (0x1100, ""),
    (0x1200, "ethi"),
    (0x13A0, ""),
    (0x1780, "khmr"),
    (0x1800, ""),
    (0x1C80, "cyrl"),
    (0x1C90, "geor"),
    (0x1CC0, ""),
    (0x1F00, "grek"),
    (0x2000, ""),
    (0x2D00, "geor"),
    (0x2D30, ""),
    (0x2DE0, "cyrl"),
    (0x2E00, ""),
    (0xA640, "cyrl"),
    (0xA6A0, ""),
    (0xA8E0, "deva"),
    (0xA900, ""),
    (0xFB1D, "hebr"),
    (0xFB50, "arab"),
    (0xFE00, ""),
    (0xFE70, "arab"),
    (0xFF00, ""),
)
_BLOCK_STARTS = [start for start, _ in _SCRIPT_BLOCKS]
SCRIPT_NAMES = {
    "grek": "Greek",
    "cyrl": "Cyrillic",
    "armn": "Armenian",
    "hebr": "Hebrew",
    "arab": "Arabic",
    "syrc": "Syriac",
    "thaa": "Thaana",
    "deva": "Devanagari",
    "beng": "Bengali",
    "guru": "Gurmukhi",
    "gujr": "Gujarati",
    "orya": "Oriya",
    "taml": "Tamil",
    "telu": "Telugu",
    "knda": "Kannada",
    "mlym": "Malayalam",
    "sinh": "Sinhala",
    "thai": "Thai",
    "laoo": "Lao",
    "tibt": "Tibetan",
    "mymr": "Myanmar",
    "geor": "Georgian",
    "ethi": "Ethiopic",
    "khmr": "Khmer",
}
# A run of letters (no marks, digits or punctuation) of those scripts; a Latin letter.
_SCRIPT_LETTERS = re.compile(
    "(?:(?=[^\\W\\d_])["
    + "".join(
        f"{chr(start)}-{chr(end - 1)}" for (start, code), (end, _) in zip(_SCRIPT_BLOCKS, _SCRIPT_BLOCKS[1:]) if code
    )
    + "])+"
)
_LATIN_LETTER = re.compile("[A-Za-z\u00aa\u00b5\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff]")


def main_script(text: str, other_letters: int = 0) -> str:
    """The ISO 15924 code (``cyrl``, ``arab``, ``deva``...; ``SCRIPT_NAMES``) of the script other than Latin and CJK
    that most letters of ``text`` are written in (at least two, and more than half of its Latin letters, the
    letters of those scripts and ``other_letters``: the caller's CJK letters); "" when none is."""
    if text.isascii():
        return ""
    counts: dict[str, int] = {}
    for m in _SCRIPT_LETTERS.finditer(text):
        code = _SCRIPT_BLOCKS[bisect_right(_BLOCK_STARTS, ord(m.group()[0])) - 1][1]
        counts[code] = counts.get(code, 0) + m.end() - m.start()
    if not counts:
        return ""
    best = max(counts, key=counts.__getitem__)
    letters = sum(counts.values()) + len(_LATIN_LETTER.findall(text)) + other_letters
    return best if counts[best] >= 2 and 2 * counts[best] > letters else ""


def _plain_split(text: str) -> bool:
    """True if ``_WORD`` alone tokenizes ``text`` (lowercased): no CJK, no combining mark, already NFC."""
    return _latin1(text) or (not _patterns()[0].search(text) and unicodedata.is_normalized("NFC", text))


def _pieces(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of every token of ``text``: a CJK run as its overlapping bigrams of characters (each with
    its combining marks, a Hangul syllable with its jamo; a lone character alone), any other run of letters,
    digits and marks whole."""
    _, token, extend, _, word = _patterns()
    if not _HAS_CJK.search(text) and not _ASTRAL.search(text):
        yield from (m.span() for m in word.finditer(text.replace("_", " ")))  # offsets unchanged
        return
    for m in token.finditer(text):
        a, b = m.span()
        if m.lastgroup != "cjk" or b - a <= 2:
            yield a, b
        elif not extend.search(text, a, b):
            yield from ((i, i + 2) for i in range(a, b - 1))
        else:  # bigrams of characters with what extends them
            starts = [a] + [i for i in range(a + 1, b) if not extend.match(text, i)] + [b]
            if len(starts) <= 3:
                yield a, b
            else:
                yield from zip(starts, starts[2:])


def _nfc(token: str) -> str:
    return token if token.isascii() else unicodedata.normalize("NFC", token)


def tokenize(text: str) -> list[str]:
    """Lowercase ``text`` and split it on everything that is not a letter, digit or combining mark after one
    (unicode-aware), each token in normal form C; a run of Chinese, Japanese or Korean characters becomes its
    overlapping bigrams (a lone character a unigram).

    >>> tokenize("GlucoSense GS-40: error E-07!")
    ['glucosense', 'gs', '40', 'error', 'e', '07']
    >>> tokenize("GS-40の薬を")
    ['gs', '40', 'の薬', '薬を']
    >>> tokenize("Cafe\u0301 दवा") == ["caf\u00e9", "दवा"]
    True
    """
    low = text.lower()
    if _latin1(low):
        return _WORD.findall(low)
    if not unicodedata.is_normalized("NFC", low):  # the same tokens as NFC per token (``spans``), in one call
        low = unicodedata.normalize("NFC", low)
    special, *_, word = _patterns()
    if not special.search(low):
        return _WORD.findall(low)
    if not _HAS_CJK.search(low) and not _ASTRAL.search(low):  # ``_pieces``'s first case, without a call per token
        return word.findall(low.replace("_", " "))  # (a token of an NFC text is NFC: it starts and ends at a base)
    return [_nfc(low[a:b]) for a, b in _pieces(low)]


def spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` for every token of ``tokenize(text)``, in order, for highlighting query terms in a
    snippet: the offsets are into ``text`` as given (a decomposed "cafe\u0301" is ``(0, 5, "café")``). CJK
    bigrams overlap: ``"冷蔵庫"`` gives ``(0, 2, "冷蔵")`` and ``(1, 3, "蔵庫")``."""
    if _plain_split(text):
        return [(m.start(), m.end(), m.group().lower()) for m in _WORD.finditer(text)]
    return [(a, b, _nfc(text[a:b].lower())) for a, b in _pieces(text)]


def word_count(text: str) -> int:
    """About how many words ``text`` has: its non-CJK tokens, and a CJK run as one word per two characters (the
    usual length of a Chinese or Japanese word; its bigram count would call a 13-character question 12 words)."""
    if _plain_split(text):
        return len(_WORD.findall(text))
    _, token, extend, *_ = _patterns()
    return sum(
        (len(m.group()) - len(extend.findall(m.group())) + 1) // 2 if m.lastgroup == "cjk" else 1
        for m in token.finditer(text)
    )


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
def _stemmer(lang: str) -> Any:
    import Stemmer

    return Stemmer.Stemmer(_STEMMER_NAMES[lang])


def analyze(text: str, tokenizer: str = "plain", lang: str = "en") -> list[str]:
    """BM25 terms of ``text``: ``plain`` tokens, or ``snowball`` (stop words removed, stemmed for ``lang``; CJK
    bigrams unchanged)."""
    tokens = tokenize(text)
    if tokenizer == "plain":
        return tokens
    if tokenizer != "snowball":
        raise ValueError(f"unknown tokenizer {tokenizer!r}: use one of {TOKENIZERS}.")
    base = base_language(lang)
    stop = STOPWORDS[base]
    words = [t for t in tokens if t not in stop]
    if not _HAS_CJK.search(text):
        return _stemmer(base).stemWords(words)
    stem = _stemmer(base).stemWord  # CJK tokens are no word of a Snowball language: never stemmed
    return [t if _HAS_CJK.match(t) else stem(t) for t in words]


def analyzer(tokenizer: str, lang: str = "en") -> Callable[[str], list[str]]:
    """``analyze`` with its options bound, for one language."""
    return lambda text: analyze(text, tokenizer, lang)
