"""A persisted cold start, two versions of the project side by side: the bench's cold-start child (a fresh Python
process that builds the retriever on a persisted store and answers one turn; ``retrieval.evaluation.bench``) run from
a git revision checked out into a temporary worktree and from this checkout, alternating which goes first, on one
persisted store. For a change to the start-up path, where one run of either is too noisy to compare.

    python scripts/cold_start_ab.py [--before HEAD~1] [--runs 8]

Prints one JSON line: the machine, its load average, the date, and per version the wall times (spawn to the answer
line) and their median; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TURN = "what does error E-07 mean on my GlucoSense GS-40"


def one_start(root: Path, store: str) -> float:
    from retrieval.evaluation.bench import _CHILD

    env = dict(os.environ, PYTHONPATH=str(root), CHROMA_PATH=store, CORPUS_PATH=str(ROOT / "corpus" / "cards.jsonl"))
    env.pop("CHROMA_HOST", None)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, TURN],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=root,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    wall = time.perf_counter() - start
    _, err = proc.communicate(timeout=600)
    if not line.strip():
        raise SystemExit(f"the child in {root} failed: {err.strip()[-500:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="HEAD~1", help="git revision to compare with this checkout (default HEAD~1)")
    ap.add_argument("--runs", type=int, default=8, help="cold starts of each version (default 8)")
    args = ap.parse_args()
    from retrieval.evaluation.bench import _compile_project

    with tempfile.TemporaryDirectory(prefix="cold-ab-") as tmp:
        before = Path(tmp) / "before"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(before), args.before], check=True
        )
        try:
            store = str(Path(tmp) / "store")
            _compile_project()
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(before / "retrieval")], check=True)
            one_start(ROOT, store)  # builds the store both versions then open (same corpus, same model)
            load = [os.getloadavg()[0]]
            walls: dict[str, list[float]] = {"before": [], "after": []}
            for i in range(args.runs):
                order = [("before", before), ("after", ROOT)]
                for name, root in order if i % 2 == 0 else order[::-1]:
                    walls[name].append(round(one_start(root, store), 3))
            load.append(os.getloadavg()[0])
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=False)
    print(
        json.dumps(
            {
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "machine": platform.processor() or platform.machine(),
                "cpus": os.cpu_count(),
                "load_avg_1m": load,
                "before": args.before,
                **{name: {"median_s": round(statistics.median(v), 3), "wall_s": v} for name, v in walls.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
