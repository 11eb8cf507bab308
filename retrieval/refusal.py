"""The no-match decision with its evidence: refuse a turn the cards cannot answer, and say which test failed.

A cosine threshold alone cannot tell an unrelated turn from a paraphrase: with bge-small, "hello" or a question
about mortgages reaches cosines of 0.55-0.65 against medication cards, as high as some real questions. This module
combines the evidence a turn leaves behind into one explainable decision:

- **vocabulary** (needs only the chunk texts): at least one of the turn's words occurs in some card, and no
  identifier in the turn is an unknown member of a family the cards use (``GS-90`` when the cards know ``GS-40``
  and ``GS-60``). These two tests refuse gibberish, chit-chat and invented model numbers or error codes.
- **cross-encoder** (when the reranker ran): the best logit among the top_k cards. Below ``min_cross_encoder``
  the turn is still answered when the cosine is high *and* the top card shares a word with the turn (a
  paraphrase the MS MARCO cross-encoder misjudges), otherwise refused.
- **unexplained words**: the turn's content words that no card uses at all (``printer`` in "the printer shows
  error E-09"): more than ``max_unexplained_words`` of them refuse the turn unless the cross-encoder is sure
  (``min_cross_encoder_unexplained``). Judged only for a turn written in a language most cards use: a Spanish
  turn about English cards is normal (ADR-0022), and its words are not misses.
- **language**: a turn in a language few cards use is judged by ``min_cross_encoder_foreign`` (the English MS
  MARCO cross-encoder scores a Spanish turn low) and may be rescued by the cosine without a shared word. A turn
  mostly in a script the cross-encoder does not read (Cyrillic, Greek, Arabic, Devanagari...) is judged by
  multilingual-e5's cosine instead of its score, whatever the cards' language.
- **without the cross-encoder**: ``rrf_only`` falls back to the cosine with lexical support (a word of the turn
  in the top card) or the branches' agreement; ``dense_only`` to the cosine; ``bm25_only`` without its reranker
  to lexical support alone. The vocabulary tests apply at every level. The decision lists the evidence that
  was unavailable and why.

The default thresholds were chosen on the shipped answerable turns and the dev splits (``scripts/tune_refusal.py``;
corpus/README.md describes the splits); a corpus gets its own from ``retrieval.calibration``. Pure functions, no
model imports.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from retrieval.refusal_words import _compare, _language_name, _num, _quote
from retrieval.tokenize import SCRIPT_NAMES, STOPWORDS, _stemmer, cjk_language, has_cjk, main_script, tokenize

# Defaults for bge-small-en-v1.5 + ms-marco-MiniLM-L-12-v2, chosen by scripts/tune_refusal.py on the dev split:
# most dev turns refused with at most 1 of the 61 answerable turns refused, also one grid step stricter.
DEFAULT_MIN_CROSS_ENCODER = -3.25
DEFAULT_MIN_RESCUE_COSINE = 0.64
DEFAULT_MIN_FALLBACK_COSINE = 0.59
DEFAULT_MIN_DENSE_ONLY_COSINE = 0.59
DEFAULT_MIN_KNOWN_WORDS = 1
DEFAULT_MIN_MATCHED_WORDS = 1
# Issue 23's, chosen by scripts/refusal_report.py on the dev sets (crosslang_dev, near_dev, ood_dev, paraphrase_dev
# and the shipped turns): at most 5% of the es/pt dev turns refused, the English ones no more than before.
DEFAULT_MIN_CROSS_ENCODER_FOREIGN = -6.5
DEFAULT_MAX_UNEXPLAINED_WORDS = 99  # off unless a corpus's calibration (or the tuning) finds it pays
DEFAULT_MIN_CROSS_ENCODER_UNEXPLAINED = 50.0
DEFAULT_MIN_MULTILINGUAL_COSINE = 0.80
DEFAULT_MAX_OOD_MARGIN = 0.0  # refuse a turn nearer an out-of-domain example than any card
DEFAULT_MIN_MULTILINGUAL_Z = 2.0  # e5's cosine in standard deviations above the turn's to out-of-domain examples
MULTILINGUAL_Z_OFF = -99.0
DEFAULT_MIN_ANSWERABILITY = 0.5  # an answerability model's (REFUSAL_MODEL) best score that answers; refusal_gates
OOD_MARGIN_OFF = 1.0  # a margin of cosines never reaches 1
AGREEMENT_DEPTH = 10
# A language is "the cards' language" when at least this share of the chunk texts is written in it: below it, a
# turn in that language is compared by scores, not by words (ten Spanish cards among a hundred English ones do not
# make a Spanish vocabulary).
MIN_LANGUAGE_SHARE = 0.3
# Shorter words (ok, ve, m) are not judged. A CJK bigram is, though it has two characters: two Han, kana or Hangul
# characters are a word's worth (薬局, 冷蔵), where two Latin letters are mostly noise; a lone CJK character (a
# particle such as の between Latin words) is not judged.
MIN_UNEXPLAINED_CHARS = 3
# Version of the rule for a turn in a script the cross-encoder does not read (``LexicalEvidence.unreadable``):
# a calibration of a corpus written in one (``calibration.calibration_key``) counted on the cross-encoder's score.
SCRIPT_RULE = "script-e5-1"
# Cards that use more code families than this are open text (abstracts name hundreds of genes and proteins: CD4,
# IL-6, NF2), not a catalogue of model numbers and error codes: an unknown member of a family is normal there.
MAX_CODE_FAMILIES = 100

# An identifier: letters then digits (GS-40, E-07, Err-4, F2, T112, A-15) or digits then a few letters (31G).
IDENTIFIER = re.compile(r"\b(?:[A-Za-z]{1,6}-?\d{1,5}[A-Za-z]?|\d{1,5}-?[A-Za-z]{1,3})\b")
# Digits followed by these are quantities, times or ordinals (5mg, 3pm, 2nd), not identifiers.
_NOT_IDENTIFIER_SUFFIX = frozenset(
    "mg mcg ug g kg ml l iu u am pm h hr hrs min mins s sec st nd rd th x k m cm mm km yo yr yrs c f d w".split()
)
_ALL_STOPWORDS = frozenset().union(*STOPWORDS.values())


# --------------------------------------------------------------------------------------------------- vocabulary
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


# ----------------------------------------------------------------------------------------------------- evidence
@dataclass(frozen=True)
class LexicalEvidence:
    """The turn's words against the corpus vocabulary and against the top candidate's text.

    ``unexplained``: content words no card uses at all (not even in another form), judged only when ``judged``
    (the cards are written in the turn's language, or the thresholds ignore languages). ``language`` / ``top_language``: the turn's and its top
    card's detected language ("" when nothing tells).
    """

    words: tuple[str, ...]
    known: tuple[str, ...]
    matched: tuple[str, ...]
    matched_idf: tuple[float, ...] = ()
    unknown_identifiers: tuple[str, ...] = ()
    known_family_members: tuple[str, ...] = ()
    unexplained: tuple[str, ...] = ()
    language: str = ""
    top_language: str = ""
    judged: bool = True
    code_families: int = 0  # how many code families the cards use (more than MAX_CODE_FAMILIES: open text)

    @property
    def max_matched_idf(self) -> float:
        return max(self.matched_idf, default=0.0)

    @property
    def fraction_matched(self) -> float:
        return len(self.matched) / len(self.words) if self.words else 0.0

    @property
    def foreign(self) -> bool:
        """The turn is written in a language few cards use (a Spanish turn about English cards): the English
        cross-encoder scores it low, and it shares no word with the cards by nature."""
        return bool(self.language) and not self.judged

    @property
    def unreadable(self) -> bool:
        """The turn is mostly in a script other than Latin and CJK (``tokenize.SCRIPT_NAMES``): the English MS MARCO
        cross-encoder reads none of it, and its score is no evidence either way (+7 to +8.5 for every Russian
        question against Russian cards, on- or off-topic; scripts/other_scripts.py). multilingual-e5 judges."""
        return self.language in SCRIPT_NAMES


def lexical_evidence(turn: str, top_text: str | None, vocabulary: Vocabulary) -> LexicalEvidence:
    """Lexical evidence for ``turn`` given the text of its top candidate (None when there is no candidate)."""
    words = content_words(turn)
    stems = english_stems(words)
    top = set(tokenize(top_text)) if top_text else set()
    top_stems = set(english_stems(top))
    known = tuple(w for w, st in zip(words, stems) if vocabulary.df.get(w, 0) > 0 or st in vocabulary.stems)
    matched = tuple(w for w, st in zip(words, stems) if w in top or st in top_stems)
    unknown, siblings = [], []
    found = identifiers(turn)
    for raw, norm, family in found:
        if norm not in vocabulary.identifiers and family in vocabulary.families:
            unknown.append(raw)
            siblings.extend(m for m in vocabulary.families[family] if m not in siblings)
    lang = language(turn)
    judged = vocabulary.speaks(lang)
    in_codes = set(tokenize(" ".join(raw for raw, _, _ in found)))
    unexplained = tuple(
        w
        for w in words
        if w not in known
        and w not in in_codes
        and (len(w) >= MIN_UNEXPLAINED_CHARS or (len(w) == 2 and has_cjk(w)))
        and not any(ch.isdigit() for ch in w)
    )
    return LexicalEvidence(
        words=tuple(words),
        known=known,
        matched=matched,
        matched_idf=tuple(vocabulary.idf(w) for w in matched),
        unknown_identifiers=tuple(unknown),
        known_family_members=tuple(siblings[:6]),
        unexplained=unexplained,
        language=lang,
        top_language=language(top_text) if top_text else "",
        judged=judged,
        code_families=len(vocabulary.families),
    )


@dataclass(frozen=True)
class AgreementEvidence:
    """Whether the two branches point at the same cards: overlap of their top ``depth`` cards, and whether the
    top candidate is in both."""

    overlap: int
    depth: int
    top_in_both: bool


def agreement_evidence(
    bm25_parents: Sequence[str], dense_parents: Sequence[str], top_parent: str | None, depth: int = AGREEMENT_DEPTH
) -> AgreementEvidence:
    """Agreement from each branch's card ids, best first (duplicates are dropped, keeping the first)."""
    bm25 = list(dict.fromkeys(bm25_parents))[:depth]
    dense = list(dict.fromkeys(dense_parents))[:depth]
    return AgreementEvidence(
        overlap=len(set(bm25) & set(dense)),
        depth=depth,
        top_in_both=top_parent is not None and top_parent in bm25 and top_parent in dense,
    )


@dataclass(frozen=True)
class RefusalEvidence:
    """Everything the rule may use for one turn. A missing piece is None, with why in ``missing``.

    Attributes:
        level: the level the pipeline reached before this decision (``full``, ``rrf_only``, ``dense_only``,
            ``bm25_only``).
        best_cross_encoder: the highest cross-encoder logit among the top_k cards (None: the reranker did not run).
        best_cosine: the highest turn-chunk cosine among the top_k cards (None: no embeddings).
        lexical: vocabulary evidence (None: no vocabulary).
        agreement: branch agreement (None: only one branch ran).
        multilingual_cosine: multilingual-e5-small's cosine of the turn and its top card (``needs_multilingual``
            says when the pipeline asks for it: a turn in another language whose cross-encoder score fell short).
        missing: evidence name -> why it is unavailable, e.g. ``{"cross-encoder": "reranker load failure"}``.
    """

    level: str
    best_cross_encoder: float | None = None
    best_cosine: float | None = None
    lexical: LexicalEvidence | None = None
    agreement: AgreementEvidence | None = None
    missing: Mapping[str, str] = field(default_factory=dict)
    multilingual_cosine: float | None = None  # e5 cosine of the turn and its top card, asked only when needed
    ood: tuple[str, float, float] | None = None  # (closest out-of-domain example, its cosine, the closest card's)
    multilingual_null: tuple[float, float, float, int] | None = None  # e5: best card of top_k, examples' mean, sd, n
    answerability: tuple[str, float] | None = None  # REFUSAL_MODEL's name and best score (retrieval.refusal_gates)


@dataclass(frozen=True)
class Candidate:
    """One of the top_k cards the turn would be answered with (best sub-chunk of its card), best first."""

    parent_id: str
    chunk_id: str
    text: str
    cosine: float | None = None
    cross_encoder: float | None = None


def gather(
    turn: str,
    level: str,
    candidates: Sequence[Candidate],
    vocabulary: Vocabulary | None,
    bm25_parents: Sequence[str] | None = None,
    dense_parents: Sequence[str] | None = None,
    missing: Mapping[str, str] | None = None,
    multilingual_cosine: float | None = None,
    ood: tuple[str, float, float] | None = None,
) -> RefusalEvidence:
    """The evidence for one turn from its top_k candidates (best first) and each branch's card ids (None when
    that branch did not run). ``missing`` says why a piece is unavailable (e.g. why the reranker did not run)."""
    missing = dict(missing or {})
    if vocabulary is not None and not vocabulary.df:
        vocabulary = None  # nothing to compare the turn's words with
        missing.setdefault("vocabulary", "the cards have no words")
    logits = [c.cross_encoder for c in candidates if c.cross_encoder is not None]
    cosines = [c.cosine for c in candidates if c.cosine is not None]
    top = candidates[0] if candidates else None
    lexical = lexical_evidence(turn, top.text if top else None, vocabulary) if vocabulary is not None else None
    agreement = None
    if bm25_parents is not None and dense_parents is not None:
        agreement = agreement_evidence(bm25_parents, dense_parents, top.parent_id if top else None)
    return RefusalEvidence(
        level=level,
        best_cross_encoder=max(logits) if logits else None,
        best_cosine=max(cosines) if cosines else None,
        lexical=lexical,
        agreement=agreement,
        missing=missing,
        multilingual_cosine=multilingual_cosine,
        ood=ood,
    )


# ----------------------------------------------------------------------------------------------------- decision
@dataclass(frozen=True)
class RefusalThresholds:
    """The rule's thresholds (future Settings fields; the defaults are the module constants).

    Attributes:
        min_cross_encoder: a best cross-encoder logit at or above this answers the turn.
        min_rescue_cosine: below ``min_cross_encoder``, a cosine at or above this (with lexical support) still
            answers: the cross-encoder misjudges casual paraphrases.
        min_fallback_cosine: without the cross-encoder (``rrf_only``), the cosine the turn needs, with lexical
            support or the branches' agreement.
        min_dense_only_cosine: the cosine a ``dense_only`` turn needs.
        min_known_words: turn words that must occur somewhere in the cards.
        min_matched_words: turn words that must occur in the top card for "lexical support".
        check_identifiers: refuse a turn naming an unknown member of an identifier family the cards use (GS-90
            when they know GS-40 and GS-60). Right for a catalogue of codes; in open scientific text a gene name
            the abstracts do not spell out (NF2) would be refused too.
        min_cross_encoder_foreign: ``min_cross_encoder`` for a turn written in another language than its top card
            (the English cross-encoder scores a Spanish turn lower).
        max_unexplained_words: content words no card uses that a turn may have; with more it is refused unless its
            best cross-encoder score reaches ``min_cross_encoder_unexplained``.
        min_multilingual_cosine: below ``min_cross_encoder_foreign``, a turn in another language is still answered
            when multilingual-e5's cosine with its top card reaches this.
        max_ood_margin: refuse a turn (not one in another language) whose closest out-of-domain example
            (``retrieval.ood_examples``) is this much nearer, or more, than its closest card (1.0: off).
        max_code_families: unknown identifiers are judged only in cards using at most this many code families (a
            catalogue); above it the cards are open text (abstracts name hundreds of genes) and they are not.
        languages: judge a turn's language against the cards' (True); False compares words whatever the language
            (the rule before issue 23: a Spanish turn's words count as misses against English cards).
        source: where the thresholds come from ("defaults", or the corpus calibration that chose them).
    """

    min_cross_encoder: float = DEFAULT_MIN_CROSS_ENCODER
    min_rescue_cosine: float = DEFAULT_MIN_RESCUE_COSINE
    min_fallback_cosine: float = DEFAULT_MIN_FALLBACK_COSINE
    min_dense_only_cosine: float = DEFAULT_MIN_DENSE_ONLY_COSINE
    min_known_words: int = DEFAULT_MIN_KNOWN_WORDS
    min_matched_words: int = DEFAULT_MIN_MATCHED_WORDS
    check_identifiers: bool = True
    min_cross_encoder_foreign: float = DEFAULT_MIN_CROSS_ENCODER_FOREIGN
    max_unexplained_words: int = DEFAULT_MAX_UNEXPLAINED_WORDS
    min_cross_encoder_unexplained: float = DEFAULT_MIN_CROSS_ENCODER_UNEXPLAINED
    min_multilingual_cosine: float = DEFAULT_MIN_MULTILINGUAL_COSINE
    max_code_families: int = MAX_CODE_FAMILIES
    max_ood_margin: float = DEFAULT_MAX_OOD_MARGIN
    min_multilingual_z: float = DEFAULT_MIN_MULTILINGUAL_Z  # the gates of retrieval.refusal_gates
    min_answerability: float = DEFAULT_MIN_ANSWERABILITY
    languages: bool = True
    source: str = "defaults"

    def __post_init__(self) -> None:
        for name in (
            "min_cross_encoder",
            "min_rescue_cosine",
            "min_fallback_cosine",
            "min_dense_only_cosine",
            "min_cross_encoder_foreign",
            "min_cross_encoder_unexplained",
            "min_multilingual_cosine",
            "max_ood_margin",
            "min_multilingual_z",
            "min_answerability",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}.")
        for name in ("min_known_words", "min_matched_words", "max_unexplained_words", "max_code_families"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, got {value!r}.")
        for name in ("check_identifiers", "languages"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}.")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str | None = None) -> RefusalThresholds:
        """Thresholds from ``to_dict``'s output (unknown keys ignored, missing ones default); ValueError if bad."""
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        if source is not None:
            values["source"] = source
        return cls(**values)


DEFAULT_THRESHOLDS = RefusalThresholds()


@dataclass(frozen=True)
class RefusalTest:
    """One test of the rule: its value, threshold, outcome, and a sentence saying so."""

    name: str
    value: float | None
    threshold: float
    passed: bool
    sentence: str


@dataclass(frozen=True)
class RefusalDecision:
    """Refuse or answer, with every test that was run and the evidence that was unavailable.

    ``reason`` is one sentence for a badge: the first failing test when refused, what carried the turn when not.
    """

    refused: bool
    rule: str
    tests: tuple[RefusalTest, ...]
    unavailable: tuple[str, ...]
    reason: str
    thresholds: str = "defaults"  # where the thresholds came from (a corpus calibration names itself)
    notes: tuple[str, ...] = ()  # evidence shown but not judged (words no card uses, when that test is off)
    cross_language: bool = False  # the turn is in a language few cards use (judged by scores, not by its words)

    @property
    def failed(self) -> tuple[RefusalTest, ...]:
        return tuple(t for t in self.tests if not t.passed)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _vocabulary_tests(lex: LexicalEvidence, t: RefusalThresholds) -> list[RefusalTest]:
    n_known = len(lex.known)
    if not lex.judged:
        known_sentence = (
            f"not compared: the turn is in {_language_name(lex.language)}, a "
            f"{'script' if lex.language in SCRIPT_NAMES else 'language'} few cards are written in "
            "(a turn in another language is not a miss)"
        )
    elif not lex.words:
        known_sentence = "the turn has no word to search for (only stop words, punctuation or single letters)"
    elif n_known >= t.min_known_words:
        known_sentence = f"{n_known} of the turn's {len(lex.words)} words occur in the cards ({_quote(lex.known)})"
    elif n_known == 0:
        known_sentence = f"none of the turn's words occurs in any card ({_quote(lex.words)})"
    else:
        known_sentence = (
            f"only {n_known} of the turn's words occur in the cards ({_quote(lex.known)}), fewer "
            f"than {t.min_known_words}"
        )
    tests = [
        RefusalTest(
            "known words",
            float(n_known),
            float(t.min_known_words),
            n_known >= t.min_known_words or not lex.judged,
            known_sentence,
        )
    ]
    if not t.check_identifiers:
        return tests
    open_text = lex.code_families > t.max_code_families
    unknown = () if open_text else lex.unknown_identifiers
    if unknown:
        sentence = (
            f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not in the cards "
            f"(they know {', '.join(lex.known_family_members)})"
        )
    elif open_text:
        sentence = (
            f"not judged: the cards use {lex.code_families} code families, open text where an unknown name is normal"
        )
    else:
        sentence = "no unknown model number or code in the turn"
    tests.append(RefusalTest("unknown identifiers", float(len(unknown)), 0.0, not unknown, sentence))
    return tests


def _unexplained_test(lex: LexicalEvidence, ce: float | None, t: RefusalThresholds) -> RefusalTest:
    """More than ``max_unexplained_words`` words no card uses refuse, unless the cross-encoder is sure."""
    n = len(lex.unexplained)
    within = n <= t.max_unexplained_words
    sure = ce is not None and ce >= t.min_cross_encoder_unexplained
    if not n:
        sentence = "every content word of the turn occurs in some card"
    else:
        sentence = f"{n} word{'s' if n > 1 else ''} no card uses ({_quote(lex.unexplained)})"
        sentence += f", {'at most' if within else 'more than'} {t.max_unexplained_words} allowed"
        if not within:
            sentence += (
                f", and the best cross-encoder score {_compare(ce, t.min_cross_encoder_unexplained, sure, 1)}"
                if ce is not None
                else ", and no cross-encoder score to overrule them"
            )
    return RefusalTest("unexplained words", float(n), float(t.max_unexplained_words), within or sure, sentence)


def _matched_test(lex: LexicalEvidence, t: RefusalThresholds) -> RefusalTest:
    n = len(lex.matched)
    passed = n >= t.min_matched_words
    if n:
        best = max(zip(lex.matched_idf, lex.matched))[1] if lex.matched_idf else lex.matched[0]
        sentence = f"{n} of the turn's words in the top card ({_quote(lex.matched)}; rarest '{best}')"
    else:
        sentence = "no word of the turn occurs in the top card"
    if not passed and n:
        sentence += f", fewer than {t.min_matched_words}"
    return RefusalTest("lexical support", float(n), float(t.min_matched_words), passed, sentence)


def _cosine_test(name: str, cosine: float, threshold: float) -> RefusalTest:
    passed = cosine >= threshold
    return RefusalTest(name, cosine, threshold, passed, f"best cosine {_compare(cosine, threshold, passed, 3)}")


def decide(evidence: RefusalEvidence, thresholds: RefusalThresholds = DEFAULT_THRESHOLDS) -> RefusalDecision:
    """Refuse or answer one turn from its evidence; every test run is in the decision, with its numbers.

    The rule, by the evidence available:

    1. vocabulary (whenever ``lexical`` is given): refuse if fewer than ``min_known_words`` of the turn's words
       occur in any card (not judged for a turn in a language few cards use), or the turn names an unknown
       identifier of a family the cards use; refuse if more than ``max_unexplained_words`` of its words occur in
       no card, unless the best cross-encoder score reaches ``min_cross_encoder_unexplained``.
    2. cross-encoder ran (``full``, ``bm25_only``): answer if its best logit >= ``min_cross_encoder`` (for a turn in
       another language than its top card: ``min_cross_encoder_foreign``); otherwise answer only if the best cosine
       >= ``min_rescue_cosine`` and the top card shares a word with the turn (a turn in another language need not).
       A turn in a script the cross-encoder does not read is judged by ``multilingual_cosine`` instead, when given.
    3. no cross-encoder, both branches (``rrf_only``): answer if the best cosine >= ``min_fallback_cosine`` and the
       top card shares a word with the turn or is in both branches' top ``AGREEMENT_DEPTH``.
    4. no cross-encoder, one branch with a cosine (``dense_only``): answer if the best cosine >=
       ``min_dense_only_cosine``.
    5. neither a cross-encoder score nor a cosine (``bm25_only`` with the reranker down): lexical support alone.
    """
    t = thresholds
    ev = evidence
    tests: list[RefusalTest] = []
    unavailable: list[str] = []
    notes: list[str] = []
    lex = ev.lexical
    if lex is not None and not t.languages:  # words compared whatever the language (the rule before issue 23)
        lex = replace(lex, judged=True, language="", top_language="")
        ev = replace(ev, lexical=lex)

    def note(name: str, consequence: str) -> None:
        why = ev.missing.get(name, "")
        unavailable.append(f"{name} unavailable{f' ({why})' if why else ''}: {consequence}")

    if lex is None:
        note("vocabulary", "gibberish and unknown codes are judged by the scores alone")
    else:
        tests.extend(_vocabulary_tests(lex, t))
        if t.max_unexplained_words < DEFAULT_MAX_UNEXPLAINED_WORDS and lex.judged:
            tests.append(_unexplained_test(lex, ev.best_cross_encoder, t))
        elif lex.judged and lex.unexplained:  # shown, so that a near miss answered ("printer") can be seen
            n = len(lex.unexplained)
            notes.append(
                f"{n} word{'s' if n > 1 else ''} no card uses ({_quote(lex.unexplained)}): not judged "
                "(REFUSAL_MAX_UNEXPLAINED_WORDS is off: paraphrases use as many as near misses)"
            )
    if ev.ood is not None and t.max_ood_margin < OOD_MARGIN_OFF and lex is not None and not lex.foreign:
        tests.append(_ood_test(ev.ood, t))  # (cards without words: a degenerate corpus, judged by scores alone)
    vocabulary_ok = all(test.passed for test in tests)

    ce, cos = ev.best_cross_encoder, ev.best_cosine
    unreadable = lex is not None and lex.unreadable and ev.multilingual_cosine is not None
    if ce is not None and not unreadable:
        rule, scores_ok = _cross_encoder_tests(ev, t, tests, note)
    elif lex is not None and (lex.foreign or unreadable) and ev.multilingual_cosine is not None:
        if ce is not None:
            rule = f"multilingual cosine (the cross-encoder reads no {SCRIPT_NAMES[lex.language]})"
            notes.append(
                f"cross-encoder score {_num(ce, 1)} not used: the MS MARCO model reads English, not "
                f"{SCRIPT_NAMES[lex.language]} script (it scores such text high or low whatever it says)"
            )
        else:
            rule = "multilingual cosine (no cross-encoder; turn and cards in different languages)"
            note("cross-encoder", "using multilingual-e5's cosine: the English cosine cannot judge another language")
        tests.append(_multilingual_test(ev.multilingual_cosine, t))
        scores_ok = tests[-1].passed
    elif cos is not None and ev.agreement is not None:
        rule = "cosine + lexical support or branch agreement (no cross-encoder)"
        note("cross-encoder", "using cosine, lexical and agreement evidence only")
        cos_test = _cosine_test("cosine", cos, t.min_fallback_cosine)
        tests.append(cos_test)
        agree = ev.agreement
        agree_test = RefusalTest(
            "branch agreement",
            float(agree.top_in_both),
            1.0,
            agree.top_in_both,
            f"the top card is {'in both' if agree.top_in_both else 'not in both'} branches' top {agree.depth} "
            f"({agree.overlap} cards shared)",
        )
        support = [agree_test]
        if lex is not None:
            support.insert(0, _matched_test(lex, t))
        tests.extend(support)
        scores_ok = cos_test.passed and any(s.passed for s in support)
    elif cos is not None:
        rule = "cosine (dense only)"
        note("cross-encoder", "using cosine evidence only")
        if ev.agreement is None:
            note("branch agreement", "only one branch ran")
        cos_test = _cosine_test("cosine", cos, t.min_dense_only_cosine)
        tests.append(cos_test)
        scores_ok = cos_test.passed
    else:
        rule = "lexical support only (no cross-encoder, no cosine)"
        note("cross-encoder", "no model score to judge the turn")
        note("cosine", "no model score to judge the turn")
        if lex is None:
            tests.append(RefusalTest("any evidence", None, 1.0, False, "no evidence at all to judge the turn"))
            scores_ok = False
        else:
            matched = _matched_test(lex, t)
            tests.append(matched)
            scores_ok = matched.passed
    answered = vocabulary_ok and scores_ok
    return RefusalDecision(
        refused=not answered,
        rule=rule,
        tests=tuple(tests),
        unavailable=tuple(unavailable),
        reason=_reason(tests, answered),
        thresholds=t.source,
        notes=tuple(notes),
        cross_language=lex is not None and lex.foreign,
    )


_GATES = {"known words", "unknown identifiers", "unexplained words", "out-of-domain example"}


def _ood_test(ood: tuple[str, float, float], t: RefusalThresholds) -> RefusalTest:
    example, near, card = ood
    margin = near - card
    ok = margin < t.max_ood_margin
    shown = example if len(example) <= 60 else example[:57] + "..."
    return RefusalTest(
        "out-of-domain example",
        margin,
        t.max_ood_margin,
        ok,
        f"closest out-of-domain example '{shown}' at cosine {near:.3f}, closest card {card:.3f}: "
        f"margin {margin:+.3f} {'<' if ok else '>='} {_num(t.max_ood_margin, 3)}",
    )


def _cross_encoder_tests(
    ev: RefusalEvidence, t: RefusalThresholds, tests: list[RefusalTest], note: Callable[[str, str], None]
) -> tuple[str, bool]:
    """The cross-encoder test and, below its threshold, the cosine rescue: (the rule's name, answered)."""
    lex, ce, cos = ev.lexical, ev.best_cross_encoder, ev.best_cosine
    assert ce is not None
    foreign = lex is not None and lex.foreign
    rule = "cross-encoder"
    limit = t.min_cross_encoder_foreign if foreign else t.min_cross_encoder
    ce_ok = ce >= limit
    where = ""
    if foreign and lex:
        kind = "script" if lex.language in SCRIPT_NAMES else "language"
        where = (
            f" ({_language_name(lex.language)}{'-script' if kind == 'script' else ''} turn, cards mostly in "
            f"another {kind})"
        )
    tests.append(
        RefusalTest(
            "cross-encoder", ce, limit, ce_ok, f"best cross-encoder score {_compare(ce, limit, ce_ok, 1)}{where}"
        )
    )
    if cos is None:
        note("cosine", "a low cross-encoder score cannot be rescued by the cosine")
    if ce_ok or cos is None:
        return rule, ce_ok
    if foreign and ev.multilingual_cosine is not None:
        tests.append(_multilingual_test(ev.multilingual_cosine, t))
        return "cross-encoder, rescued by the multilingual cosine (turn and cards in different languages)", tests[
            -1
        ].passed
    rule = "cross-encoder, rescued by cosine and lexical support"
    rescue = [_cosine_test("cosine rescue", cos, t.min_rescue_cosine)]
    if lex is not None and not foreign:
        rescue.append(_matched_test(lex, t))
    elif foreign:
        rule = "cross-encoder, rescued by cosine (turn and cards in different languages)"
        if "multilingual cosine" in ev.missing:
            note("multilingual cosine", "the English cosine judges the turn in another language")
    tests.extend(rescue)
    return rule, all(x.passed for x in rescue)


def _multilingual_test(m: float, t: RefusalThresholds) -> RefusalTest:
    ok = m >= t.min_multilingual_cosine
    return RefusalTest(
        "multilingual cosine",
        m,
        t.min_multilingual_cosine,
        ok,
        f"multilingual-e5 cosine with the top card {_compare(m, t.min_multilingual_cosine, ok, 3)}",
    )


def needs_multilingual(evidence: RefusalEvidence, thresholds: RefusalThresholds = DEFAULT_THRESHOLDS) -> bool:
    """True when the rule would use multilingual-e5's cosine for this turn: written in a language few cards use,
    with a cross-encoder score below ``min_cross_encoder_foreign`` or no cross-encoder at all; or written in a
    script the cross-encoder does not read (``LexicalEvidence.unreadable``), whatever the cards' language (the
    pipeline asks e5 only then)."""
    lex, ce = evidence.lexical, evidence.best_cross_encoder
    return (
        thresholds.languages
        and lex is not None
        and evidence.multilingual_cosine is None
        and (lex.unreadable or (lex.foreign and (ce is None or ce < thresholds.min_cross_encoder_foreign)))
    )


def _reason(tests: Sequence[RefusalTest], answered: bool) -> str:
    """One sentence for the badge: the first failing test when refused, what carried the turn when not."""
    failed = [x for x in tests if not x.passed]
    if not answered:
        # The first failure that decided it: a vocabulary gate, else the score test and what could not rescue it.
        reason = failed[0].sentence
        if len(failed) > 1 and failed[0].name not in _GATES:
            reason += "; " + "; ".join(x.sentence for x in failed[1:])
        return reason
    carried = [x for x in tests if x.passed and x.name not in _GATES]
    reason = "; ".join(x.sentence for x in carried) or "all tests passed"
    if failed:  # answered although a score test failed: say what rescued it
        reason = f"{'; '.join(x.sentence for x in failed)}, but {reason}"
    return reason
