"""Start-up of ``app.py`` as a user runs it: a busy port is refused at once, before any warm-up."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from tests.app_server import MINI, ROOT


def _run_app(env_extra: dict[str, str], tmp_path, timeout: float = 60.0) -> tuple[subprocess.CompletedProcess, float]:
    env = {
        **os.environ,
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "CORPUS_PATH": str(MINI),
        "CHROMA_PATH": str(tmp_path / "chroma"),
        "GRADIO_ANALYTICS_ENABLED": "False",
        "HF_HUB_OFFLINE": "1",
        **env_extra,
    }
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    return done, time.monotonic() - start


def test_busy_port_exits_before_warm_up_and_names_the_port(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done, elapsed = _run_app({"GRADIO_SERVER_PORT": str(port)}, tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"port {port}" in done.stderr and "GRADIO_SERVER_PORT=" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "chroma").exists(), "the store was built before the port was checked"
    assert elapsed < 20, f"took {elapsed:.1f} s: the port must be checked before loading anything heavy"


def test_port_that_is_not_a_number_is_a_message(tmp_path):
    done, _ = _run_app({"GRADIO_SERVER_PORT": "78x0"}, tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "GRADIO_SERVER_PORT='78x0'" in done.stderr and "Traceback" not in done.stderr, done.stderr
