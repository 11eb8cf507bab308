"""The ready exercises of the RRF class, and the sets a class link names (``?exercises=a,b,c``).

Each exercise follows the class on hybrid search and rank fusion: the worked example (BM25 [A,B,C,D], dense
[C,A,E,B], k = 60), a document one branch alone found, k small against k large, a tie, weighted RRF, raw scores
against min-max against RRF, and one real turn of the shipped labeled set where fusion ranks the relevant card
below a single branch (``corpus/exercise_hybrid_loss.json``, written by ``scripts/hybrid_loss_exercise.py`` from the
real pipeline and checked against it by ``tests/test_exercises.py``).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from retrieval.exercises import Exercise

CLASS_LISTS = {"BM25": ("A", "B", "C", "D"), "Dense": ("C", "A", "E", "B")}
RAW_SCORES = {
    "BM25": (("A", 12.4), ("B", 9.1), ("C", 7.7), ("D", 3.2)),
    "Dense": (("C", 0.82), ("A", 0.79), ("E", 0.75), ("B", 0.61)),
}
HYBRID_LOSS_FILE = Path(__file__).resolve().parent.parent / "corpus" / "exercise_hybrid_loss.json"
HYBRID_LOSS_ID = "hybrid-not-always"
HYBRID_LOSS_TURN = "q038"  # dense alone ranks its card first; the weighted fusion, second
MAX_SET = 12

_READY = (
    Exercise(
        id="worked-example",
        title="The class's worked example",
        question="Two rankings of the same turn, k = 60. Fuse them with RRF: enter the fused order, best first.",
        kind="order",
        lists=dict(CLASS_LISTS),
        hints=(
            "RRF(d) = Σ 1/(k + rank): only positions count, never the engines' scores.",
            "A document missing from a list adds nothing for that list: D and E have one term each.",
            "A = 1/(60+1) + 1/(60+2). Work out C (3rd and 1st) and B (2nd and 4th) the same way.",
        ),
        lesson=(
            "A wins by being near the top of both lists; C, first in dense but third in BM25, comes second. "
            "D and E, seen by one engine only, fall to the bottom: appearing in both branches is a strong signal."
        ),
        source="Class 103, worked example",
    ),
    Exercise(
        id="one-branch-only",
        title="A document one branch alone found",
        question=(
            "Same lists, k = 60. D is found by BM25 only (4th). What is D's RRF score, to five decimals (half up)?"
        ),
        kind="score",
        lists=dict(CLASS_LISTS),
        target="D",
        hints=(
            "A list that does not hold D adds nothing: D's score has one term.",
            "1/(60+4) = 0.015625 exactly: the sixth decimal is a 5.",
            "Half up: a 5 in the sixth decimal rounds the fifth decimal up.",
        ),
        lesson=(
            "One term, one list: D (0.01563) ends below every document both engines saw. A document seen by only "
            "one branch can still be the right one; fusion only says the engines did not agree on it."
        ),
        source="Class 103, worked example",
    ),
    Exercise(
        id="k-small",
        title="k small: one top rank against consensus",
        question="BM25 [Z, A, B, C], dense [W, A, D, Z], k = 1. Which document wins the fusion?",
        kind="winner",
        lists={"BM25": ("Z", "A", "B", "C"), "Dense": ("W", "A", "D", "Z")},
        k=1,
        hints=(
            "With k = 1 the first place is worth 1/2 and the second 1/3: the top of a list dominates.",
            "Z = 1/(1+1) + 1/(1+4); A = 1/(1+2) + 1/(1+2).",
        ),
        lesson=(
            "With k = 1, Z's first place in BM25 (1/2) outweighs A's consensus (2nd in both). k = 60 is no law: "
            "the next exercise runs the same lists with k = 60."
        ),
        source="Class 103, common mistake 3: k = 60 is no law",
    ),
    Exercise(
        id="k-large",
        title="k large: consensus wins",
        question="The same lists, BM25 [Z, A, B, C], dense [W, A, D, Z], now with k = 60. Which document wins?",
        kind="winner",
        lists={"BM25": ("Z", "A", "B", "C"), "Dense": ("W", "A", "D", "Z")},
        k=60,
        hints=(
            "With k = 60 the first place is worth 1/61 and the fourth 1/64: ranks count almost the same.",
            "Compare Z = 1/61 + 1/64 with A = 2/62.",
        ),
        lesson=(
            "A large k flattens the credit of the top ranks: A, second in both lists, beats Z, first in one and "
            "fourth in the other. The winner changed with k alone: validate k on labeled turns."
        ),
        source="Class 103, common mistake 3: k = 60 is no law",
    ),
    Exercise(
        id="tie",
        title="A tie and how it is broken",
        question="BM25 [M, K, C], dense [K, M, D], k = 60. Enter the fused order, best first.",
        kind="order",
        lists={"BM25": ("M", "K", "C"), "Dense": ("K", "M", "D")},
        hints=(
            "M and K each have one first place and one second place: the same two terms.",
            "A tie needs a rule. This project breaks ties by id, in alphabetical order, so the order never changes.",
            "C and D tie too: 1/(60+3) each.",
        ),
        lesson=(
            "M and K tie exactly (1/61 + 1/62), as do C and D (1/63): the pipeline breaks ties by id, ascending, "
            "so the same lists always fuse to the same order. Another system may break them another way."
        ),
        source="Class 103, RRF",
    ),
    Exercise(
        id="weighted",
        title="Weighted RRF: dense counts twice",
        question=(
            "The class's lists, k = 60, but the dense list has weight 2 (w/(k + rank)). Enter the fused order, "
            "best first."
        ),
        kind="order",
        lists=dict(CLASS_LISTS),
        weights={"BM25": 1.0, "Dense": 2.0},
        hints=(
            "Weighted RRF: each term is w/(k + rank). Dense terms are doubled.",
            "A = 1/(60+1) + 2/(60+2); C = 1/(60+3) + 2/(60+1). They are very close: work to five decimals.",
        ),
        lesson=(
            "Doubling the dense list moves C (first in dense) above A by 0.00001; E, dense only, now beats D "
            "by far. A weight is a decision: tune it on labeled turns, per type of turn if need be."
        ),
        source="Class 103, weighted RRF w_r/(k + rank)",
    ),
    Exercise(
        id="raw-vs-minmax-vs-rrf",
        title="Why not add the scores?",
        question=(
            "The same two rankings with their raw scores: BM25 (unbounded) and dense cosines (at most 1). "
            "Add the raw scores, as the classic mistake does: enter the order the raw sum gives, best first."
        ),
        kind="order",
        lists={},
        method="raw_sum",
        scored=dict(RAW_SCORES),
        hints=(
            "A missing document adds 0 for that list.",
            "BM25's scores are in the tens, the cosines below 1: which list can change the order?",
        ),
        lesson=(
            "The raw sum is BM25's order (A, B, C, D, E): the engine with the larger scale decides, dense has no say. "
            "Min-max to [0, 1] gives dense a voice but depends on each list's spread (the last of a list gets 0); "
            "RRF uses ranks only and needs no calibration."
        ),
        source="Class 103, why fuse ranks and not scores",
    ),
    Exercise(
        id="consensus",
        title="The winner is first nowhere",
        question="BM25 [B, A, D, C], dense [C, A, E, B], k = 60. Which document wins the fusion?",
        kind="winner",
        lists={"BM25": ("B", "A", "D", "C"), "Dense": ("C", "A", "E", "B")},
        hints=("A is second in both lists: 2/62. Compare with B = 1/61 + 1/64 and C = 1/64 + 1/61.",),
        lesson="A wins without being first in any list: RRF rewards consensus, being near the top of several lists.",
        source="Class 103, reading of the worked example",
    ),
)


@functools.cache
def hybrid_loss() -> Exercise | None:
    """The real-turn exercise shipped in ``corpus/exercise_hybrid_loss.json`` (None if the file is missing)."""
    if not HYBRID_LOSS_FILE.exists():
        return None
    return Exercise.from_dict(json.loads(HYBRID_LOSS_FILE.read_text(encoding="utf-8")))


def ready() -> dict[str, Exercise]:
    """Every ready exercise by id, in the class's order (the real turn after the raw scores)."""
    out = {ex.id: ex for ex in _READY}
    real = hybrid_loss()
    if real is not None:
        out[real.id] = real
    return out


def default_set() -> list[str]:
    """The whole class: every ready exercise."""
    return list(ready())


SET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,59}$")


def parse_set(raw: str | None) -> tuple[list[str], list[str]]:
    """The exercise ids a link names (``a,b,c``), and the problems found, each in words (the id is dropped).

    Unknown ids, duplicates and anything over ``MAX_SET`` are reported, never raised: a link is untrusted."""
    known = ready()
    ids: list[str] = []
    unknown: list[str] = []
    problems: list[str] = []
    parts = [p.strip() for p in (raw or "").split(",") if p.strip()]
    for part in parts[: 4 * MAX_SET]:
        if part in ids:
            continue
        if not SET_RE.match(part) or part not in known:
            unknown.append(repr(part[:60]))
            continue
        if len(ids) == MAX_SET:
            problems.append(f"a link opens at most {MAX_SET} exercises; the rest were left out.")
            break
        ids.append(part)
    if unknown:
        names = ", ".join(unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        problems.insert(0, f"no exercise named {names}: the ready ones are {', '.join(known)}.")
    return ids, problems
