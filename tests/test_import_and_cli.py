import json
import subprocess
import sys

from tests.conftest import MINI_CARDS, ROOT

HEAVY = ("torch", "sentence_transformers", "onnxruntime", "chromadb", "gradio")


def test_import_retrieval_is_light():
    code = (
        f"import sys, retrieval, retrieval.pipeline, retrieval.cli; print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def run_cli(*args, env_extra=None, tmp_path=None):
    import os

    env = dict(os.environ, CORPUS_PATH=str(MINI_CARDS), CHROMA_PATH=str(tmp_path / "chroma"), MIN_SIMILARITY="0.3")
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "retrieval", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )


def test_cli_query_json(tmp_path):
    out = run_cli("query", "GlucoSense GS-40 error E-07", "--json", "--rrf-k", "10", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"hybrid_path", "reason", "bm25", "dense", "fused", "reranked", "final", "consensus", "timings_ms"} <= set(
        data
    )
    assert data["hybrid_path"] == "full" and data["final"][0]["parent_id"] == "gs40-e07"
    for key in ("bm25", "dense", "fused", "reranked", "final"):
        assert all({"chunk_id", "parent_id", "rank", "score"} <= set(row) for row in data[key])


def test_cli_flags_reach_the_levels(tmp_path):
    out = run_cli("query", "GS-40 E-07", "--json", "--simulate-reranker-failure", tmp_path=tmp_path)
    assert json.loads(out.stdout)["hybrid_path"] == "rrf_only"
    out = run_cli("query", "GS-40 E-07", "--json", "--no-hybrid", tmp_path=tmp_path)
    assert json.loads(out.stdout)["hybrid_path"] == "dense_only"


def test_cli_bad_setting_is_a_clear_error(tmp_path):
    out = run_cli("query", "x", env_extra={"RRF_K": "-1"}, tmp_path=tmp_path)
    assert out.returncode == 2
    assert "RRF_K=-1 is out of range: allowed 1 to 1000" in out.stderr
    assert "Traceback" not in out.stderr


def test_cli_table(tmp_path):
    out = run_cli("query", "meter too cold", tmp_path=tmp_path)
    assert out.returncode == 0 and "level:" in out.stdout and "final" in out.stdout
