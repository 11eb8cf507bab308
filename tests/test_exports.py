"""Turn exports are private: a per-process folder only this user can enter (0700), files only this user can read
(0600), and names that carry nothing of the turn (issue 13, defect 9); inside it, one folder per session with an
unguessable name, removed when the session ends (issue 19, defect 1; the launched app: tests/test_app_cache.py)."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from pathlib import Path

import gradio as gr
from gradio.context import LocalContext

from inspector import exports, handlers
from tests.app_server import ROOT
from tests.conftest import control_values

SECRET_TURN = "GlucoSense GS-40 error E-07 for Jane Roe"


_controls = control_values


def test_an_export_is_a_0600_file_in_a_0700_folder_with_no_turn_in_its_name(ui):
    path = Path(ui.run_turn(SECRET_TURN, *_controls()).export)
    assert json.loads(path.read_text(encoding="utf-8"))["inputs"]["query"] == SECRET_TURN
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, oct(path.stat().st_mode)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, oct(path.parent.stat().st_mode)
    for word in ("glucosense", "gs-40", "e-07", "jane", "roe"):
        assert word not in str(path).lower(), path
    second = Path(ui.run_turn(SECRET_TURN, *_controls()).export)
    assert second.parent == path.parent and second != path
    assert stat.S_IMODE(second.stat().st_mode) == 0o600


def test_each_process_gets_its_own_export_folder(ui):
    mine = Path(ui.run_turn(SECRET_TURN, *_controls()).export).parent
    other = subprocess.run(
        [sys.executable, "-c", "from inspector import exports; print(exports.export_dir())"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert other.returncode == 0, other.stderr[-2000:]
    theirs = Path(other.stdout.strip().splitlines()[-1])
    assert theirs != mine.parent and theirs.parent == mine.parent.parent  # siblings under Gradio's cache folder


def test_only_the_newest_exports_are_kept(ui, monkeypatch):
    monkeypatch.setattr(exports, "EXPORT_KEEP", 3)
    paths = [Path(ui.run_turn(SECRET_TURN, *_controls()).export) for _ in range(5)]
    kept = sorted(paths[0].parent.parent.glob("*/turn-*.json"))
    assert kept == sorted(paths[-3:]) and not paths[0].exists()


def _in_session(ui, session: str) -> Path:
    """A turn run as the browser session ``session`` (Gradio sets the request of the event being handled)."""
    token = LocalContext.request.set(gr.Request(session_hash=session))
    try:
        return Path(ui.run_turn(SECRET_TURN, *_controls()).export)
    finally:
        LocalContext.request.reset(token)


def test_each_session_exports_into_its_own_unguessable_folder_removed_when_it_ends(ui, monkeypatch):
    monkeypatch.setattr(exports, "EXPORT_KEEP_SESSION", 2)
    a = [_in_session(ui, "session-a") for _ in range(3)]
    b = _in_session(ui, "session-b")
    folder = a[0].parent
    assert {p.parent for p in a} == {folder} and b.parent != folder and b.parent.parent == folder.parent
    for f in (folder, b.parent):
        assert len(f.name) >= 43 and "session" not in f.name, f.name  # 32 random bytes, nothing of the session
        assert stat.S_IMODE(f.stat().st_mode) == 0o700
    assert sorted(folder.glob("turn-*.json")) == sorted(a[1:])  # the session keeps its newest two
    handlers.end_session(gr.Request(session_hash="session-a"))
    assert not folder.exists() and b.exists()
    again = _in_session(ui, "session-a")  # a session that comes back gets a new folder
    assert again.parent != folder and again.parent.exists()


def test_an_idle_sessions_folder_goes_at_the_next_export(ui, monkeypatch):
    idle = _in_session(ui, "session-idle")
    monkeypatch.setattr(exports, "EXPORT_IDLE_S", 0.0)
    time.sleep(0.01)
    active = _in_session(ui, "session-active")
    assert not idle.parent.exists() and active.exists()
