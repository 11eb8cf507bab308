"""Tune and measure the refusal rule (retrieval/refusal.py) against today's cosine rule (issue 14's script).

Issue 23's before/after table over the near-domain, paraphrase and es/pt sets, per level, with the open-domain
corpora and SciFact calibrated as uploads, comes from ``scripts/refusal_report.py``.

    .venv/bin/python scripts/tune_refusal.py            # collect evidence (cached under /tmp), tune on dev, report
    .venv/bin/python scripts/tune_refusal.py --scifact 100   # also SciFact test: 100 claims over a sub-corpus

Turn sets:
  answerable  the shipped answerable turns (corpus/queries.jsonl, category != no_match): must NOT be refused
  dev         the shipped no_match turns + corpus/ood_dev.jsonl: thresholds are chosen on these (and answerable)
  test        corpus/ood_test.jsonl: held out, only reported

Levels: ``full`` (defaults), ``rrf_only`` (SIMULATE_RERANKER_FAILURE=true), ``dense_only``
(RETRIEVAL_HYBRID_ENABLED=false). Each turn runs twice per level: with the defaults (today's decision, the
``hybrid_path``) and with MIN_SIMILARITY=-1 (nothing cut by the cosine, so every top_k card's evidence is seen).
The rerank budget is raised so that a busy machine does not turn ``full`` into ``rrf_only`` mid-measurement.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


from retrieval import refusal, refusal_evidence, refusal_thresholds, refusal_vocabulary  # noqa: E402
from retrieval.corpus import DEFAULT_CHUNK_WORDS, load_beir, load_cards, load_queries, split_cards  # noqa: E402
from retrieval.settings import Settings  # noqa: E402
from retrieval.tokenize import analyze  # noqa: E402

LEVELS = {
    "full": {},
    "rrf_only": {"simulate_reranker_failure": True},
    "dense_only": {"hybrid_enabled": False},
}
COLLECT_VERSION = "v2"


# ------------------------------------------------------------------------------------------------ collection
def raw_evidence(retriever: Any, query: str, settings: Settings) -> dict[str, Any]:
    """Everything the rule could use for one turn at one level (JSON-ready), today's decision (REFUSAL_RULE=cosine)
    and the integrated pipeline's (REFUSAL_RULE=evidence: the rule and the cosine cut together)."""
    today = retriever.retrieve(query, settings.replace(refusal_rule="cosine"))
    probe = retriever.retrieve(query, settings.replace(refusal_rule="cosine", min_similarity=-1.0))
    integrated = retriever.retrieve(query, settings.replace(refusal_rule="evidence"))
    index = retriever.bm25_index(settings.bm25_tokenizer)
    cards = [*probe.final, *probe.cut]  # min_similarity=-1: final = the top_k cards, cut = the rest, in order
    logits = {h.chunk_id: h.score for h in probe.reranked}
    bm25_rank = {h.chunk_id: h.rank for h in probe.bm25.hits}
    dense_rank = {h.chunk_id: h.rank for h in probe.dense.hits}
    terms = sorted(set(index.query_terms(query)))
    top_terms = []
    for c in cards[:3]:
        chunk = retriever.by_id[c.chunk_id]
        top_terms.append(sorted(set(analyze(chunk.indexed_text, settings.bm25_tokenizer, chunk.lang))))
    return {
        "today_path": today.hybrid_path,
        "today_reason": today.reason,
        "integrated_path": integrated.hybrid_path,
        "integrated_reason": integrated.reason,
        "path": probe.hybrid_path,
        "reason": probe.reason,
        "reranker_status": probe.reranker_status,
        "bm25_status": probe.bm25.status,
        "bm25_reason": probe.bm25.reason,
        "dense_status": probe.dense.status,
        "dense_reason": probe.dense.reason,
        "cards": [
            {
                "parent": c.parent_id,
                "chunk": c.chunk_id,
                "sim": c.similarity,
                "logit": logits.get(c.chunk_id),
                "bm25_rank": bm25_rank.get(c.chunk_id),
                "dense_rank": dense_rank.get(c.chunk_id),
                "kept": i < settings.top_k,
            }
            for i, c in enumerate(cards[:10])
        ],
        "reranked": [[h.chunk_id, h.score] for h in probe.reranked],
        "bm25": [[h.chunk_id, h.parent_id, h.score] for h in probe.bm25.hits[:20]],
        "dense": [[h.chunk_id, h.parent_id, h.score] for h in probe.dense.hits[:20]],
        "query_terms": {t: index.document_frequency(t) for t in terms},
        "n_chunks": len(index),
        "top_terms": top_terms,
    }


