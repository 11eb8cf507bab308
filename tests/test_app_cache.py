"""The launched app keeps Gradio's cache bounded: uploads above the corpus limit and on routes no control uses are
refused (issue 13, defect 8; the Data tab's corpus upload is the one control that takes a file, issue 10).

``python app.py`` runs with its own GRADIO_TEMP_DIR (Gradio's cache folder), so every file the app leaves there is
counted: a turn makes one export in its session's folder inside the app's private folder, never a second copy of
it elsewhere in the cache, and that folder keeps at most ``handlers.EXPORT_KEEP`` (checked in tests/test_exports.py).

Exports are private to their session (issue 19, defect 1): a second client cannot fetch the first one's export by
any path it can see or guess, no folder is listable, and a session's exports go when it ends.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from inspector.handlers import EXPORT_KEEP
from tests.app_server import MINI, AppServer, local_client, prebuilt_store

TURN = "GlucoSense GS-40 error E-07"


@pytest.fixture(scope="module")
def app(tmp_path_factory, store_cache):
    workdir = tmp_path_factory.mktemp("app-cache")
    server = AppServer(
        workdir,
        MINI,
        store=prebuilt_store(MINI, store_cache),
        extra_env={
            "GRADIO_TEMP_DIR": str(workdir / "gradio"),
            "MAX_UPLOAD_MB": "1",
            "UPLOAD_CLIENT_MB": "2.5",
            "UPLOAD_UNUSED_S": "4",
            # Gradio sees a closed page at its next heartbeat, 15 s apart by default (Gradio's own setting): the
            # test of a session's end waited that out
            "GRADIO_HEARTBEAT_INTERVAL": "1",
        },
    )
    server.cache = workdir / "gradio"
    with server.running():
        yield server


def _cached_files(app) -> list:
    return [p for p in app.cache.rglob("*") if p.is_file()] if app.cache.exists() else []


def _upload(url: str, size: int, route: str = "upload", name: str = "big.bin") -> int:
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
            f"Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + b"x" * size
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        f"{url}gradio_api/{route}",
        data=body,
        method="POST",
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_oversize_uploads_and_unused_upload_routes_are_refused_and_leave_nothing(app):
    """MAX_UPLOAD_MB=1 here: a 2 MB upload is refused by Gradio before it reaches the cache; the recording route,
    which no control uses, refuses even 10 bytes."""
    before = set(_cached_files(app))
    assert _upload(app.url, 2_000_000) == 413
    assert _upload(app.url, 10, route="process_recording") == 403
    assert set(_cached_files(app)) == before


def test_one_client_keeps_a_bounded_amount_of_uploads_and_unused_ones_go(app):
    """Issue 19, defect 5: 20 anonymous 2 MB uploads used to stay a day. Here a client keeps at most
    UPLOAD_CLIENT_MB (2.5) at a time; uploads no corpus adopted go after UPLOAD_UNUSED_S (4 s)."""
    before = set(_cached_files(app))
    assert [_upload(app.url, 900_000, name=f"u{i}.jsonl") for i in range(2)] == [200, 200]
    assert _upload(app.url, 900_000, name="u2.jsonl") == 429  # a third would make 2.7 MB
    assert len(set(_cached_files(app)) - before) == 2
    deadline = time.monotonic() + 60
    while set(_cached_files(app)) - before and time.monotonic() < deadline:
        time.sleep(1)
    assert not set(_cached_files(app)) - before, "unused uploads outlived UPLOAD_UNUSED_S"
    assert _upload(app.url, 900_000, name="u3.jsonl") == 200  # room again


def test_reruns_leave_one_file_each_in_the_cache_never_a_copy(app):
    """Each turn writes one export into the app's private folder inside the cache and Gradio serves it from there:
    no second copy per turn. With the cap on that folder (tests/test_exports.py) the cache stays bounded."""

    # Four sessions at once, each re-running the turn: a copy per turn, per session or per rerun would show in the
    # count below at any number of turns (8 each before: the turns past the second were the same evidence again).
    sessions, each = 4, 3

    def session(_: int) -> None:
        client = local_client(app.url, download_files=False)
        for _ in range(each):
            client.predict(TURN, api_name="/run_turn")

    before = set(_cached_files(app))  # an earlier test's upload may still be there (it goes after UPLOAD_UNUSED_S)
    with ThreadPoolExecutor(sessions) as pool:
        list(pool.map(session, range(sessions)))
    runs = sessions * each
    files = _cached_files(app)
    new = set(files) - before
    folders = {p.parent.parent for p in new}  # each session's folder sits in the app's one export folder
    assert len(new) <= runs, f"{len(new)} new files in Gradio's cache after {runs} turns"
    assert len(folders) == 1 and next(iter(folders)).name.startswith("inspector-exports-"), sorted(folders)
    assert len(files) <= EXPORT_KEEP


def _fetch(app, path: str | Path) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"{app.url}gradio_api/file={path}", timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def _export_path(value) -> Path:
    return Path(value["path"] if isinstance(value, dict) else value)


SECRET = "GlucoSense GS-40 error E-07 for Jane Roe"


def test_a_second_client_cannot_fetch_the_first_ones_export_and_it_goes_when_its_session_ends(app):
    """Two API clients, each its own session: B sees its own export's path (and so the process's folder), and with
    it tries every path an attacker could list or guess: the folders themselves, A's file name in B's folder and
    in the process folder, and neighbouring sequence numbers. None serves A's turn. A's folder goes when A leaves."""

    alice = local_client(app.url, download_files=False)
    first = alice.predict(SECRET, api_name="/run_turn")
    assert first[-1] is not None, f"A's turn made no export: {first[0]}\n{app.log_tail()}"
    mine = _export_path(first[-1])
    bob = local_client(app.url, download_files=False)
    try:
        seen = bob.predict(TURN, api_name="/run_turn")
        theirs = _export_path(seen[-1])
        assert _fetch(app, theirs)[0] == 200  # a client fetches its own export
        stem, seq = theirs.stem.rsplit("-", 1)
        guesses = [theirs.parent, theirs.parent.parent, theirs.parent / mine.name, theirs.parent.parent / mine.name]
        guesses += [
            folder / f"{stem}-{int(seq) + d:06d}.json"
            for d in range(-3, 4)
            if d
            for folder in (theirs.parent, theirs.parent.parent)
        ]
        for guess in guesses:
            status, body = _fetch(app, guess)
            assert SECRET.encode() not in body and status != 200, f"{guess} answered {status}"
        assert mine.parent != theirs.parent and mine.parent.parent == theirs.parent.parent
        assert mine.parent.name not in repr(seen), "B's answer names A's folder"
        assert _fetch(app, mine)[0] == 200  # only its own unguessable path serves A's export
    finally:
        bob.close()
    alice.close()  # the page goes away: Gradio's unload runs and removes A's folder
    deadline = time.monotonic() + 60
    while mine.parent.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not mine.parent.exists(), "A's exports outlived its session"
    assert _fetch(app, mine)[0] != 200


@pytest.mark.parametrize("value", ["NaN", "inf", [1, 2]])
def test_a_slider_sent_nan_inf_or_a_list_through_the_api_gets_a_message(app, value):
    """Issue 19, defect 8: Gradio's slider compared the value with its bounds before the handler ran ("NaN" < 1 is a
    TypeError): a generic error and a traceback in the log. Now the setting's own message comes back."""

    before = len(app.log_tail(10**9))
    client = local_client(app.url, download_files=False)
    try:
        out = client.predict(TURN, rrf_k=value, api_name="/run_turn")
    finally:
        client.close()
    assert "RRF_K" in out[0] and "whole number" in out[0], out[0]
    assert "Traceback" not in app.log_tail(10**9)[before:]
