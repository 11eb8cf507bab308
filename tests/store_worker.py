"""One app process for the scale-out tests: reads JSON commands on stdin, runs them through the same handlers the
page calls (``inspector.data_tab`` for uploads, opening and deleting, ``inspector.handlers.run_turn`` for turns) on
the store its environment names (``CHROMA_HOST``), and answers one JSON line per command on stdout.

Commands: ``{"op": "upload", "path", "name", "token"}``, ``{"op": "list"}``, ``{"op": "turn", "corpus", "text"}``,
``{"op": "delete", "name", "token"}``, ``{"op": "add", "path", "name"}`` (what ``index PATH`` does, without
embedding), ``{"op": "index", "name", "start_at"}`` (start or join the corpus's indexing job, at the wall-clock
time ``start_at`` if given, and wait for it), ``{"op": "add_many", "folder", "names"}``, ``{"op": "quit"}``. A
command that raises answers ``{"error": ...}`` with its traceback, so a test can tell a handler's clear message
from a crash.
"""

from __future__ import annotations

import json
import re
import sys
import time
import traceback
from pathlib import Path


class Upload:
    def __init__(self, path: str) -> None:
        self.name, self.orig_name = path, Path(path).name


def main() -> None:
    from inspector import data_adding, data_tab, handlers
    from retrieval.corpora import Registry
    from retrieval.index_jobs import job_for, start_index
    from retrieval.settings import Settings

    settings = Settings.from_env()
    handlers.use_base_settings(settings)

    def run(cmd: dict) -> dict:
        op = cmd["op"]
        if op == "upload":
            out = data_adding.upload_corpus(Upload(cmd["path"]), cmd.get("name"), None, cmd.get("token"))
            job = job_for(Registry(settings).open(cmd["name"]), settings)
            snap = job.wait(900) if job is not None else None
            return {"message": out[0], "token": out[-1], "status": snap and snap["status"]}
        if op == "list":
            return {"names": [e.name for e in Registry(settings).entries()]}
        if op == "turn":
            view = handlers.run_turn(cmd["text"], corpus=cmd.get("corpus"))
            level = re.search(r'class="status level-([^"]*)"', view.status or "")
            finals = re.findall(r'data-chunk="([^"]*)"', view.reranked or "")
            return {"message": view.message, "level": level.group(1) if level else None, "final": finals}
        if op == "delete":
            message, corpus, _ = data_tab.delete(cmd["name"], cmd["name"], cmd.get("token"))
            return {"message": message, "corpus": corpus}
        if op == "add":
            data, new = Registry(settings).add(cmd["path"], cmd["name"])
            return {"name": data.entry.name, "new": new, "chunks": data.entry.chunks}
        if op == "add_many":
            made = [Registry(settings).add(Path(cmd["folder"]) / f"{n}.jsonl", n)[0].entry.name for n in cmd["names"]]
            return {"names": made}
        if op == "index":
            data = Registry(settings).open(cmd["name"])
            if cmd.get("start_at"):  # a wall-clock time both processes wait for: they start indexing together
                time.sleep(max(0.0, float(cmd["start_at"]) - time.time()))
            snap = start_index(data, settings).wait(900)
            from retrieval.corpus_retrievers import retriever_for

            dense = retriever_for(data, settings).dense if snap["status"] == "done" else None
            return {
                "status": snap["status"],
                "error": snap["error"],
                "total": snap["total"],
                "collection": dense.collection_name if dense else None,
                "built": bool(dense and dense.built),
            }
        raise ValueError(f"unknown op {op!r}")

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("op") == "quit":
            break
        try:
            reply = run(cmd)
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
