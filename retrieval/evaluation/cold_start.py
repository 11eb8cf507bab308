"""Process cold start to the first answer, in a child process: with a fresh build and with the persisted store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.settings import PROJECT_ROOT, Settings

if TYPE_CHECKING:
    pass


# ---------------------------------------------------------------------------------------------- cold start
_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from retrieval.settings import Settings
from retrieval.pipeline import HybridRetriever
s = Settings.from_env()
t_import = time.perf_counter()
r = HybridRetriever(s, progress=lambda done, total: None)
t_built = time.perf_counter()
res = r.retrieve(sys.argv[1], s)
t_answer = time.perf_counter()
print(json.dumps({"level": res.hybrid_path, "import_s": t_import - t0, "build_s": t_built - t_import,
                  "first_turn_s": t_answer - t_built, "dense_built": bool(r.dense and r.dense.built),
                  "index_s": r.dense.index_seconds if r.dense else None, "chunks": len(r.chunks),
                  "bm25_build_ms": r.bm25_build_ms, "dense_error": r.dense_error,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), flush=True)
"""


def cold_start(settings: Settings, store: Path, turn: str, timeout: float = 1800.0) -> dict[str, Any]:
    """Start a fresh Python process that builds the retriever (store folder ``store``) and answers ``turn``;
    ``wall_s`` runs from the spawn to the answer line on its stdout."""
    env = dict(
        os.environ,
        CORPUS_PATH=str(Path(settings.corpus_path).resolve()),
        CHROMA_PATH=str(store),
        EMBEDDING_MODEL=settings.embedding_model,
        RERANKER_MODEL=settings.reranker_model,
        PYTHONPATH=os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p),
    )
    env.pop("CHROMA_HOST", None)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, turn],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=PROJECT_ROOT,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        wall = time.perf_counter() - start
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise RuntimeError(f"cold-start child did not answer within {timeout:.0f} s") from None
    if not line.strip():
        raise RuntimeError(f"cold-start child failed (exit {proc.returncode}): {err.strip()[-500:]}")
    data = json.loads(line)
    data["wall_s"] = wall
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in data.items()}


def _compile_project() -> bool:
    """Write the project's bytecode (``__pycache__``, git-ignored) before the cold-start children, as any earlier
    start of the app does, unless ``PYTHONDONTWRITEBYTECODE`` is set (it is on the project's CI machines): then every
    child would compile the ~8,000 lines of ``retrieval`` again, 30-40 ms a start that no restarted app pays.
    False if it could not be written (a read-only checkout: the children compile, as before)."""
    import compileall

    try:
        return bool(compileall.compile_dir(str(PROJECT_ROOT / "retrieval"), quiet=2))
    except OSError:
        return False
