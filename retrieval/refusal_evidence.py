"""The evidence the refusal rule judges a turn by (``RefusalEvidence``): its words against the cards' and its top
card's (``LexicalEvidence``), the branches' agreement, the model scores of its top_k cards, gathered by ``gather``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from retrieval.refusal_vocabulary import Vocabulary, content_words, english_stems, identifiers, language
from retrieval.tokenize import SCRIPT_NAMES, has_cjk, tokenize

AGREEMENT_DEPTH = 10
# Shorter words (ok, ve, m) are not judged. A CJK bigram is, though it has two characters: two Han, kana or Hangul
# characters are a word's worth (薬局, 冷蔵), where two Latin letters are mostly noise; a lone CJK character (a
# particle such as の between Latin words) is not judged.
MIN_UNEXPLAINED_CHARS = 3


@dataclass(frozen=True)
class LexicalEvidence:
    """The turn's words against the corpus vocabulary and against the top candidate's text.

    ``unexplained``: content words no card uses at all (not even in another form), judged only when ``judged``
    (the cards are written in the turn's language, or the thresholds ignore languages). ``language`` /
    ``top_language``: the turn's and its top card's detected language ("" when nothing tells).
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
    unknown: list[str] = []
    siblings: list[str] = []
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
