"""Classroom exercises on rank fusion: predict, then check, then reveal (pure functions, no page).

An exercise gives ranked lists, a k (and weights, for weighted RRF) and asks one thing: the fused order, the score
of one document, which document wins, or the fused rank of one document. ``check`` compares a student's answer
with the fusion of ``retrieval.fusion`` and says what was right and what differs; ``reveal`` gives the arithmetic
term by term, rounded as the class rounds it: five decimals, half up (``decimal.ROUND_HALF_UP`` on the exact
value), so the class's worked example reads A .03252 > C .03227 > B .03175 > E .01587 > D .01563.

Scores are worked out exactly (``fractions.Fraction``) for the reveal and the rounding; the order is always the one
``reciprocal_rank_fusion`` (or, for the raw-scores exercise, the raw sum / ``convex_fusion``) gives.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

from retrieval.fusion import convex_fusion, reciprocal_rank_fusion
from retrieval.rounding import half_up

Kind = Literal["order", "score", "winner", "rank"]
Method = Literal["rrf", "raw_sum", "min_max"]
KINDS: tuple[str, ...] = ("order", "score", "winner", "rank")
METHODS: tuple[str, ...] = ("rrf", "raw_sum", "min_max")
MAX_ANSWER_CHARS = 400
MAX_LISTS = 4
MAX_ITEMS = 20
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,59}$")


@dataclass(frozen=True)
class Exercise:
    """One exercise: the lists, the question and what the reveal teaches.

    ``lists`` are ranked ids per list name (best first); ``scored`` gives raw scores instead, for the exercise on
    adding scores (``method`` ``raw_sum`` or ``min_max``). ``target`` is the document a ``score`` or ``rank`` question
    is about. ``labels`` say what an id stands for (a card's title); ``relevant`` holds the labeled grades of a real
    turn."""

    id: str
    title: str
    question: str
    kind: Kind
    lists: dict[str, tuple[str, ...]]
    k: int = 60
    weights: dict[str, float] = field(default_factory=dict)
    target: str | None = None
    method: Method = "rrf"
    scored: dict[str, tuple[tuple[str, float], ...]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    relevant: dict[str, int] = field(default_factory=dict)
    hints: tuple[str, ...] = ()
    lesson: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        validate(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``from_dict`` reads it back)."""
        return {
            "id": self.id,
            "title": self.title,
            "question": self.question,
            "kind": self.kind,
            "lists": {n: list(v) for n, v in self.lists.items()},
            "k": self.k,
            "weights": dict(self.weights),
            "target": self.target,
            "method": self.method,
            "scored": {n: [[d, s] for d, s in v] for n, v in self.scored.items()},
            "labels": dict(self.labels),
            "relevant": dict(self.relevant),
            "hints": list(self.hints),
            "lesson": self.lesson,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Exercise:
        """An exercise from ``to_dict``'s shape; a ValueError says which field is wrong."""
        if not isinstance(data, Mapping):
            raise TypeError(f"an exercise is a JSON object, got {type(data).__name__}.")
        try:
            return cls(
                id=str(data["id"]),
                title=str(data["title"]),
                question=str(data["question"]),
                kind=data["kind"],
                lists={str(n): tuple(str(x) for x in v) for n, v in dict(data.get("lists") or {}).items()},
                k=data.get("k", 60),
                weights={str(n): float(w) for n, w in dict(data.get("weights") or {}).items()},
                target=data.get("target"),
                method=data.get("method", "rrf"),
                scored={
                    str(n): tuple((str(d), float(s)) for d, s in v) for n, v in dict(data.get("scored") or {}).items()
                },
                labels={str(n): str(v) for n, v in dict(data.get("labels") or {}).items()},
                relevant={str(n): int(v) for n, v in dict(data.get("relevant") or {}).items()},
                hints=tuple(str(h) for h in data.get("hints") or ()),
                lesson=str(data.get("lesson") or ""),
                source=str(data.get("source") or ""),
            )
        except KeyError as exc:
            raise ValueError(f"an exercise needs the field {exc.args[0]!r}.") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"exercise {str(data.get('id'))[:60]!r}: {exc}") from None


def validate(ex: Exercise) -> None:
    """Raise a ValueError saying what to fix when an exercise cannot be asked or checked."""
    where = f"exercise {ex.id[:60]!r}"
    if not ID_RE.match(ex.id):
        raise ValueError(f"{where}: its id is letters, digits, '-', '_' or '.', at most 60 characters.")
    if ex.kind not in KINDS:
        raise ValueError(f"{where}: kind {ex.kind!r} is not one of {', '.join(KINDS)}.")
    if ex.method not in METHODS:
        raise ValueError(f"{where}: method {ex.method!r} is not one of {', '.join(METHODS)}.")
    if isinstance(ex.k, bool) or not isinstance(ex.k, int) or ex.k < 1:
        raise ValueError(f"{where}: k must be a positive whole number (e.g. 60), got {ex.k!r}.")
    lists = ranked_lists(ex)
    if not lists or len(lists) > MAX_LISTS:
        raise ValueError(f"{where}: give 1 to {MAX_LISTS} ranked lists.")
    for name, items in lists.items():
        if not items or len(items) > MAX_ITEMS:
            raise ValueError(f"{where}: list {name!r} needs 1 to {MAX_ITEMS} ids.")
        bad = [d for d in items if not ID_RE.match(d)]
        if bad:
            raise ValueError(f"{where}: {bad[0][:60]!r} in list {name!r} is not an id (letters, digits, - _ .).")
        if len(set(items)) != len(items):
            raise ValueError(f"{where}: list {name!r} names an id twice.")
    unknown = set(ex.weights) - set(lists)
    if unknown or any(not (0 <= w <= 10) for w in ex.weights.values()):
        raise ValueError(f"{where}: weights are 0 to 10, one per list name ({', '.join(lists)}).")
    if ex.method != "rrf" and not ex.scored:
        raise ValueError(f"{where}: method {ex.method!r} needs raw scores (scored).")
    if ex.kind in ("score", "rank") and ex.target not in documents(ex):
        raise ValueError(f"{where}: a {ex.kind} question needs a target that is in the lists.")


# --------------------------------------------------------------------------------------------------- solving
def ranked_lists(ex: Exercise) -> dict[str, list[str]]:
    """The ranked ids per list (from the raw scores' order when the exercise gives scores)."""
    if ex.scored:
        return {n: [d for d, _ in v] for n, v in ex.scored.items()}
    return {n: list(v) for n, v in ex.lists.items()}


def documents(ex: Exercise) -> list[str]:
    """Every id of the exercise, in order of first appearance."""
    seen: dict[str, None] = {}
    for items in ranked_lists(ex).values():
        seen.update(dict.fromkeys(items))
    return list(seen)


def weight_of(ex: Exercise, name: str) -> Fraction:
    return Fraction(str(ex.weights.get(name, 1.0)))


def exact_scores(ex: Exercise) -> dict[str, Fraction]:
    """Each document's RRF score as an exact fraction: sum of w / (k + rank) over the lists that hold it."""
    out: dict[str, Fraction] = {}
    for name, items in ranked_lists(ex).items():
        w = weight_of(ex, name)
        for rank, doc in enumerate(items, start=1):
            out[doc] = out.get(doc, Fraction(0)) + w / (ex.k + rank)
    return out


def round5(value: float | Fraction | Decimal) -> Decimal:
    """``value`` to five decimals, half up, as the class rounds (0.015625 -> 0.01563): ``retrieval.rounding``."""
    return half_up(value, 5)


def raw_sum(scored: Mapping[str, Sequence[tuple[str, float]]]) -> list[tuple[str, float]]:
    """The mistake the class warns about: raw scores added across lists (a missing document adds 0)."""
    out: dict[str, float] = {}
    for items in scored.values():
        for doc, score in items:
            out[doc] = out.get(doc, 0.0) + score
    return sorted(out.items(), key=lambda item: (-item[1], item[0]))


def fused(ex: Exercise, method: str | None = None) -> list[tuple[str, float]]:
    """The exercise's lists fused by ``method`` (its own by default), best first, ties by id."""
    method = method or ex.method
    if method == "raw_sum":
        return raw_sum(ex.scored)
    if method == "min_max":
        return convex_fusion(ex.scored, ex.weights or None)
    lists = ranked_lists(ex)
    weights = {n: float(weight_of(ex, n)) for n in lists}
    return reciprocal_rank_fusion(lists, k=ex.k, weights=weights)


def fused_order(ex: Exercise) -> list[str]:
    return [doc for doc, _ in fused(ex)]


def expected_answer(ex: Exercise) -> str:
    """The right answer as a student would write it."""
    order = fused_order(ex)
    if ex.kind == "order":
        return ", ".join(order)
    if ex.kind == "winner":
        return order[0]
    if ex.kind == "rank":
        return str(order.index(str(ex.target)) + 1)
    return f"{score_of(ex, str(ex.target))}"


def score_of(ex: Exercise, doc: str) -> Decimal:
    """A document's score under the exercise's method, to five decimals (half up)."""
    if ex.method == "rrf":
        return round5(exact_scores(ex)[doc])
    return round5(dict(fused(ex))[doc])


# -------------------------------------------------------------------------------------------------- checking
@dataclass(frozen=True)
class Verdict:
    """A checked answer: right or not, one sentence, and what was right and what differs, point by point."""

    correct: bool
    summary: str
    details: tuple[str, ...] = ()
    understood: bool = True  # False: the answer could not be read (nothing was checked)


def check(ex: Exercise, answer: Any) -> Verdict:
    """Check a student's answer to ``ex``; never raises on what a student types."""
    if not isinstance(answer, str) or not answer.strip():
        return Verdict(False, f"Write your answer first: {answer_format(ex)}", understood=False)
    if len(answer) > MAX_ANSWER_CHARS:
        return Verdict(False, f"That answer is {len(answer)} characters; write at most {MAX_ANSWER_CHARS}.", (), False)
    if ex.kind == "order":
        return _check_order(ex, answer)
    if ex.kind == "winner":
        return _check_winner(ex, answer)
    if ex.kind == "rank":
        return _check_rank(ex, answer)
    return _check_score(ex, answer)


def answer_format(ex: Exercise) -> str:
    """How to write the answer to ``ex``, in words."""
    return {
        "order": "the ids in fused order, best first, separated by commas (e.g. A, B, C).",
        "winner": "the id of the document that comes first after fusion (e.g. A).",
        "rank": f"the fused rank of {ex.target} as a whole number (1 = first).",
        "score": f"the score of {ex.target} as a decimal number, to five decimals (e.g. 0.01234).",
    }[ex.kind]


def _ids(ex: Exercise, answer: str) -> tuple[list[str], list[str]]:
    """The ids written (matched case-insensitively to the exercise's ids) and the words that are not ids."""
    known = {d.casefold(): d for d in documents(ex)}
    tokens = [t for t in re.split(r"[\s,;>]+", answer.strip()) if t]
    out: list[str] = []
    unknown: list[str] = []
    for token in tokens:
        doc = known.get(token.casefold())
        (out if doc else unknown).append(doc or token[:40])
    return out, unknown


def _check_order(ex: Exercise, answer: str) -> Verdict:
    want = fused_order(ex)
    got, unknown = _ids(ex, answer)
    if unknown:
        names = ", ".join(repr(u) for u in unknown[:5])
        return Verdict(False, f"{names} {'is' if len(unknown) == 1 else 'are'} not in the lists.", (), False)
    repeated = sorted({d for d in got if got.count(d) > 1})
    details: list[str] = []
    if repeated:
        details.append(f"You wrote {', '.join(repeated)} more than once: each document has one place.")
    missing = [d for d in want if d not in got]
    if missing:
        details.append(f"Missing: {', '.join(missing)} (every document of the lists gets a place).")
    right = [i for i, (g, w) in enumerate(zip(got, want), start=1) if g == w]
    wrong = [(i, g, w) for i, (g, w) in enumerate(zip(got, want), start=1) if g != w]
    if right:
        details.insert(0, f"Right place: {', '.join(f'#{i} {want[i - 1]}' for i in right)}.")
    for i, g, _ in wrong:
        details.append(f"#{i}: you wrote {g}; that is not the document fusion puts there.")
    if got == want:
        return Verdict(True, f"Right: {', '.join(want)}.")
    if len(got) > len(want):
        details.append(f"Too many places: the lists hold {len(want)} documents.")
    return Verdict(False, f"Not yet: {len(right)} of {len(want)} places are right.", tuple(details))


def _check_winner(ex: Exercise, answer: str) -> Verdict:
    got, unknown = _ids(ex, answer)
    if unknown or len(got) != 1:
        return Verdict(False, f"Write one id from the lists: {answer_format(ex)}", (), False)
    order = fused_order(ex)
    if got[0] == order[0]:
        return Verdict(True, f"Right: {order[0]} comes first.")
    place = order.index(got[0]) + 1
    return Verdict(False, f"Not {got[0]}: fusion puts it #{place}.", (f"{got[0]} ends #{place} of {len(order)}.",))


def _check_rank(ex: Exercise, answer: str) -> Verdict:
    text = answer.strip().lstrip("#")
    if not text.isdigit():
        return Verdict(False, f"Write a whole number: {answer_format(ex)}", (), False)
    want = fused_order(ex).index(str(ex.target)) + 1
    got = int(text)
    if got == want:
        return Verdict(True, f"Right: {ex.target} ends #{want}.")
    side = "higher (nearer the top)" if want < got else "lower (further down)"
    return Verdict(False, f"Not #{got}: {ex.target} ends {side} than that.")


NUMBER_RE = re.compile(r"^[+-]?(\d+([.,]\d*)?|[.,]\d+)$")


def parse_score(answer: str) -> Decimal | None:
    """A score as a student writes it (``0.03252``, ``,03252`` with a decimal comma), or None."""
    text = answer.strip()
    if not NUMBER_RE.match(text):
        return None
    return Decimal(text.replace(",", "."))


def _check_score(ex: Exercise, answer: str) -> Verdict:
    value = parse_score(answer)
    if value is None:
        return Verdict(False, f"Write a number: {answer_format(ex)}", (), False)
    want = score_of(ex, str(ex.target))
    got = round5(value)
    if got == want:
        return Verdict(True, f"Right: the score of {ex.target} is {want} to five decimals.")
    details = []
    exponent = value.as_tuple().exponent
    digits = -exponent if isinstance(exponent, int) else 0
    if digits < 5:
        details.append("Give five decimals: the class compares scores to five decimals, rounded half up.")
    elif abs(got - want) <= Decimal("0.00001"):
        details.append("One unit off in the fifth decimal: round half up, on the exact value (0.123455 -> 0.12346).")
    side = "too high" if got > want else "too low"
    return Verdict(False, f"Not {got}: that is {side}.", tuple(details))


def hint(ex: Exercise, shown: int) -> str | None:
    """The next hint after ``shown`` hints, or None when there are no more."""
    return ex.hints[shown] if 0 <= shown < len(ex.hints) else None


# --------------------------------------------------------------------------------------------------- reveal
@dataclass(frozen=True)
class RevealRow:
    """One document's arithmetic: ``RRF(A) = 1/(60+1) + 1/(60+2) = 0.01639 + 0.01613 = 0.03252``."""

    doc: str
    rank: int
    formula: str
    terms: tuple[Decimal, ...]
    score: Decimal
    note: str

    @property
    def line(self) -> str:
        parts = [f"RRF({self.doc}) = {self.formula}"]
        if len(self.terms) > 1:
            parts.append(" + ".join(str(t) for t in self.terms))
        parts.append(str(self.score))
        return " = ".join(parts) + (f"   ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Reveal:
    """The reveal: the answer, each document's terms (RRF) and the fused order with five-decimal scores; for the
    raw-scores exercise, the three orders side by side."""

    answer: str
    rows: tuple[RevealRow, ...]
    fusion_line: str
    methods: dict[str, tuple[tuple[str, Decimal], ...]]
    lesson: str


def reveal(ex: Exercise) -> Reveal:
    """The arithmetic term by term, rounded as the class rounds it (terms and sums each to five decimals)."""
    lists = ranked_lists(ex)
    exact = exact_scores(ex)
    rows = []
    for rank, (name, _) in enumerate(fused(ex, "rrf"), start=1):
        parts, terms, seen_in = [], [], []
        for list_name, items in lists.items():
            if name in items:
                r = items.index(name) + 1
                w = weight_of(ex, list_name)
                parts.append(f"{_num(w)}/({ex.k}+{r})")
                terms.append(round5(w / (ex.k + r)))
                seen_in.append(list_name)
        note = f"only in {seen_in[0]}" if len(lists) > 1 and len(seen_in) == 1 else ""
        rows.append(RevealRow(name, rank, " + ".join(parts), tuple(terms), round5(exact[name]), note))
    methods: dict[str, tuple[tuple[str, Decimal], ...]] = {}
    if ex.scored:
        for method in METHODS:
            values = fused(ex, method)
            if method == "rrf":
                methods[method] = tuple((d, round5(exact[d])) for d, _ in values)
            else:
                methods[method] = tuple((d, round5(s)) for d, s in values)
    order = fused(ex)
    scores = {d: score_of(ex, d) for d, _ in order}
    fusion_line = " > ".join(f"{d} ({scores[d]})" for d, _ in order)
    return Reveal(expected_answer(ex), tuple(rows), fusion_line, methods, ex.lesson)


def _num(w: Fraction) -> str:
    return str(w.numerator) if w.denominator == 1 else f"{float(w):g}"
