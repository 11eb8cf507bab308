"""Refusal thresholds per corpus: chosen from the corpus's own evidence, stored with it, reported and re-run.

The refusal rule (``retrieval.refusal``) has thresholds on model scores whose scale depends on the corpus: an
open-domain corpus (bicycles, scientific abstracts) sits elsewhere on the cross-encoder's scale than the shipped
medication cards, and its claims name genes no abstract spells the same way. ``calibrate`` picks a corpus's
thresholds from two sides:

- **answerable turns** (must be answered): the corpus's labeled turns when it has at least ``MIN_LABELED`` of them,
  else synthetic ones built from its cards (``synthetic_turns``: a card's title, its first sentence, and that
  sentence without its two rarest words, a rough paraphrase);
- **out-of-domain turns** (should be refused): the pool that ships with the project (``corpus/ood_pool.jsonl``:
  other domains, near misses, chit-chat, gibberish, several languages; its ``split`` field says dev or test).

Each turn runs once through the pipeline (nothing cut by the cosine, the old cosine rule so that nothing is
refused); the evidence of each level (``full``, ``rrf_only``, ``dense_only``) is rebuilt from that one result.
Thresholds are chosen on the fitting halves (2/3 of the answerable turns, the pool's dev split): the most
out-of-domain turns refused with at most ``max_false`` answerable turns refused, *also* one grid step stricter
(a setting at the edge of a cliff of false refusals is not chosen). The report gives the held-out side: the
answerable third never used to choose, and the pool's test split.

A calibration is kept in the corpus's store (collection ``refusal-calibrations``, one row per corpus fingerprint
and pair of models), so every process on that store uses it. The shipped cards keep the defaults tuned on their
dev splits (``scripts/tune_refusal.py``); their calibration is a report only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval import crosslingual, ood_examples
from retrieval.corpus import LabeledQuery, fingerprint
from retrieval.parents import best_per_parent
from retrieval.refusal import (
    SCRIPT_RULE,
    Candidate,
    RefusalEvidence,
    RefusalThresholds,
    Vocabulary,
    decide,
    gather,
    lexical_evidence,
)
from retrieval.settings import PROJECT_ROOT, Settings
from retrieval.tokenize import CJK_ANALYSIS, MARK_ANALYSIS, changed_by_marks, has_cjk, main_script, tokenize
from retrieval.types import Card, Chunk

COLLECTION = "refusal-calibrations"
POOL = PROJECT_ROOT / "corpus" / "ood_pool.jsonl"
LEVELS = ("full", "rrf_only", "dense_only")
MIN_LABELED = 20  # fewer labeled answerable turns than this: synthetic ones from the cards are used
MAX_POSITIVES = 90  # answerable turns run, at most (2/3 fit, 1/3 held out)
MAX_POOL_DEV = 120  # out-of-domain turns to fit on, at most
MAX_POOL_TEST = 60  # out-of-domain turns held out, at most
FALSE_REFUSAL_SHARE = 0.01  # answerable turns of the fitting half that may be refused (rounded down)

# The grid each threshold is searched on. Cosines are absolute (the corpus's embedder's scale).
GRID: dict[str, list[Any]] = {
    "min_cross_encoder": [round(-10 + 0.25 * i, 2) for i in range(57)],  # -10 .. 4
    "min_rescue_cosine": [round(0.45 + 0.01 * i, 2) for i in range(46)],  # 0.45 .. 0.90
    "min_cross_encoder_foreign": [round(-12 + 0.5 * i, 1) for i in range(33)],  # -12 .. 4
    "min_multilingual_cosine": [round(0.70 + 0.01 * i, 2) for i in range(21)],  # 0.70 .. 0.90
    "max_unexplained_words": [99, 4, 3, 2, 1, 0],
    "min_cross_encoder_unexplained": [50.0] + [round(8 - 0.5 * i, 1) for i in range(25)],  # 50, 8 .. -4
    "check_identifiers": [False, True],
    "min_known_words": [0, 1],
    "max_ood_margin": [1.0] + [round(0.10 - 0.01 * i, 2) for i in range(21)],  # off, 0.10 .. -0.10
    "min_fallback_cosine": [round(0.40 + 0.01 * i, 2) for i in range(51)],
    "min_dense_only_cosine": [round(0.40 + 0.01 * i, 2) for i in range(51)],
}
# Searched per level, in this order, one group at a time (a group's thresholds jointly: the cross-encoder and
# its cosine rescue trade against each other); the shared gates on full (the level with the most evidence).
SEARCH = {
    "full": (
        ("min_cross_encoder_foreign", "min_multilingual_cosine"),
        ("min_cross_encoder", "min_rescue_cosine"),
        ("max_unexplained_words", "min_cross_encoder_unexplained"),
        ("min_known_words",),
        ("check_identifiers",),
        ("max_ood_margin",),
        ("min_cross_encoder", "min_rescue_cosine"),
        ("min_cross_encoder_foreign", "min_multilingual_cosine"),
    ),
    "rrf_only": (("min_fallback_cosine",),),
    "dense_only": (("min_dense_only_cosine",),),
}


def start_from(settings: Settings) -> RefusalThresholds:
    """Where the search starts: the settings' thresholds (the defaults tuned on the shipped dev sets)."""
    from retrieval.pipeline import refusal_thresholds

    return dataclasses.replace(refusal_thresholds(settings), source="")


