"""How long a corpus takes to go into the store and to open from it alone (issue 22.1): the record's cards and
labeled turns written page by page, then, in a fresh process with nothing but the store, listed, read page by page,
split into sub-chunks, checked against the fingerprint and BM25 built.

    python scripts/store_open.py ../shared/eval/scifact [--host 127.0.0.1 --port 8000]

Embedded (a fresh CHROMA_PATH in a temporary folder) unless --host names a Chroma server. Prints one JSON line with
the machine, its load average and the date; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_OPEN = r"""
import json, sys, time
t0 = time.perf_counter()
from retrieval.bm25 import BM25Index
from retrieval.corpora import Registry
from retrieval.settings import Settings
s = Settings.from_env()
t1 = time.perf_counter()
registry = Registry(s)
entry = registry.get(sys.argv[1])
t2 = time.perf_counter()
data = registry.load(entry)
t3 = time.perf_counter()
BM25Index(data.chunks, s.bm25_tokenizer)
t4 = time.perf_counter()
print(json.dumps({"list_s": t2 - t1, "read_split_check_s": t3 - t2, "bm25_build_s": t4 - t3,
                  "cards": len(data.cards), "sub_chunks": len(data.chunks), "turns": len(data.queries)}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="a corpus file or folder (what `python -m retrieval index` takes)")
    parser.add_argument("--host", help="a Chroma server (default: an embedded store in a temporary folder)")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    from retrieval.corpora import Registry
    from retrieval.settings import Settings

    work = Path(tempfile.mkdtemp(prefix="store-open-"))
    env = {"CHROMA_PATH": str(work / "chroma"), "DATA_DIR": str(work / "data"), "DATA_ROOT": str(work / "none")}
    if args.host:
        env.update(CHROMA_HOST=args.host, CHROMA_PORT=str(args.port))
    os.environ.update(env)
    load = os.getloadavg()[0]
    settings = Settings.from_env()
    started = time.perf_counter()
    data, _ = Registry(settings).add(args.path, f"bench-{int(time.time())}")
    write_s = time.perf_counter() - started
    proc = subprocess.run(
        [sys.executable, "-c", _OPEN, data.entry.name],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=3600,
    )
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
        return 1
    opened = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        json.dumps(
            {
                "command": "python scripts/store_open.py " + " ".join(argv or sys.argv[1:]),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "store": f"server {args.host}:{args.port}" if args.host else "embedded",
                "load_avg_1m": [round(load, 2), round(os.getloadavg()[0], 2)],
                "validate_and_write_s": round(write_s, 2),
                **{k: (round(v, 2) if isinstance(v, float) else v) for k, v in opened.items()},
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
