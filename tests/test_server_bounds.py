"""What one client can make the launched app spend (``inspector.guard``), on a real ``python app.py``: a forged
X-Forwarded-For does not give a client more upload room, a request body over MAX_REQUEST_KB is refused unread,
memory does not grow with new sessions that send large values, a heavy job stops once the script that queued it
went away, and a session may queue one heavy job at a time. Raw HTTP, as a script speaking Gradio's queue does."""

from __future__ import annotations

import http.client
import json
import platform
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

from tests.app_server import SHIPPED, AppServer, prebuilt_store
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import session_memory

LIVE_SHIPPED = "live:shipped"
CONFIGS = ["bm25", "dense", "rrf", "full"]


@pytest.fixture(scope="module")
def app(tmp_path_factory, store_cache):
    workdir = tmp_path_factory.mktemp("server-bounds")
    server = AppServer(
        workdir,
        SHIPPED,
        store=prebuilt_store(SHIPPED, store_cache),
        extra_env={
            "UPLOAD_CLIENT_MB": "1",
            "UPLOAD_UNUSED_S": "600",
            "MAX_REQUEST_KB": "512",
            "SESSION_IDLE_S": "3",
            "LISTENER_GRACE_S": "2",
        },
    )
    with server.running():
        yield server


def _upload(url: str, size: int, forwarded: str | None) -> tuple[int, str]:
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{boundary}.jsonl"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + (boundary.encode() * (size // 32 + 1))[:size]
        + f"\r\n--{boundary}--\r\n".encode()
    )
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    if forwarded:
        headers["X-Forwarded-For"] = forwarded
    request = urllib.request.Request(f"{url}gradio_api/upload", data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_forged_forwarded_for_does_not_give_a_client_more_upload_room(app):
    """uvicorn trusted X-Forwarded-For from 127.0.0.1, so a local client naming a new address per request took
    UPLOAD_CLIENT_MB once per address. With TRUSTED_PROXIES unset no proxy header is believed: every request here
    is 127.0.0.1's, and the second 0.6 MB upload goes past its 1 MB."""
    first = _upload(app.url, 600_000, "203.0.113.1")
    second = _upload(app.url, 600_000, "203.0.113.2")
    assert first[0] == 200, first
    assert second[0] == 429 and "this address already keeps 0.6 MB" in second[1], second


def _post(app, path: str, body: bytes, chunked: bool = False) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", app.port, timeout=60)
    try:
        headers = {"Content-Type": "application/json"}
        if chunked:
            conn.request(
                "POST",
                path,
                body=iter([body[i : i + 65536] for i in range(0, len(body), 65536)]),
                headers=headers,
                encode_chunked=True,
            )
        else:
            conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


@pytest.mark.parametrize("chunked", [False, True], ids=["with-length", "chunked"])
def test_a_request_body_over_the_bound_is_refused_unread(app, chunked):
    from tests.conftest import control_values

    index = session_memory.fn_index(app.url, "run_turn")
    big = {"data": ["x" * 600_000, *control_values(), ""], "fn_index": index, "session_hash": uuid.uuid4().hex[:11]}
    status, text = _post(app, "/gradio_api/queue/join", json.dumps(big).encode(), chunked)
    assert status == 413 and "MAX_REQUEST_KB" in text, (status, text[:300])
    small = {**big, "data": ["GlucoSense GS-40 error E-07", *control_values(), ""]}
    status, text = _post(app, "/gradio_api/queue/join", json.dumps(small).encode(), chunked)
    assert status == 200 and "event_id" in text, (status, text[:300])  # what fits is served as before
    session_memory.listen(app.url, small["session_hash"])


def test_new_sessions_sending_large_values_leave_no_memory_behind(app):
    """Issue: about 8.5 MB kept per new session for each refused 4 MB turn, never freed. Here 30 sessions each send
    a 400 KB turn (under MAX_REQUEST_KB=512, refused as too long); once idle past SESSION_IDLE_S (3 s) what they
    left is dropped: the app's RSS comes back within a fraction of what they sent (12 MB).

    One round's RSS is noisy by design: the first round of such turns grows glibc's per-thread arenas by up to about
    8 MB of memory that is freed but stays resident (malloc_info: a thread arena's free top chunk, which malloc_trim
    does not return) and that later rounds reuse. Measured: first rounds kept 0.16-0.27 MB per session, 3-KB turns
    instead of 400-KB ones grew a first round as much (0.14), and the rounds after kept -0.07 to 0.02. What a session
    keeps is kept in every round (the app made to keep each turn's request: 0.51, 0.36, 0.40, 0.35), so the app
    passes once one round of 30 (up to 4, each measured from the RSS the one before settled at) keeps less than the
    bound per session."""
    rounds = []
    for number in range(4):
        warm = 6 if number == 0 else 0  # the first turns of a process grow it for reasons of their own (imports)
        result = session_memory.measure(app.url, app.proc.pid, 30, 400, idle_s=8, warm=warm)
        assert result["accepted"] == 30, result
        rounds.append(result)
        if result["kept_per_session_mb"] < 0.12:  # less than a third of each session's 400 KB
            return
    kept = [r["kept_per_session_mb"] for r in rounds]
    raise AssertionError(f"every round kept 0.12 MB or more per session: {kept} (MB); the last: {rounds[-1]}")


def test_freed_memory_is_handed_back_where_the_c_library_can():
    """The idle-session sweep hands the heap the dropped sessions freed back to the OS: glibc's malloc_trim, which
    musl and macOS do not have (then nothing is called)."""
    from inspector import guard

    assert guard.return_freed_memory() is (platform.libc_ver()[0] == "glibc")


def _heavy_index(url: str) -> int:
    with urllib.request.urlopen(f"{url}config", timeout=30) as response:
        config = json.load(response)
    show = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "eval-run")
    for dep in config["dependencies"]:  # the Evaluation tab's Show: a heavy job (one queue of one for the app)
        if [show, "click"] in [list(t) for t in dep.get("targets", [])] and len(dep.get("inputs", [])) == 4:
            return int(dep["id"])
    raise AssertionError("no Show event in the config")