def collect(
    turns: list[dict[str, Any]], settings: Settings, cache_path: Path, label: str, chunks: list | None = None
) -> dict[str, Any]:
    """Raw evidence per turn and level, read from ``cache_path`` when it was collected for the same inputs."""
    cache: dict[str, Any] = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    from retrieval.pipeline import HybridRetriever
    from retrieval.retriever_cache import get_retriever

    def get_retriever_for_chunks(s: Settings) -> Any:
        return get_retriever(s) if chunks is None else HybridRetriever(s, chunks=chunks)

    retriever = None
    dirty = False
    started = time.perf_counter()
    for n, turn in enumerate(turns, start=1):
        for level, overrides in LEVELS.items():
            key = f"{level}\t{turn['text']}"
            if key in cache:
                continue
            if retriever is None:
                retriever = get_retriever_for_chunks(settings)
            cache[key] = raw_evidence(retriever, turn["text"], settings.replace(**overrides))
            dirty = True
        if dirty and n % 20 == 0:
            cache_path.write_text(json.dumps(cache))
            print(f"  {label}: {n}/{len(turns)} turns, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if dirty:
        cache_path.write_text(json.dumps(cache))
    return cache


# ------------------------------------------------------------------------------------------------------ evidence
def evidence(
    raw: dict[str, Any], turn: str, texts: dict[str, str], vocabulary: refusal_vocabulary.Vocabulary, top_k: int
) -> refusal_evidence.RefusalEvidence | None:
    """The rule's evidence from a cached record (None: the pipeline found no candidate at all)."""
    kept = [c for c in raw["cards"] if c["kept"]][:top_k]
    if raw["path"] == "no_match" or not kept:
        return None
    candidates = [
        refusal_evidence.Candidate(c["parent"], c["chunk"], texts[c["chunk"]], c["sim"], c["logit"]) for c in kept
    ]
    both = raw["bm25_status"] == "ok" and raw["dense_status"] == "ok"
    missing = {}
    if not raw["reranked"]:
        missing["cross-encoder"] = raw["reranker_status"] or "the reranker did not run"
    return refusal_evidence.gather(
        turn,
        raw["path"],
        candidates,
        vocabulary,
        bm25_parents=[p for _, p, _ in raw["bm25"]] if both else None,
        dense_parents=[p for _, p, _ in raw["dense"]] if both else None,
        missing=missing,
    )


def refused_with(ev: refusal_evidence.RefusalEvidence | None, thresholds: refusal_thresholds.RefusalThresholds) -> bool:
    return True if ev is None else refusal.decide(ev, thresholds).refused


# ------------------------------------------------------------------------------------------------------- tuning
def frange(lo: float, hi: float, step: float) -> list[float]:
    n = int(round((hi - lo) / step))
    return [round(lo + i * step, 4) for i in range(n + 1)]


GRIDS: dict[str, dict[str, list[float]]] = {
    "full": {"min_cross_encoder": frange(-8.0, 2.0, 0.25), "min_rescue_cosine": frange(0.55, 0.80, 0.01)},
    "rrf_only": {"min_fallback_cosine": frange(0.50, 0.80, 0.01)},
    "dense_only": {"min_dense_only_cosine": frange(0.50, 0.80, 0.01)},
}


def rates(evs_neg: list, evs_pos: list, thresholds: refusal_thresholds.RefusalThresholds) -> tuple[int, int]:
    """(out-of-domain turns refused, answerable turns refused)."""
    return (sum(refused_with(e, thresholds) for e in evs_neg), sum(refused_with(e, thresholds) for e in evs_pos))


def tune(level: str, dev: list, answerable: list, max_false: int) -> tuple[refusal_thresholds.RefusalThresholds, dict]:
    """Thresholds for ``level`` chosen on dev: most dev turns refused with at most ``max_false`` answerable turns
    refused, *also one grid step stricter on each threshold* (a safety margin: a setting at the edge of a cliff of
    false refusals is not chosen); among the best, the middle of the plateau (the median of each threshold)."""
    grid = GRIDS[level]
    names = list(grid)
    combos = [[]]
    for name in names:
        combos = [c + [v] for c in combos for v in grid[name]]
    results = {}
    for values in combos:
        th = refusal_thresholds.RefusalThresholds(**dict(zip(names, values)))
        results[tuple(values)] = rates(dev, answerable, th)

    def stricter(values: list[float], i: int) -> tuple[float, ...] | None:
        axis = grid[names[i]]
        j = axis.index(values[i])
        return None if j + 1 >= len(axis) else tuple(values[:i] + [axis[j + 1]] + values[i + 1 :])

    scored = []
    for values in combos:
        neg, pos = results[tuple(values)]
        neighbours = [stricter(values, i) for i in range(len(names))]
        if pos <= max_false and all(n is not None and results[n][1] <= max_false for n in neighbours):
            scored.append((neg, -pos, values))
    if not scored:
        raise SystemExit(f"{level}: no threshold keeps false refusals <= {max_false}")
    best = max(s[:2] for s in scored)
    plateau = [s[2] for s in scored if s[:2] == best]
    median = [sorted(p[i] for p in plateau)[len(plateau) // 2] for i in range(len(names))]
    step = {n: grid[n][1] - grid[n][0] for n in names}
    chosen = min(plateau, key=lambda p: sum(abs(a - b) / step[n] for a, b, n in zip(p, median, names)))
    plateau_range = {n: [min(p[i] for p in plateau), max(p[i] for p in plateau)] for i, n in enumerate(names)}
    info = {
        "dev_refused": best[0],
        "false_refusals": -best[1],
        "plateau_size": len(plateau),
        "plateau_range": plateau_range,
    }
    return refusal_thresholds.RefusalThresholds(**dict(zip(names, chosen))), info


def measure(ev: dict[str, list], thresholds: refusal_thresholds.RefusalThresholds) -> dict[str, int]:
    return {
        "dev_refused": sum(refused_with(e, thresholds) for e in ev["dev"]),
        "test_refused": sum(refused_with(e, thresholds) for e in ev["test"]),
        "false_refusals": sum(refused_with(e, thresholds) for e in ev["answerable"]),
    }


def without_vocabulary(evs: list) -> list:
    """The same evidence without the vocabulary tests (what the scores alone decide)."""
    return [None if e is None else dataclasses.replace(e, lexical=None) for e in evs]


# ------------------------------------------------------------------------------------------------------- report
def pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.1f}%)" if n else "-"


def load_turns(path: Path) -> list[dict[str, Any]]:
    return [{"id": q.id, "text": q.text, "category": q.category} for q in load_queries(path)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default="/tmp/refusal-evidence", help="folder for the evidence caches (JSON)")
    ap.add_argument("--chroma-path", default=None, help="Chroma folder for the shipped corpus (default: CHROMA_PATH)")
    ap.add_argument("--max-false-refusals", type=int, default=1, help="allowed on the 61 answerable turns (2%%)")
    ap.add_argument(
        "--scifact",
        type=int,
        default=0,
        metavar="N",
        help="also report on N SciFact test claims over a sub-corpus (their abstracts + distractors)",
    )
    ap.add_argument("--scifact-path", default=str(ROOT.parent / "shared" / "eval" / "scifact"))
    ap.add_argument("--scifact-docs", type=int, default=1000, help="sub-corpus size for --scifact")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    args = ap.parse_args(argv)

    cache_dir = Path(args.cache)
    cache_dir.mkdir(parents=True, exist_ok=True)
    overrides: dict[str, Any] = {"rerank_timeout_ms": 600_000, "dense_timeout_ms": 600_000}
    if args.chroma_path:
        overrides["chroma_path"] = args.chroma_path
    settings = Settings.from_env(**overrides)

    shipped = load_turns(ROOT / "corpus" / "queries.jsonl")
    answerable = [t for t in shipped if t["category"] != "no_match"]
    dev = [t for t in shipped if t["category"] == "no_match"] + load_turns(ROOT / "corpus" / "ood_dev.jsonl")
    test = load_turns(ROOT / "corpus" / "ood_test.jsonl")
    everything = answerable + dev + test
    corpus_hash = hashlib.sha256(Path(settings.corpus_path).read_bytes()).hexdigest()
    inputs = [
        COLLECT_VERSION,
        corpus_hash,
        {k: v for k, v in settings.to_dict().items() if k != "chroma_path" and not k.startswith("refusal_")},
    ]
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]
    raw = collect(everything, settings, cache_dir / f"shipped-{key}.json", "shipped")

    chunks = split_cards(load_cards(settings.corpus_path), DEFAULT_CHUNK_WORDS)
    texts = {c.chunk_id: c.indexed_text for c in chunks}
    vocabulary = refusal_vocabulary.Vocabulary.from_texts(texts.values())

    def evs(turns: list[dict[str, Any]], level: str) -> list:
        return [evidence(raw[f"{level}\t{t['text']}"], t["text"], texts, vocabulary, settings.top_k) for t in turns]

    def today(turns: list[dict[str, Any]], level: str) -> int:
        return sum(raw[f"{level}\t{t['text']}"]["today_path"] == "no_match" for t in turns)

    def integrated(turns: list[dict[str, Any]], level: str) -> int:
        return sum(raw[f"{level}\t{t['text']}"]["integrated_path"] == "no_match" for t in turns)

    report: dict[str, Any] = {"sets": {"answerable": len(answerable), "dev": len(dev), "test": len(test)}, "levels": {}}
    chosen: dict[str, Any] = {}
    for level in LEVELS:
        ev = {"dev": evs(dev, level), "test": evs(test, level), "answerable": evs(answerable, level)}
        th, info = tune(level, ev["dev"], ev["answerable"], args.max_false_refusals)
        chosen.update({n: getattr(th, n) for n in GRIDS[level]})
        no_vocab = {k: without_vocabulary(v) for k, v in ev.items()}
        rows = {
            "today (cosine MIN_SIMILARITY)": {
                "dev_refused": today(dev, level),
                "test_refused": today(test, level),
                "false_refusals": today(answerable, level),
            },
            "pipeline, REFUSAL_RULE=evidence (defaults)": {
                "dev_refused": integrated(dev, level),
                "test_refused": integrated(test, level),
                "false_refusals": integrated(answerable, level),
            },
            "refusal rule, module defaults": measure(ev, refusal_thresholds.DEFAULT_THRESHOLDS),
            "refusal rule, tuned on dev": measure(ev, th),
            "  same, without the vocabulary tests": measure(no_vocab, th),
        }
        # The pipeline refuses when the rule does or when no card passes MIN_SIMILARITY: the offline replay of the
        # rule (module defaults = Settings defaults) must agree with it turn by turn.
        mismatches = [
            t["id"]
            for group, turns in (("dev", dev), ("test", test), ("answerable", answerable))
            for t, e in zip(turns, ev[group])
            if (raw[f"{level}\t{t['text']}"]["integrated_path"] == "no_match")
            != (
                refused_with(e, refusal_thresholds.DEFAULT_THRESHOLDS)
                or raw[f"{level}\t{t['text']}"]["today_path"] == "no_match"
            )
        ]
        report["levels"][level] = {
            "thresholds": {n: getattr(th, n) for n in GRIDS[level]},
            "tuning": info,
            "rows": rows,
            "pipeline_vs_replay_mismatches": mismatches,
            "dev_not_refused": [t["text"] for t, e in zip(dev, ev["dev"]) if not refused_with(e, th)],
            "test_not_refused": [t["text"] for t, e in zip(test, ev["test"]) if not refused_with(e, th)],
            "answerable_refused": [
                f"{t['id']} {t['text']}" for t, e in zip(answerable, ev["answerable"]) if refused_with(e, th)
            ],
        }
    report["chosen_thresholds"] = chosen

    if args.scifact:
        report["scifact"] = scifact_report(args, settings, refusal_thresholds.RefusalThresholds(**chosen))

    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"turns: {len(answerable)} answerable (shipped), dev {len(dev)} no_match (10 shipped + "
        f"{len(dev) - 10} ood_dev), test {len(test)} no_match (ood_test)"
    )
    print(f"thresholds chosen on dev (at most {args.max_false_refusals} false refusal): {chosen}")
    base = settings.min_similarity
    print(
        f"  as settings: REFUSAL_MIN_CROSS_ENCODER={chosen['min_cross_encoder']:g} "
        f"REFUSAL_RESCUE_MARGIN={chosen['min_rescue_cosine'] - base:.2f} "
        f"REFUSAL_FALLBACK_MARGIN={chosen['min_fallback_cosine'] - base:.2f} "
        f"(dense_only alone: {chosen['min_dense_only_cosine'] - base:.2f}) over MIN_SIMILARITY={base:g}\n"
    )
    for level, data in report["levels"].items():
        print(f"level {level}: tuning {data['tuning']}")
        print(f"  {'rule':40} {'dev refused':>16} {'test refused':>16} {'false refusals':>16}")
        for name, r in data["rows"].items():
            print(
                f"  {name:40} {pct(r['dev_refused'], len(dev)):>16} {pct(r['test_refused'], len(test)):>16} "
                f"{pct(r['false_refusals'], len(answerable)):>16}"
            )
        print(f"  dev turns answered (not refused): {data['dev_not_refused']}")
        print(f"  test turns answered (not refused): {data['test_not_refused']}")
        print(f"  answerable turns refused: {data['answerable_refused']}")
        print(
            f"  pipeline vs offline replay of the rule, turns that disagree: "
            f"{data['pipeline_vs_replay_mismatches'] or 'none'}\n"
        )
    if "scifact" in report:
        sf = report["scifact"]
        print(f"SciFact test ({sf['claims']} claims over {sf['docs']} abstracts: their own + random distractors):")
        for level, r in sf["levels"].items():
            both = f", pipeline refused {pct(r['integrated'], sf['claims'])}" if "integrated" in r else ""
            print(
                f"  {level:10} today refused {pct(r['today'], sf['claims'])}, "
                f"rule refused {pct(r['rule'], sf['claims'])}{both}, "
                f"rule with REFUSAL_UNKNOWN_CODES=false {pct(r['rule_without_unknown_codes'], sf['claims'])}; "
                f"failing tests: {r['failed_tests']}"
            )
            for example in r["refused"]:
                print(f"      {example}")
    return 0


