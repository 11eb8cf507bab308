"""Gradio's upload route, bounded (issue 19, defect 5): what anonymous clients may keep in the cache.

``/gradio_api/upload`` takes a file before any event runs, from anyone. Here each request must say its length and
may not exceed one corpus upload (``MAX_UPLOAD_MB``); what one client (its address) keeps at a time is capped at
``UPLOAD_CLIENT_MB`` and what all clients keep at ``UPLOAD_TOTAL_MB``; an upload no corpus adopted is deleted after
``UPLOAD_UNUSED_S`` (the Data tab reads a file into the store when it validates it, then drops the upload at once:
``discard``). A refusal is a plain-text message saying which bound was hit and when to try again.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.formats import Limits

log = logging.getLogger(__name__)

UPLOAD_ROUTE = "/gradio_api/upload"
FORM_OVERHEAD = 64_000  # multipart headers and boundaries around the one file a request carries


@dataclass
class Ledger:
    """The uploads this process's route accepted and not yet removed: path -> (client, bytes, time, uploads), plus
    the bytes of requests still being received (reserved at their declared length, so parallel requests cannot
    overshoot). ``uploads`` counts the uploads of that path not yet added or refused: Gradio names an upload by its
    content's hash, so two people uploading the same file (a class given one corpus) share one path, and the first
    one's Add must not delete what the second is about to add ("no longer on the server")."""

    limits: Limits
    files: dict[str, tuple[str, int, float, int]] = field(default_factory=dict)
    reserved: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _sweeper: threading.Thread | None = None

    def _kept(self) -> tuple[dict[str, int], int]:
        per: dict[str, int] = dict(self.reserved)
        for path, (client, size, _, _) in list(self.files.items()):
            if not os.path.exists(path):  # deleted by the Data tab, the sweeper or Gradio's own cache cleanup
                del self.files[path]
                continue
            per[client] = per.get(client, 0) + size
        return per, sum(per.values())

    def admit(self, client: str, length: int) -> tuple[int, str] | None:
        """Reserve ``length`` bytes for ``client``'s request, or (status, message) saying why it is refused."""
        mb = 1_000_000
        wait = f"uploads not used by a corpus are deleted after {self.limits.upload_unused_s:g} s"
        with self.lock:
            per, total = self._kept()
            if per.get(client, 0) + length > self.limits.upload_client_mb * mb:
                return 429, (
                    f"Upload refused: this address already keeps {per.get(client, 0) / mb:.1f} MB of uploads "
                    f"(at most {self.limits.upload_client_mb:g} MB, UPLOAD_CLIENT_MB); {wait}, or index "
                    "one in the Data tab."
                )
            if total + length > self.limits.upload_total_mb * mb:
                return 507, (
                    f"Upload refused: the server keeps {total / mb:.1f} MB of uploads (at most "
                    f"{self.limits.upload_total_mb:g} MB for everyone, UPLOAD_TOTAL_MB); {wait}."
                )
            self.reserved[client] = self.reserved.get(client, 0) + length
        return None

    def settle(self, client: str, length: int, paths: list[str]) -> None:
        """The request ended: release its reservation and record the files it left."""
        now = time.time()
        with self.lock:
            left = self.reserved.get(client, 0) - length
            if left > 0:
                self.reserved[client] = left
            else:
                self.reserved.pop(client, None)
            for path in paths:
                key = _key(path)
                uploads = self.files[key][3] + 1 if key in self.files else 1
                try:
                    self.files[key] = (client, os.path.getsize(path), now, uploads)
                except OSError:
                    continue
            if paths and self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep_forever, name="upload-sweeper", daemon=True)
                self._sweeper.start()

    def sweep(self, now: float | None = None) -> int:
        """Delete the uploads older than ``UPLOAD_UNUSED_S``; returns how many."""
        now = time.time() if now is None else now
        with self.lock:
            old = [p for p, (_, _, at, _) in self.files.items() if now - at > self.limits.upload_unused_s]
            for path in old:
                del self.files[path]
        for path in old:
            _remove(path)
        return len(old)

    def discard(self, path: str | os.PathLike | None) -> bool:
        """Delete an upload this route recorded (a corpus adopted its cards, or it failed validation) once no other
        upload of the same file waits for its Add; any other path is left alone. True if it was one."""
        if not path:
            return False
        key = _key(path)
        with self.lock:
            known = self.files.pop(key, None)
            if known is not None and known[3] > 1:  # another upload of the same file waits for its Add
                self.files[key] = (*known[:3], known[3] - 1)
                return True
        if known is not None:
            _remove(key)
        return known is not None

    def _sweep_forever(self) -> None:
        while True:
            time.sleep(max(0.5, min(30.0, self.limits.upload_unused_s / 4)))
            try:
                self.sweep()
            except Exception:  # the sweeper must outlive one bad file
                log.exception("sweeping unused uploads failed")


def _key(path: str | os.PathLike) -> str:
    return str(Path(path).resolve())


def _remove(path: str) -> None:
    """Delete an upload and its folder (Gradio puts each in a folder named by its hash) when that is left empty."""
    try:
        os.unlink(path)
        os.rmdir(Path(path).parent)
    except OSError:
        pass


_LEDGER: Ledger | None = None
_LEDGER_LOCK = threading.Lock()


def ledger() -> Ledger:
    """The process's ledger (limits from the environment on first use)."""
    global _LEDGER
    with _LEDGER_LOCK:
        if _LEDGER is None:
            _LEDGER = Ledger(Limits.from_env())
        return _LEDGER


def discard(path: Any) -> bool:
    return ledger().discard(path)


async def _refuse(status: int, text: str, scope: dict, receive: Any, send: Any) -> None:
    """Answer ``status`` with ``text`` after reading (and dropping) the request's body, so the client, still
    sending, gets the answer instead of a broken connection; nothing of it is kept."""
    from starlette.responses import PlainTextResponse

    more = True
    while more:
        message = await receive()
        more = message.get("type") == "http.request" and message.get("more_body", False)
    await PlainTextResponse(text, status_code=status)(scope, receive, send)


async def bounded_upload(app: Any, scope: dict, receive: Any, send: Any) -> None:
    """Serve one request to the upload route within the ledger's bounds (the ASGI middleware's part for it)."""
    headers = dict(scope.get("headers") or [])
    raw = headers.get(b"content-length", b"").decode("latin-1").strip()
    book = ledger()
    if not raw.isdigit():
        await _refuse(411, "Upload refused: send the request's Content-Length.", scope, receive, send)
        return
    length, most = int(raw), int(book.limits.max_upload_mb * 1_000_000) + FORM_OVERHEAD
    if length > most:
        await _refuse(
            413,
            f"Upload refused: {length / 1e6:.1f} MB in one request; a corpus upload is at most "
            f"{book.limits.max_upload_mb:g} MB (MAX_UPLOAD_MB), one file per request.",
            scope,
            receive,
            send,
        )
        return
    client = (scope.get("client") or ("unknown",))[0]
    refused = book.admit(client, length)
    if refused is not None:
        await _refuse(*refused, scope, receive, send)
        return
    status, body = [0], []

    async def capture(message: dict) -> None:
        if message["type"] == "http.response.start":
            status[0] = message["status"]
        elif message["type"] == "http.response.body" and status[0] == 200:
            body.append(message.get("body", b""))
        await send(message)

    paths: list[str] = []
    try:
        await app(scope, receive, capture)
        if status[0] == 200:
            listed = json.loads(b"".join(body) or b"[]")
            paths = [str(p) for p in listed if isinstance(p, str)] if isinstance(listed, list) else []
    finally:
        book.settle(client, length, paths)
