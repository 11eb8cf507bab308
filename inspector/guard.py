"""What the web server lets one client use: bounded request bodies, who is still listening, one heavy job each.

The ASGI middleware (``ui.RefuseUploads``) hands every HTTP request but the upload route to ``guard``:

- a request body over ``MAX_REQUEST_KB`` is refused (413) before the app reads it, whether or not the client sent
  its length, so a 4 MB "turn" is never parsed, queued or kept in any session's state;
- a page's heartbeat (``/gradio_api/heartbeat/<session>``) and a result stream (``/gradio_api/queue/data``) are
  counted while open: a session with neither is not listening (``listening``), and a heavy job of such a session
  stops at its next turn (``jobs.ticker``) instead of holding the one heavy slot for a script that went away;
- a session may have at most one heavy job queued or running: a second ``/queue/join`` for one is refused (429);
- the state of a session with no open stream and no request for ``SESSION_IDLE_S`` is dropped (Gradio's per-session
  values and the inspector's own records of it), so API clients that never open a heartbeat do not make the
  process grow without end: Gradio frees a session's state only when its heartbeat closes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import logging
import threading
import time
import types
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

log = logging.getLogger(__name__)

HEARTBEAT = "/heartbeat/"
RESULTS = "/queue/data"
JOIN = "/queue/join"
HEAVY_ID = "heavy"

_OPEN: dict[str, int] = {}  # session -> its open heartbeat and result streams
_SEEN: dict[str, float] = {}  # session -> when a request or stream of it was last seen (time.monotonic)
_LOCK = threading.Lock()
_SWEEPER: list[threading.Thread] = []
# Called with a session id when its state is dropped (the inspector's per-session records): see ``on_expire``.
_ON_EXPIRE: list[Callable[[str], None]] = []
_BLOCKS: list[Any] = []  # the Blocks being served (its state holder and queue), seen on the first request


def _settings() -> Any:
    from inspector import handlers

    return handlers.base_settings()


def on_expire(hook: Callable[[Any], None]) -> None:
    """Call ``hook(request)`` (an object with ``session_hash``, as Gradio's ``unload`` events get) for every
    session whose state is dropped."""

    if any(getattr(known, "hook", None) is hook for known in _ON_EXPIRE):
        return  # a page built again (tests) registers its hooks again

    def call(session: str) -> None:
        hook(types.SimpleNamespace(session_hash=session))

    call.hook = hook  # type: ignore[attr-defined]
    _ON_EXPIRE.append(call)


def forwarded_allow_ips(trusted: str | None) -> str:
    """uvicorn's ``FORWARDED_ALLOW_IPS`` for ``TRUSTED_PROXIES``: "" (trust no proxy header) when unset. uvicorn
    otherwise trusts ``X-Forwarded-For`` from 127.0.0.1, so any local client (or one whose proxy appends to the
    header) could name itself any address and escape the per-address bounds."""
    import ipaddress

    if not trusted:
        return ""
    out = []
    for part in (p.strip() for p in trusted.split(",")):
        net = ipaddress.ip_network(part, strict=False)
        out.append(str(net.network_address) if "/" not in part else str(net))
    return ",".join(out)


def seen(session: str | None) -> None:
    if session:
        with _LOCK:
            _SEEN[session] = time.monotonic()


def listening(session: str | None, grace_s: float | None = None) -> bool:
    """True while ``session`` has an open heartbeat or result stream, or had one (or sent a request) within the last
    ``grace_s`` seconds (default ``LISTENER_GRACE_S``). Unknown sessions (a job started outside a request) count
    as listening."""
    if not session:
        return True
    grace = _settings().listener_grace_s if grace_s is None else grace_s
    with _LOCK:
        if _OPEN.get(session, 0) > 0:
            return True
        last = _SEEN.get(session)
    return last is None or time.monotonic() - last <= grace


def _stream_session(scope: dict) -> str | None:
    path = scope.get("path", "")
    if HEARTBEAT in path:
        return path.rsplit(HEARTBEAT, 1)[1].strip("/") or None
    if path.rstrip("/").endswith(RESULTS):
        query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
        return (query.get("session_hash") or [None])[0]
    return None


async def _answer(status: int, text: str, scope: dict, receive: Any, send: Any, *, as_json: bool = False) -> None:
    from starlette.responses import JSONResponse, PlainTextResponse

    response = JSONResponse({"detail": text}, status_code=status) if as_json else PlainTextResponse(text, status)
    await response(scope, receive, send)


async def _read_body(receive: Any, most: int) -> tuple[bytes, bool]:
    """The request's body, read up to ``most`` bytes; (body, False) once it goes over (the rest is drained)."""
    chunks, size, more, fits = [], 0, True, True
    while more:
        message = await receive()
        if message.get("type") != "http.request":
            break
        more = message.get("more_body", False)
        body = message.get("body", b"")
        size += len(body)
        if size > most:
            fits = False
        elif fits:
            chunks.append(body)
    return b"".join(chunks), fits


def _replay(body: bytes, receive: Any) -> Callable[[], Any]:
    sent = [False]

    async def again() -> dict:
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


def heavy_pending(blocks: Any, session: str) -> int:
    """How many heavy events of ``session`` Gradio's queue holds, queued or running."""
    queue = getattr(blocks, "_queue", None)
    if queue is None:
        return 0
    events = list(getattr(queue.event_queue_per_concurrency_id.get(HEAVY_ID), "queue", []) or [])
    for job in queue.active_jobs:
        events.extend(job or [])
    return sum(1 for e in events if e.session_hash == session and getattr(e, "concurrency_id", None) == HEAVY_ID)


def _heavy_join_refusal(blocks: Any, body: bytes) -> str | None:
    try:
        asked = json.loads(body or b"{}")
    except ValueError:
        return None  # Gradio answers a malformed body itself
    if not isinstance(asked, dict):
        return None
    session, fn_index = asked.get("session_hash"), asked.get("fn_index")
    seen(session if isinstance(session, str) else None)
    fn = blocks.fns.get(fn_index) if isinstance(fn_index, int) and blocks is not None else None
    if fn is None or fn.concurrency_id != HEAVY_ID or not isinstance(session, str):
        return None
    if heavy_pending(blocks, session) >= 1:
        return (
            "This session already has a heavy job (a live evaluation or A vs B) queued or running: wait for it to "
            "finish, or press Cancel, before starting another."
        )
    return None


async def guarded(app: Any, scope: dict, receive: Any, send: Any) -> None:
    """Serve one HTTP request (not the upload route) within the bounds above."""
    blocks = _blocks_of(scope)
    stream_session = _stream_session(scope)
    if stream_session is not None:
        await _streaming(app, scope, receive, send, stream_session)
        return
    if scope.get("method") not in {"POST", "PUT", "PATCH", "DELETE"}:
        await app(scope, receive, send)
        return
    most = _settings().max_request_kb * 1000
    headers = dict(scope.get("headers") or [])
    raw = headers.get(b"content-length", b"").decode("latin-1").strip()
    too_big = (
        f"Request refused: its body is larger than {most // 1000:,} KB (MAX_REQUEST_KB). A turn is at most 2,000 "
        "characters; a corpus goes through the Data tab's upload."
    )
    if raw.isdigit() and int(raw) > most:
        await _drain(receive)
        await _answer(413, too_big, scope, receive, send)
        return
    body, fits = await _read_body(receive, most)
    if not fits:
        await _answer(413, too_big, scope, receive, send)
        return
    if scope.get("path", "").rstrip("/").endswith(JOIN):
        refused = _heavy_join_refusal(blocks, body)
        if refused is not None:
            await _answer(429, refused, scope, receive, send, as_json=True)
            return
    await app(scope, _replay(body, receive), send)


async def _drain(receive: Any) -> None:
    more = True
    while more:
        message = await receive()
        more = message.get("type") == "http.request" and message.get("more_body", False)


async def _streaming(app: Any, scope: dict, receive: Any, send: Any, session: str) -> None:
    with _LOCK:
        _OPEN[session] = _OPEN.get(session, 0) + 1
        _SEEN[session] = time.monotonic()
    try:
        await app(scope, receive, send)
    finally:
        with _LOCK:
            left = _OPEN.get(session, 1) - 1
            if left > 0:
                _OPEN[session] = left
            else:
                _OPEN.pop(session, None)
            _SEEN[session] = time.monotonic()


def _blocks_of(scope: dict) -> Any:
    if not _BLOCKS:
        getter = getattr(scope.get("app"), "get_blocks", None)
        if getter is None:
            return None
        try:
            _BLOCKS.append(getter())
        except Exception:
            return None
        _start_sweeper()
    return _BLOCKS[0]


def _start_sweeper() -> None:
    with _LOCK:
        if _SWEEPER:
            return
        thread = threading.Thread(target=_sweep_forever, name="session-sweeper", daemon=True)
        _SWEEPER.append(thread)
    thread.start()


def _sweep_forever() -> None:
    while True:
        idle = _settings().session_idle_s
        time.sleep(max(0.5, min(30.0, idle / 4)))
        try:
            sweep()
        except Exception:  # the sweeper must outlive one bad session
            log.exception("sweeping idle sessions failed")


def sweep(idle_s: float | None = None) -> int:
    """Drop the state of every session with no open stream and nothing seen for ``idle_s`` (``SESSION_IDLE_S``);
    returns how many sessions were dropped."""
    idle = _settings().session_idle_s if idle_s is None else idle_s
    now = time.monotonic()
    holder = getattr(_BLOCKS[0], "state_holder", None) if _BLOCKS else None
    known = set(getattr(holder, "session_data", {}) or {})
    with _LOCK:
        known |= set(_SEEN)
        gone = [s for s in known if _OPEN.get(s, 0) == 0 and now - _SEEN.get(s, -1e18) > idle]
        if holder is not None:  # a session Gradio used lately is kept even if this process never saw its request
            used = getattr(holder, "time_last_used", {})
            gone = [s for s in gone if s not in used or (time.time() - used[s].timestamp()) > idle]
        for session in gone:
            _SEEN.pop(session, None)
    queue = getattr(_BLOCKS[0], "_queue", None) if _BLOCKS else None
    for session in gone:
        if holder is not None:
            with holder.lock:
                holder.session_data.pop(session, None)
                holder.time_last_used.pop(session, None)
        if queue is not None and not queue.pending_event_ids_session.get(session):
            queue.pending_messages_per_session.pop(session, None)  # results no one came to read
            queue.pending_event_ids_session.pop(session, None)
        for hook in _ON_EXPIRE:
            try:
                hook(session)
            except Exception:
                log.exception("forgetting session %s failed", session)
    if gone:
        return_freed_memory()
    return len(gone)


_TRIM: list[Callable[[int], int] | None] = []  # glibc's malloc_trim, or None where there is none (looked up once)


def return_freed_memory() -> bool:
    """Hand the heap that dropped sessions freed back to the OS (glibc's ``malloc_trim(0)``); False where the C
    library has none (musl, macOS). glibc keeps freed memory in its arenas for reuse, one per thread that allocated
    (Gradio runs handlers in a thread pool), so without this the RSS of a process whose sessions expired stays at
    its high-water mark."""
    if not _TRIM:
        trim = None
        try:
            name = ctypes.util.find_library("c")
            libc = ctypes.CDLL(name) if name else None
            trim = getattr(libc, "malloc_trim", None)
            if trim is not None:
                trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
        except OSError:
            trim = None
        _TRIM.append(trim)
    trim = _TRIM[0]
    if trim is None:
        return False
    trim(0)
    return True


def sessions() -> dict[str, int]:
    """Known sessions and their open streams (for tests and the measurement script)."""
    with _LOCK:
        return {s: _OPEN.get(s, 0) for s in _SEEN}