def scifact_report(
    args: argparse.Namespace, settings: Settings, thresholds: refusal_thresholds.RefusalThresholds
) -> dict:
    """Refusals on SciFact test claims (all answerable) over a sub-corpus: every abstract judged relevant to the
    sampled claims plus random distractors, so that the index embeds in minutes, not 25."""
    import random as _random

    data = load_beir(args.scifact_path, "test")
    rng = _random.Random(args.seed)
    claims = rng.sample(list(data.queries), min(args.scifact, len(data.queries)))
    needed = {d for q in claims for d in q.relevant}
    others = [c for c in data.cards if c.id not in needed]
    docs = [c for c in data.cards if c.id in needed] + rng.sample(others, max(0, args.scifact_docs - len(needed)))
    corpus = Path(args.cache) / f"scifact-sub-{args.seed}-{args.scifact}-{args.scifact_docs}.jsonl"
    with corpus.open("w", encoding="utf-8") as f:
        for c in docs:
            f.write(
                json.dumps(
                    {"id": c.id, "title": c.title or c.id, "lang": "en", "topic": "general", "text": c.text},
                    ensure_ascii=False,
                )
                + "\n"
            )
    sf_settings = settings.replace(corpus_path=str(corpus), chroma_path=str(Path(args.cache) / f"chroma-{corpus.stem}"))
    turns = [{"id": q.id, "text": q.text, "category": "beir"} for q in claims]
    chunks = split_cards(load_cards(corpus), None)  # one chunk per abstract, as `eval --beir` indexes SciFact
    raw = collect(turns, sf_settings, Path(args.cache) / f"{corpus.stem}-evidence.json", "scifact", chunks)
    texts = {c.chunk_id: c.indexed_text for c in chunks}
    vocabulary = refusal_vocabulary.Vocabulary.from_texts(texts.values())
    out = {"claims": len(claims), "docs": len(docs), "levels": {}}
    for level in LEVELS:
        failed: dict[str, int] = {}
        examples: list[str] = []
        n_refused = 0
        for t in turns:
            ev = evidence(raw[f"{level}\t{t['text']}"], t["text"], texts, vocabulary, sf_settings.top_k)
            if ev is None:
                n_refused += 1
                continue
            decision = refusal.decide(ev, thresholds)
            if decision.refused:
                n_refused += 1
                examples.append(f"{t['text'][:90]} -> {decision.reason[:160]}")
                for test in decision.failed:
                    failed[test.name] = failed.get(test.name, 0) + 1
        records = [raw[f"{level}\t{t['text']}"] for t in turns]
        no_codes = dataclasses.replace(thresholds, check_identifiers=False)
        without_codes = sum(
            refused_with(evidence(r, t["text"], texts, vocabulary, sf_settings.top_k), no_codes)
            for r, t in zip(records, turns)
        )
        out["levels"][level] = {
            "today": sum(r["today_path"] == "no_match" for r in records),
            "rule": n_refused,
            "rule_without_unknown_codes": without_codes,
            "failed_tests": failed,
            "refused": examples,
        }
        if all("integrated_path" in r for r in records):  # collected by a version with REFUSAL_RULE
            out["levels"][level]["integrated"] = sum(r["integrated_path"] == "no_match" for r in records)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
