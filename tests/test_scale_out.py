"""Several app processes, one store (issue 22.2): two real processes (``tests/store_worker.py``, each running the
page's own handlers) against one real ``chroma run`` server on the loopback, each with its own DATA_DIR and
CHROMA_PATH, so nothing is shared but the server. A corpus uploaded in one is listed, opened and answered in the
other; deleted in one, the other says so on its next turn (a message, no traceback, no stale answer); both
indexing one corpus at once end with one complete collection; both registering 20 corpora at once end with all
40 listed in both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.chroma_server import ChromaServer
from tests.conftest import MINI_CARDS, ROOT

CARDS = [
    {"id": "w1", "title": "Water", "text": "Drink a full glass of water with every tablet."},
    {"id": "w2", "title": "Alarm", "text": "Set a phone alarm for the evening dose."},
    {"id": "w3", "title": "Travel", "text": "Pack spare doses in your hand luggage when you fly."},
]
BUDGETS = {"BM25_TIMEOUT_MS": "120000", "DENSE_TIMEOUT_MS": "120000", "RERANK_TIMEOUT_MS": "120000"}


class Worker:
    def __init__(self, workdir: Path, port: int) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "CHROMA_HOST": "127.0.0.1",
            "CHROMA_PORT": str(port),
            "CORPUS_PATH": str(MINI_CARDS),
            "CHROMA_PATH": str(workdir / "chroma"),
            "DATA_DIR": str(workdir / "data"),
            "DATA_ROOT": str(workdir / "none"),
            "MIN_SIMILARITY": "0.3",
            "HF_HUB_OFFLINE": "1",
            "GRADIO_ANALYTICS_ENABLED": "False",
            "TOKENIZERS_PARALLELISM": "false",
            **BUDGETS,
        }
        self.err = (workdir / "stderr.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.store_worker"],
            cwd=ROOT,
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
        )
        self.log = workdir / "stderr.log"
        assert json.loads(self._line()) == {"ready": True}

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"worker exited ({self.proc.poll()}):\n{self.log.read_text()[-3000:]}")
        return line

    def __call__(self, op: str, **args) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self._line())
        assert "traceback" not in reply, reply["traceback"]
        return reply

    def stop(self) -> None:
        try:
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.err.close()


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale-out")
    server = ChromaServer(root / "server").start()
    workers = []
    try:
        workers = [Worker(root / "a", server.port), Worker(root / "b", server.port)]
        yield (*workers, root, server)
    finally:
        for w in workers:
            w.stop()
        server.stop()


def both(a: Worker, b: Worker, op: str, args_a: dict, args_b: dict) -> tuple[dict, dict]:
    """The same command in both processes at once."""
    out: dict[str, dict] = {}

    def go(key, worker, args):
        out[key] = worker(op, **args)

    threads = [threading.Thread(target=go, args=("a", a, args_a)), threading.Thread(target=go, args=("b", b, args_b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(1200)
    return out["a"], out["b"]


def test_upload_in_one_answer_in_the_other_then_delete(two):
    a, b, root, _ = two
    path = root / "shared-notes.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CARDS), encoding="utf-8")
    up = a("upload", path=str(path), name="shared-notes")
    assert up["status"] == "done", up
    assert "shared-notes" in b("list")["names"]
    turn = b("turn", corpus="shared-notes", text="a glass of water with my pills")
    assert turn["level"] == "full" and turn["final"][0] == "w1#0", turn
    refused = b("delete", name="shared-notes", token="not-the-uploader")
    assert "only the browser session that uploaded or attached a corpus may" in refused["message"]
    assert "Deleted shared-notes" in a("delete", name="shared-notes", token=up["token"])["message"]
    gone = b("turn", corpus="shared-notes", text="a glass of water with my pills")
    assert gone["level"] == "idle" and gone["final"] == [], gone  # no stale answer: the page shows no result
    assert "no corpus named &#x27;shared-notes&#x27;" in gone["message"] and "has been deleted" in gone["message"]
    assert "shared-notes" not in b("list")["names"]


def test_two_processes_indexing_one_corpus_end_with_one_complete_collection(two):
    from retrieval.chroma_store import chroma_client

    a, b, root, server = two
    rows = [
        {
            "id": f"d{i}",
            "title": f"Note {i}",
            "text": f"Dose {i} is taken with food. Keep note {i} dry. Shake bottle {i} before use.",
        }
        for i in range(120)
    ]
    path = root / "together.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    added = a("add", path=str(path), name="together")
    # both start at one wall-clock moment, whatever each took to receive the command and open the corpus (on a busy
    # machine one process could finish the 120 sub-chunks before the other began, and the race would not be run)
    command = {"name": "together", "start_at": time.time() + 3.0}
    ra, rb = both(a, b, "index", command, command)
    assert ra["status"] == rb["status"] == "done", (ra, rb)
    assert ra["built"] and rb["built"], (ra, rb)  # both embedded into it at once (neither found it complete)
    assert ra["collection"] == rb["collection"] and ra["total"] == added["chunks"]
    client = chroma_client(host="127.0.0.1", port=server.port)
    collection = client.get_collection(ra["collection"])
    assert collection.count() == added["chunks"]
    assert len([c for c in client.list_collections() if c.name == ra["collection"]]) == 1
    for worker in (a, b):
        turn = worker("turn", corpus="together", text="shake bottle 17 before use")
        assert turn["level"] == "full" and turn["final"][0] == "d17#0", turn


def test_two_processes_registering_twenty_each_end_with_forty_in_both(two):
    a, b, root, _ = two
    before = set(a("list")["names"])
    folders = {}
    for who in ("a", "b"):
        folder = root / f"bulk-{who}"
        folder.mkdir()
        for n in range(20):  # the same names in both processes, different content: each needs its own name
            (folder / f"bulk{n}.jsonl").write_text(
                json.dumps({"id": f"{who}{n}", "title": f"{who} {n}", "text": f"Card {n} of process {who}."}) + "\n"
            )
        folders[who] = folder
    names = [f"bulk{n}" for n in range(20)]
    ra, rb = both(
        a, b, "add_many", {"folder": str(folders["a"]), "names": names}, {"folder": str(folders["b"]), "names": names}
    )
    made = set(ra["names"]) | set(rb["names"])
    assert len(made) == 40, (ra, rb)
    for worker in (a, b):
        listed = set(worker("list")["names"]) - before
        assert listed == made
