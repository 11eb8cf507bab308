"""Start and stop a real Chroma server (`chroma run` from the chromadb package) on 127.0.0.1 for tests."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ChromaServer:
    def __init__(self, path: Path, port: int | None = None) -> None:
        self.path = path
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> ChromaServer:
        chroma = Path(sys.executable).parent / "chroma"
        self.proc = subprocess.Popen(
            [str(chroma), "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chroma run exited with code {self.proc.returncode}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v2/heartbeat", timeout=1)
                return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"chroma run did not answer on 127.0.0.1:{self.port} within {timeout} s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