@dataclass(frozen=True)
class CalTurn:
    """A turn calibration runs: its text, ``side`` (answerable / ood), ``split`` (fit / held), where it came
    from (labeled, synthetic, pool)."""

    text: str
    side: str
    split: str
    origin: str


# ------------------------------------------------------------------------------------------------- the turns
def synthetic_turns(cards: Sequence[Card], vocabulary: Vocabulary, n: int, seed: int = 0) -> list[str]:
    """Answerable turns written from the cards: a title, a first sentence (at most 25 words), and that sentence
    without its two rarest words (a paraphrase drops the card's own terms). At most ``n``, cards sampled."""
    rng = random.Random(seed)
    picked = rng.sample(list(cards), min(len(cards), max(1, n // 2)))
    out: list[str] = []
    for card in picked:
        first = re.split(r"(?<=[.!?])\s+", card.text.strip(), maxsplit=1)[0]
        first = " ".join(first.split()[:25])
        forms = []
        if card.title and card.title != card.id and len(tokenize(card.title)) >= 2:
            forms.append(card.title)
        if len(tokenize(first)) >= 3:
            forms.append(first)
            words = first.split()
            rare = sorted(range(len(words)), key=lambda i: -vocabulary.idf(words[i].lower().strip(".,;:!?()")))[:2]
            dropped = " ".join(w for i, w in enumerate(words) if i not in rare)
            if len(tokenize(dropped)) >= 3:
                forms.append(dropped)
        if forms:
            out.append(rng.choice(forms))
            if len(forms) > 1 and rng.random() < 0.5:
                out.append(rng.choice([f for f in forms if f != out[-1]]))
    return list(dict.fromkeys(out))[:n]


def _split(texts: Sequence[str], origin: str) -> list[CalTurn]:
    """Two thirds to fit, one third held out, by a hash of the text (stable across runs and machines)."""

    def held(text: str) -> bool:
        return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) % 3 == 0

    return [CalTurn(t, "answerable", "held" if held(t) else "fit", origin) for t in texts]


def answerable_turns(
    queries: Sequence[LabeledQuery], cards: Sequence[Card], vocabulary: Vocabulary, seed: int = 0
) -> list[CalTurn]:
    """The corpus's labeled answerable turns (at most ``MAX_POSITIVES``), or synthetic ones if it has too few."""
    labeled = list(dict.fromkeys(q.text for q in queries if q.relevant and q.category != "no_match"))
    if len(labeled) >= MIN_LABELED:
        rng = random.Random(seed)
        return _split(rng.sample(labeled, min(len(labeled), MAX_POSITIVES)), "labeled")
    return _split(synthetic_turns(cards, vocabulary, MAX_POSITIVES, seed), "synthetic")


def pool_turns(path: Path = POOL, seed: int = 0) -> list[CalTurn]:
    """The shipped out-of-domain pool: dev turns to fit on, test turns held out (sampled, at most
    ``MAX_POOL_DEV`` / ``MAX_POOL_TEST``)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random(seed)
    out = []
    for split, limit, name in (("dev", MAX_POOL_DEV, "fit"), ("test", MAX_POOL_TEST, "held")):
        texts = [r["text"] for r in rows if r.get("split", "dev") == split]
        out += [CalTurn(t, "ood", name, "pool") for t in rng.sample(texts, min(limit, len(texts)))]
    return out


# ---------------------------------------------------------------------------------------------- the evidence
@dataclass(frozen=True)
class LevelCandidates:
    """What the rule needs of one turn at one level, before the rule: its top_k cards (best first) and each
    branch's card ids (None: that branch is not used at this level)."""

    candidates: tuple[Candidate, ...]
    bm25_parents: tuple[str, ...] | None
    dense_parents: tuple[str, ...] | None
    multilingual_cosine: float | None = None  # e5's, for a turn in a language few cards use (full level)
    ood: tuple[str, float, float] | None = None  # the closest out-of-domain example, its cosine, the closest card's


def level_candidates(retriever: Any, turn: str, result: Any, top_k: int) -> dict[str, LevelCandidates]:
    """Each level's candidates from one result run with nothing cut (``min_similarity=-1``): ``full`` from the
    reranked order, ``rrf_only`` from the fused order, ``dense_only`` from the dense branch alone."""
    logits = {h.chunk_id: h.score for h in result.reranked}
    store = retriever.dense
    qvec = retriever.embed_query(turn).value if store is not None else None

    def cards(hits: Sequence[Any], with_logits: bool) -> tuple[Candidate, ...]:
        return tuple(
            Candidate(
                h.parent_id,
                h.chunk_id,
                retriever.by_id[h.chunk_id].indexed_text,
                store.similarity(qvec, h.chunk_id) if qvec is not None else None,
                logits.get(h.chunk_id) if with_logits else None,
            )
            for h in best_per_parent(hits)[:top_k]
        )

    both = result.bm25.usable and result.dense.usable
    bm25 = tuple(h.parent_id for h in result.bm25.hits) if both else None
    dense = tuple(h.parent_id for h in result.dense.hits) if both else None
    head = cards([*result.reranked, *result.fused[len(result.reranked) :]], True)
    found = {
        "full": LevelCandidates(head, bm25, dense),
        "rrf_only": LevelCandidates(cards(list(result.fused), False), bm25, dense),
        "dense_only": LevelCandidates(cards(list(result.dense.hits), False), None, None),
    }
    found = with_ood(retriever, turn, found)
    return {level: with_multilingual(turn, c, retriever.refusal_vocabulary()) for level, c in found.items()}


def with_ood(retriever: Any, turn: str, found: dict[str, LevelCandidates]) -> dict[str, LevelCandidates]:
    """Each level's candidates with the closest out-of-domain example (``retrieval.ood_examples``, the turn itself
    left out) and the closest card's cosine (the dense branch's top), when there are embeddings."""
    dense = found["dense_only"].candidates
    if retriever.embedder is None or not dense or dense[0].cosine is None or found["full"].ood is not None:
        return found
    near = ood_examples.nearest(
        retriever.embedder, retriever.embed_query(turn).value, turn, getattr(retriever, "ood_covered", frozenset())
    )
    if near is None:
        return found
    ood = (near[0], near[1], dense[0].cosine)
    return {level: dataclasses.replace(c, ood=ood) for level, c in found.items()}


def with_multilingual(turn: str, found: LevelCandidates, vocabulary: Vocabulary) -> LevelCandidates:
    """``found`` with multilingual-e5's cosine of the turn and its top card when the turn is in a language few
    cards use or a script the cross-encoder does not read (what the pipeline would ask e5 for); unchanged
    otherwise, or without e5."""
    if not found.candidates or found.multilingual_cosine is not None:
        return found
    lexical = lexical_evidence(turn, found.candidates[0].text, vocabulary)
    if not (lexical.foreign or lexical.unreadable):
        return found
    try:
        return dataclasses.replace(found, multilingual_cosine=crosslingual.cosine(turn, found.candidates[0].text))
    except Exception:  # no e5: the English cosine judges, as in the pipeline
        return found


def level_evidence(turn: str, level: str, found: LevelCandidates, vocabulary: Vocabulary) -> RefusalEvidence | None:
    """The rule's evidence from a level's candidates (None: no candidate, the pipeline refuses)."""
    if not found.candidates:
        return None
    return gather(
        turn,
        level,
        found.candidates,
        vocabulary,
        found.bm25_parents,
        found.dense_parents,
        multilingual_cosine=found.multilingual_cosine,
        ood=found.ood,
    )


def refused(evidence: RefusalEvidence | None, thresholds: RefusalThresholds) -> bool:
    return True if evidence is None else decide(evidence, thresholds).refused


# ------------------------------------------------------------------------------------------------ the search
Evidence = RefusalEvidence | None


def choose(
    groups: Sequence[tuple[Sequence[Evidence], int]],
    negatives: Sequence[Evidence],
    level: str,
    start: RefusalThresholds,
    search: Sequence[Sequence[str]] | None = None,
    relax_only: bool = False,
) -> RefusalThresholds:
    """The thresholds of ``level``, group of thresholds by group (``SEARCH[level]``) from ``start``: the values
    refusing the most ``negatives`` while each group of answerable turns ``(turns, max_false)`` has at most
    ``max_false`` refused, *also* with any one threshold one grid step stricter (a setting at the edge of a cliff
    of false refusals is not chosen); ties go to the most lenient values (the grids run lenient first). When no
    values keep within the budgets (another test refuses the answerable turns), the fewest refused wins.
    ``search``: other groups of thresholds to search than ``SEARCH[level]``. ``relax_only``: no threshold
    stricter than ``start``'s (answerable turns written from the cards are easier than real ones: they may show
    that a default refuses too much, never that a stricter one is safe)."""
    current = start
    for names in SEARCH[level] if search is None else search:
        grids = [_no_stricter(GRID[n], getattr(start, n)) if relax_only else GRID[n] for n in names]
        counts: dict[tuple[int, ...], tuple[int, tuple[int, ...]]] = {}
        for index in itertools.product(*(range(len(g)) for g in grids)):
            th = dataclasses.replace(current, **{n: g[i] for n, g, i in zip(names, grids, index)})
            counts[index] = (
                sum(refused(e, th) for e in negatives),
                tuple(sum(refused(e, th) for e in turns) for turns, _ in groups),
            )

        def within(index: tuple[int, ...]) -> bool:
            return all(n <= budget for n, (_, budget) in zip(counts[index][1], groups))

        def key(index: tuple[int, ...]) -> tuple:
            neg, pos = counts[index]
            stricter = [index[:k] + (index[k] + 1,) + index[k + 1 :] for k in range(len(index))]
            safe = within(index) and all(s not in counts or within(s) for s in stricter)
            return (safe, neg if safe else -sum(pos), -sum(pos))

        best = max(counts, key=key)  # max keeps the first of equals: the most lenient
        current = dataclasses.replace(current, **{n: g[i] for n, g, i in zip(names, grids, best)})
    return current


def _no_stricter(grid: list[Any], value: Any) -> list[Any]:
    """The grid's values up to ``value`` (grids run lenient first); ``value`` itself kept even if off the grid."""
    cut = grid.index(value) + 1 if value in grid else next((i for i, g in enumerate(grid) if g > value), len(grid))
    return grid[:cut] if value in grid else [*grid[:cut], value]


@dataclass(frozen=True)
class Calibration:
    """A corpus's calibrated thresholds and the report that justifies them (JSON-ready with ``to_dict``)."""

    thresholds: RefusalThresholds
    report: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"thresholds": self.thresholds.to_dict(), "report": self.report}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        return cls(RefusalThresholds.from_dict(data["thresholds"]), dict(data["report"]))


def calibrate(
    retriever: Any,
    queries: Sequence[LabeledQuery],
    cards: Sequence[Card],
    settings: Settings,
    *,
    name: str = "",
    pool: Path = POOL,
    progress: Callable[[int, int], None] | None = None,
    seed: int = 0,
) -> Calibration:
    """Run the answerable and pool turns through ``retriever`` and choose the thresholds (see the module doc)."""
    started = time.perf_counter()
    vocabulary = retriever.refusal_vocabulary()
    pool_side = pool_turns(pool, seed)
    if getattr(retriever, "ood_covered", None) is not None:  # another corpus than the shipped cards: its own turns
        own = ood_examples.covered(retriever, [t.text for t in pool_side])  # of the pool are not out of domain
        pool_side = [t for t in pool_side if t.text not in own]
    turns = answerable_turns(queries, cards, vocabulary, seed) + pool_side
    probe = settings.replace(
        refusal_rule="cosine", min_similarity=-1.0, rerank_timeout_ms=600_000, dense_timeout_ms=600_000
    )
    evidence: list[dict[str, RefusalEvidence | None]] = []
    for i, turn in enumerate(turns):
        result = retriever.retrieve(turn.text, probe, prescore=False)
        found = level_candidates(retriever, turn.text, result, settings.top_k)
        evidence.append({lv: level_evidence(turn.text, lv, found[lv], vocabulary) for lv in LEVELS})
        if progress is not None:
            progress(i + 1, len(turns))
    run_s = time.perf_counter() - started

    def group(side: str, split: str, level: str) -> list[RefusalEvidence | None]:
        return [ev[level] for t, ev in zip(turns, evidence) if t.side == side and t.split == split]

    n_fit = sum(t.side == "answerable" and t.split == "fit" for t in turns)
    max_false = math.floor(FALSE_REFUSAL_SHARE * n_fit)
    chosen = start_from(settings)
    synthetic = bool(turns) and turns[0].origin == "synthetic"
    for level in LEVELS:
        chosen = choose(
            [(group("answerable", "fit", level), max_false)],
            group("ood", "fit", level),
            level,
            chosen,
            relax_only=synthetic,
        )
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    chosen = dataclasses.replace(chosen, source=f"calibrated for {name or 'this corpus'} on {when}")
    report: dict[str, Any] = {
        "corpus": name,
        "when": when,
        "seconds": round(time.perf_counter() - started, 1),
        "run_seconds": round(run_s, 1),
        "turns": len(turns),
        "answerable_origin": turns[0].origin if turns else "",
        "max_false_refusals_fit": max_false,
        "embedder": settings.embedding_model,
        "reranker": settings.reranker_model,
        "levels": {},
    }
    for level in LEVELS:
        row = {}
        for side, split in (("answerable", "fit"), ("answerable", "held"), ("ood", "fit"), ("ood", "held")):
            evs = group(side, split, level)
            row[f"{side}_{split}"] = [sum(refused(e, chosen) for e in evs), len(evs)]
        report["levels"][level] = row
    return Calibration(chosen, report)


# ------------------------------------------------------------------------------------------------- the store
def calibration_key(chunks: Sequence[Chunk], settings: Settings) -> str:
    """One calibration per corpus content and pair of models (a cosine threshold belongs to its embedder). A corpus
    with Chinese, Japanese or Korean text also names the CJK analysis its words were counted with
    (``tokenize.CJK_ANALYSIS``): one calibrated when a whole CJK run was one word is not reused. So does a corpus
    with combining marks or text not in normal form C (Hindi, Thai, Arabic with harakat, decomposed Latin:
    ``tokenize.MARK_ANALYSIS``), whose words were cut at the marks; and a corpus with a card mostly in a script
    the cross-encoder does not read (Cyrillic, Greek, Arabic...: ``refusal.SCRIPT_RULE``), whose turns were judged
    by its score and are now judged by multilingual-e5. Other corpora (English, Spanish, Portuguese in NFC) keep
    their key, their tokens and rule are what they were."""
    base = fingerprint(chunks, settings.embedding_model, settings.reranker_model)
    extra = _analyses(base, chunks)
    return fingerprint(chunks, settings.embedding_model, settings.reranker_model, *extra) if extra else base


_ANALYSES: dict[str, tuple[str, ...]] = {}  # calibration key without markers -> the markers its corpus needs
_MAX_ANALYSES = 64


def _analyses(base: str, chunks: Sequence[Chunk]) -> tuple[str, ...]:
    """The analysis markers of ``calibration_key`` for these chunks, found once per corpus content and pair of
    models: the key is computed at every re-read of a corpus's calibration (``corpora.CALIBRATION_REREAD_S``), and
    three passes over every chunk's text took 0.13 s for SciFact's 23,341 sub-chunks, where its hash takes 0.02 s."""
    found = _ANALYSES.get(base)
    if found is None:
        found = ()
        if any(has_cjk(c.title) or has_cjk(c.text) for c in chunks):
            found += (CJK_ANALYSIS,)
        if any(changed_by_marks(c.title) or changed_by_marks(c.text) for c in chunks):
            found += (MARK_ANALYSIS,)
        if any(main_script(c.text) for c in chunks):
            found += (SCRIPT_RULE,)
        if len(_ANALYSES) >= _MAX_ANALYSES:
            _ANALYSES.pop(next(iter(_ANALYSES)))
        _ANALYSES[base] = found
    return found


def _collection(settings: Settings):
    from retrieval.corpus_store import client_for

    return client_for(settings).get_or_create_collection(COLLECTION, metadata={"hnsw:space": "cosine"})


def save(settings: Settings, chunks: Sequence[Chunk], calibration: Calibration) -> None:
    """Keep ``calibration`` in the store of ``settings`` (replacing an earlier one of the same corpus and models)."""
    key = calibration_key(chunks, settings)
    _collection(settings).upsert(
        ids=[key],
        documents=[json.dumps(calibration.to_dict())],
        embeddings=[[1.0]],
        metadatas=[
            {"corpus": str(calibration.report.get("corpus", "")), "when": str(calibration.report.get("when", ""))}
        ],
    )


def load(settings: Settings, chunks: Sequence[Chunk]) -> Calibration | None:
    """The stored calibration of this corpus and pair of models, or None (never calibrated, or unreadable)."""
    try:
        got = _collection(settings).get(ids=[calibration_key(chunks, settings)], include=["documents"])
        docs = got.get("documents") or []
        return Calibration.from_dict(json.loads(docs[0])) if docs and docs[0] else None
    except Exception:  # a store that cannot be read, or a record of an older shape: no calibration
        return None


def describe(calibration: Calibration | None) -> str:
    """One paragraph for the Data tab and the CLI: what was measured, per level, held out."""
    if calibration is None:
        return "not calibrated: the default thresholds apply"
    r = calibration.report
    lines = [
        f"{calibration.thresholds.source}: {r['turns']} turns ({r['answerable_origin']} answerable turns + the "
        f"out-of-domain pool) in {r['seconds']} s"
    ]
    for level, row in r["levels"].items():
        ah, oh = row["answerable_held"], row["ood_held"]
        lines.append(
            f"{level}: held-out out-of-domain turns refused {oh[0]}/{oh[1]}, held-out answerable turns "
            f"refused {ah[0]}/{ah[1]} (fit: {row['ood_fit'][0]}/{row['ood_fit'][1]} and "
            f"{row['answerable_fit'][0]}/{row['answerable_fit'][1]})"
        )
    return "\n".join(lines)


def pool_available(path: Path = POOL) -> bool:
    return path.exists()
