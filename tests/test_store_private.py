"""The embedded Chroma store is its owner's alone (retrieval/store_private.py): whatever the umask (022 here), a
fresh store's folder is 0700 and every file in it 0600, the files Chroma writes later (a new collection's index
after inserts, the judgments) included; a store left group/other-readable by an earlier version is tightened when
it is opened. Real Chroma, in a process of its own (the umask is process-wide)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = """
import os, sys
os.umask(0o022)
import numpy as np
from retrieval.chroma_store import chroma_client
from retrieval.judgments import JudgmentStore
from retrieval.settings import Settings

path = sys.argv[1]
client = chroma_client(path=path)
s = Settings.from_env({}, chroma_path=path, data_dir=sys.argv[2])
JudgmentStore(s).put("shipped", "a judged turn", "card-1", 2)  # the judged turn goes into chroma.sqlite3
col = client.get_or_create_collection("chunks-later")  # made after the store was opened
col.add(ids=[str(i) for i in range(1500)], embeddings=np.random.default_rng(0).normal(size=(1500, 8)).tolist())
print(col.count())
"""


def _loose(folder) -> list[tuple[str, str]]:
    found = []
    for root, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            mode = stat.S_IMODE(os.lstat(os.path.join(root, name)).st_mode)
            if mode & 0o077:
                found.append((os.path.relpath(os.path.join(root, name), folder), oct(mode)))
    return found


def _run(tmp_path, store) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(store), str(tmp_path / "data")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0 and out.stdout.strip() == "1500", out.stderr


def test_a_fresh_store_is_owner_only_whatever_the_umask(tmp_path):
    store = tmp_path / "chroma"
    _run(tmp_path, store)
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    assert (store / "chroma.sqlite3").is_file() and stat.S_IMODE((store / "chroma.sqlite3").stat().st_mode) == 0o600
    index_files = [f for _, _, files in os.walk(store) for f in files if f.endswith(".bin")]
    assert index_files, "the collection's index files were not written"
    assert not _loose(store), f"readable by group or others: {_loose(store)}"


def test_a_store_left_readable_by_an_earlier_version_is_tightened(tmp_path):
    store = tmp_path / "chroma"
    _run(tmp_path, store)
    os.chmod(store, 0o755)
    for root, dirs, files in os.walk(store):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    _run(tmp_path, store)
    assert not _loose(store) and stat.S_IMODE(store.stat().st_mode) == 0o700
