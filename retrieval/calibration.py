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
(a setting at the edge of a cliff of false refusals is not chosen); from synthetic answerable turns a threshold
is only relaxed, and only as far as one of them needs (of equal values, the nearest the defaults). The report gives
the held-out side: the answerable third never used to choose, and the pool's test split.

A calibration is kept in the corpus's store (collection ``refusal-calibrations``, one row per corpus fingerprint
and pair of models), so every process on that store uses it. The shipped cards keep the defaults tuned on their
dev splits (``scripts/tune_refusal.py``); their calibration is a report only.
"""

from __future__ import annotations

import dataclasses
import functools
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

from retrieval import crosslingual, gate_evidence, ood_examples
from retrieval.calibration_store import COLLECTION, Calibration, _analyses, calibration_key, load, save  # noqa: F401
from retrieval.corpus import LabeledQuery, fingerprint  # noqa: F401 (scripts use calibration.fingerprint)
from retrieval.near_negatives import near_turns, within_floor
from retrieval.parents import best_per_parent
from retrieval.refusal_evidence import Candidate, RefusalEvidence, gather, lexical_evidence
from retrieval.refusal_gates import judge
from retrieval.refusal_thresholds import MULTILINGUAL_Z_OFF, RefusalThresholds
from retrieval.refusal_vocabulary import Vocabulary
from retrieval.settings import PROJECT_ROOT, Settings
from retrieval.tokenize import tokenize
from retrieval.types import Card

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
    "min_multilingual_z": [MULTILINGUAL_Z_OFF] + [round(0.5 + 0.1 * i, 1) for i in range(31)],  # off, 0.5 .. 3.5
    "min_answerability": [round(-10 + 0.25 * i, 2) for i in range(41)] + [round(0.05 * i, 2) for i in range(1, 20)],
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
        ("min_multilingual_z",),
        ("min_cross_encoder", "min_rescue_cosine"),
        ("min_cross_encoder_foreign", "min_multilingual_cosine"),
    ),
    "rrf_only": (("min_fallback_cosine",),),
    "dense_only": (("min_dense_only_cosine",),),
}


def start_from(settings: Settings) -> RefusalThresholds:
    """Where the search starts: the settings' thresholds (the defaults tuned on the shipped dev sets)."""
    from retrieval.refusal_turn import refusal_thresholds

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


def _split(texts: Sequence[str], origin: str, side: str = "answerable") -> list[CalTurn]:
    """Two thirds to fit, one third held out, by a hash of the text (stable across runs and machines)."""

    def held(text: str) -> bool:
        return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) % 3 == 0

    return [CalTurn(t, side, "held" if held(t) else "fit", origin) for t in texts]


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
    multilingual_null: tuple[float, float, float, int] | None = None  # refusal_gates' (full level, another language)
    answerability: tuple[str, float] | None = None  # REFUSAL_MODEL's name and best score (full level)


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
    if not found.candidates or found.multilingual_null is not None:
        return found
    lexical = lexical_evidence(turn, found.candidates[0].text, vocabulary)
    if not (lexical.foreign or lexical.unreadable):
        return found
    try:
        cosine = found.multilingual_cosine
        cosine = crosslingual.cosine(turn, found.candidates[0].text) if cosine is None else cosine
        null = crosslingual.null(turn, [c.text for c in found.candidates])
        return dataclasses.replace(found, multilingual_cosine=cosine, multilingual_null=null)
    except Exception:  # no e5: the English cosine judges, as in the pipeline
        return found


def level_evidence(turn: str, level: str, found: LevelCandidates, vocabulary: Vocabulary) -> RefusalEvidence | None:
    """The rule's evidence from a level's candidates (None: no candidate, the pipeline refuses)."""
    if not found.candidates:
        return None
    evidence = gather(
        turn,
        level,
        found.candidates,
        vocabulary,
        found.bm25_parents,
        found.dense_parents,
        multilingual_cosine=found.multilingual_cosine,
        ood=found.ood,
    )
    return dataclasses.replace(evidence, multilingual_null=found.multilingual_null, answerability=found.answerability)


def refused(evidence: RefusalEvidence | None, thresholds: RefusalThresholds) -> bool:
    return True if evidence is None else judge(evidence, thresholds).refused


# ------------------------------------------------------------------------------------------------ the search
Evidence = RefusalEvidence | None
# Per index into the grids of a group: (out-of-domain turns refused, answerable turns refused per group).
_Counts = dict[tuple[int, ...], tuple[int, tuple[int, ...]]]