def _show(app, session: str) -> int:
    return session_memory.join(app.url, _heavy_index(app.url), [LIVE_SHIPPED, CONFIGS, "rrf", 0], session)


def test_a_heavy_job_stops_when_the_script_that_queued_it_went_away(app):
    """A script queues a full live evaluation (4 configurations over the shipped set: a minute or more on this
    fresh app, the first heavy job of the module, so no turn is cached), reads its
    stream until the job starts and disconnects. The job stops at the turn it is on once no stream of its session
    has been open for LISTENER_GRACE_S (2 s), so the next session's job starts within seconds, not after it."""
    gone = uuid.uuid4().hex[:11]
    assert _show(app, gone) == 200
    started = session_memory.listen(app.url, gone, until="process_starts", timeout=300)  # then the script leaves
    assert started[-1]["msg"] == "process_starts", started
    left_at = time.monotonic()
    waiting = uuid.uuid4().hex[:11]
    times: dict[str, float] = {}

    def wait_for_its_turn() -> None:
        assert _show(app, waiting) == 200
        session_memory.listen(app.url, waiting, until="process_starts", timeout=300)
        times["started"] = time.monotonic()

    thread = threading.Thread(target=wait_for_its_turn, daemon=True)
    thread.start()
    thread.join(120)
    assert "started" in times, "the next heavy job did not start within 120 s"
    assert times["started"] - left_at < 25, times["started"] - left_at
    assert f"heavy job of session {gone} stopped" in app.log_tail(20_000)  # stopped, not run to its end


def test_a_session_queues_one_heavy_job_at_a_time(app):
    session = uuid.uuid4().hex[:11]
    assert _show(app, session) == 200
    assert _show(app, session) == 429  # a second one of the same session, while the first is queued or running
    assert _show(app, uuid.uuid4().hex[:11]) == 200  # another session queues its own