def choose(
    groups: Sequence[tuple[Sequence[Evidence], int]],
    negatives: Sequence[Evidence],
    level: str,
    start: RefusalThresholds,
    search: Sequence[Sequence[str]] | None = None,
    relax_only: bool = False,
    near: Sequence[Evidence] = (),
) -> RefusalThresholds:
    """The thresholds of ``level``, group of thresholds by group (``SEARCH[level]``) from ``start``: the values
    refusing the most ``negatives`` while each group of answerable turns ``(turns, max_false)`` has at most
    ``max_false`` refused, *also* with any one threshold one grid step stricter (a setting at the edge of a cliff
    of false refusals is not chosen); ties go to the most lenient values (the grids run lenient first). When no
    values keep within the budgets (another test refuses the answerable turns), the fewest refused wins.
    ``search``: other groups of thresholds to search than ``SEARCH[level]``. ``relax_only``: no threshold
    stricter than ``start``'s (answerable turns written from the cards are easier than real ones: they may show
    that a default refuses too much, never that a stricter one is safe); then ties go to the values nearest
    ``start``'s, not the most lenient: a threshold loosens only as far as an answerable turn needs, not across a
    plateau where no measured turn changes side (near-topic turns no generated turn represents sit there).
    ``near``: near-topic out-of-domain turns (``retrieval.near_negatives``): no value refusing fewer of them than
    the group's values before it is chosen."""
    current = start
    for names in SEARCH[level] if search is None else search:
        grids = [_no_stricter(GRID[n], getattr(start, n)) if relax_only else GRID[n] for n in names]
        counts: _Counts = {}
        near_counts: dict[tuple[int, ...], int] = {}
        for index in itertools.product(*(range(len(g)) for g in grids)):
            th = dataclasses.replace(current, **{n: g[i] for n, g, i in zip(names, grids, index)})
            near_counts[index] = sum(refused(e, th) for e in near)
            counts[index] = (
                sum(refused(e, th) for e in negatives),
                tuple(sum(refused(e, th) for e in turns) for turns, _ in groups),
            )
        values = [getattr(current, n) for n in names]
        at = tuple(g.index(v) for g, v in zip(grids, values)) if all(v in g for g, v in zip(grids, values)) else None
        rank = functools.partial(_rank, counts, groups)
        options = within_floor(near_counts, at)
        if relax_only and at is not None:  # of equals, the values nearest the start: loosen only as evidence asks
            options = sorted(options, key=lambda i: sum(abs(a - b) for a, b in zip(i, at)))
        best = max(options, key=rank)  # max keeps the first of equals: the most lenient (or nearest the start)
        current = dataclasses.replace(current, **{n: g[i] for n, g, i in zip(names, grids, best)})
    return current


def _within(counts: _Counts, groups: Sequence[tuple[Sequence[Evidence], int]], index: tuple[int, ...]) -> bool:
    """The values at ``index`` refuse at most each group's budget of answerable turns."""
    return all(n <= budget for n, (_, budget) in zip(counts[index][1], groups))


def _rank(
    counts: _Counts, groups: Sequence[tuple[Sequence[Evidence], int]], index: tuple[int, ...]
) -> tuple[bool, int, int]:
    """How ``choose`` ranks the values at ``index``: safe (within the budgets, also one grid step stricter on any
    threshold) first, then the most out-of-domain turns refused; unsafe ones by the fewest answerable refused."""
    neg, pos = counts[index]
    stricter = [index[:k] + (index[k] + 1,) + index[k + 1 :] for k in range(len(index))]
    safe = _within(counts, groups, index) and all(s not in counts or _within(counts, groups, s) for s in stricter)
    return (safe, neg if safe else -sum(pos), -sum(pos))


def _no_stricter(grid: list[Any], value: Any) -> list[Any]:
    """The grid's values up to ``value`` (grids run lenient first); ``value`` itself kept even if off the grid."""
    cut = grid.index(value) + 1 if value in grid else next((i for i, g in enumerate(grid) if g > value), len(grid))
    return grid[:cut] if value in grid else [*grid[:cut], value]


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
    near_side = _split(
        near_turns(vocabulary, [c.title for c in cards], seed=seed), "near", "near"
    )  # the corpus's words, other domains
    turns = answerable_turns(queries, cards, vocabulary, seed) + pool_side + near_side
    probe = settings.replace(
        refusal_rule="cosine", min_similarity=-1.0, rerank_timeout_ms=600_000, dense_timeout_ms=600_000
    )
    evidence: list[dict[str, RefusalEvidence | None]] = []
    for i, turn in enumerate(turns):
        result = retriever.retrieve(turn.text, probe, prescore=False)
        found = gate_evidence.with_model(
            level_candidates(retriever, turn.text, result, settings.top_k), turn.text, settings
        )
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
    loose = chosen  # the same search without the near-topic floor: what the floor costs, for the report
    for level in LEVELS:
        fit = [(group("answerable", "fit", level), max_false)]
        ood = group("ood", "fit", level)
        chosen = choose(fit, ood, level, chosen, relax_only=synthetic, near=group("near", "fit", level))
        loose = choose(fit, ood, level, loose, relax_only=synthetic)
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
        "refusal_model": settings.refusal_model,
        "levels": {},
    }
    sides = [(side, split) for side in ("answerable", "ood", "near") for split in ("fit", "held")]
    for key, th in (("levels", chosen), ("without_near_floor", loose)):
        rows = {
            lv: {f"{a}_{b}": [sum(refused(e, th) for e in group(a, b, lv)), len(group(a, b, lv))] for a, b in sides}
            for lv in LEVELS
        }
        report[key] = rows
    report["near_floor_kept"] = {
        k: [v, getattr(loose, k)] for k, v in chosen.to_dict().items() if k != "source" and getattr(loose, k) != v
    }  # chosen vs without the floor
    return Calibration(chosen, report)


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
            + (f", near-topic turns refused {row['near_held'][0]}/{row['near_held'][1]}" if "near_held" in row else "")
        )
    kept = r.get("near_floor_kept")
    if kept:  # what the near-topic floor cost: the thresholds it kept from loosening, as chosen / without it
        lines.append("kept by the near-topic turns: " + ", ".join(f"{k} {a} (else {b})" for k, (a, b) in kept.items()))
    return "\n".join(lines)


def pool_available(path: Path = POOL) -> bool:
    return path.exists()
