"""What new API sessions that send a large value cost the app's memory, and whether it comes back.

    .venv/bin/python scripts/session_memory.py [--sessions 40] [--kb 200] [--json]

Starts ``python app.py`` (its own temporary store, SESSION_IDLE_S=3) and reads its resident memory (VmRSS) from
/proc, then opens ``--sessions`` new sessions, each sending one turn of ``--kb`` KB (over the 2,000-character limit,
so refused) to the page's streamed turn event (Run) the way a script speaking Gradio's queue does (``/queue/join``
with a new session, then its ``/queue/data`` stream until the result; no heartbeat), and reads the memory again:
right after, and once the sessions have been idle past SESSION_IDLE_S. Prints the three readings (MB), the
per-session growth, the load and the date.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rss_mb(pid: int) -> float:
    """The process's resident memory in MB (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def fn_index(url: str, api_name: str) -> int:
    """The index of the event with ``api_name`` in the app's config."""
    with urllib.request.urlopen(f"{url}config", timeout=30) as response:
        config = json.load(response)
    for dep in config["dependencies"]:
        if dep.get("api_name") == api_name:
            return int(dep["id"])
    raise RuntimeError(f"no event named {api_name!r}")


def turn_index(url: str) -> int:
    """The index of the page's streamed turn event (Run): the one whose JS stamps the page's turn count."""
    with urllib.request.urlopen(f"{url}config", timeout=30) as response:
        config = json.load(response)
    for dep in config["dependencies"]:
        if "__turnSeq" in str(dep.get("js") or "") and dep.get("api_visibility", "") != "public":
            return int(dep["id"])
    raise RuntimeError("no streamed turn event in the config")


def join(url: str, index: int, data: list, session: str, timeout: float = 60) -> int:
    """``/queue/join`` one event for ``session``; returns the HTTP status (the body is read and dropped)."""
    body = json.dumps({"data": data, "fn_index": index, "session_hash": session, "event_data": None}).encode()
    request = urllib.request.Request(
        f"{url}gradio_api/queue/join", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as exc:
        exc.read()
        return exc.code


def listen(url: str, session: str, until: str = "process_completed", timeout: float = 120) -> list[dict]:
    """Read ``session``'s ``/queue/data`` stream until a message ``until`` (then close it); returns the messages."""
    seen: list[dict] = []
    with urllib.request.urlopen(f"{url}gradio_api/queue/data?session_hash={session}", timeout=timeout) as stream:
        for raw in stream:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            message = json.loads(line[5:])
            seen.append(message)
            if message.get("msg") in (until, "close_stream"):
                break
    return seen


def measure(url: str, pid: int, sessions: int, kb: int, idle_s: float, warm: int = 0) -> dict:
    """Send ``sessions`` new sessions one refused ``kb``-KB turn each; RSS before, after, and after ``idle_s``."""
    from tests.conftest import control_values

    index = turn_index(url)
    for number in range(warm):  # the first turns of a process grow it for reasons of their own (lazy imports)
        session = uuid.uuid4().hex[:11]
        if join(url, index, ["warm " + "x" * (kb * 1000), *control_values(), "", number + 1], session) == 200:
            listen(url, session)
    time.sleep(idle_s if warm else 0)
    before = rss_mb(pid)
    statuses = []
    for number in range(sessions):
        session = uuid.uuid4().hex[:11]
        turn = "GlucoSense error " + "x" * (kb * 1000)
        statuses.append(join(url, index, [turn, *control_values(), "", number + 1], session))
        if statuses[-1] == 200:
            listen(url, session)
    after = rss_mb(pid)
    time.sleep(idle_s)
    settled = rss_mb(pid)
    return {
        "sessions": sessions,
        "kb_each": kb,
        "accepted": statuses.count(200),
        "refused_413": statuses.count(413),
        "rss_before_mb": round(before, 1),
        "rss_after_mb": round(after, 1),
        "rss_idle_mb": round(settled, 1),
        "kept_per_session_mb": round((settled - before) / sessions, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--kb", type=int, default=200, help="size of each session's turn in KB")
    parser.add_argument("--warm", type=int, default=5, help="sessions sent first, not measured")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --sessions sessions, each measured")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from tests.app_server import SHIPPED, AppServer

    work = Path(tempfile.mkdtemp(prefix="session-memory-"))
    app = AppServer(work, SHIPPED, extra_env={"SESSION_IDLE_S": "3"}).start(timeout=900)
    try:
        load = os.getloadavg()[0]
        result = measure(app.url, app.proc.pid, args.sessions, args.kb, idle_s=12, warm=args.warm)
        # RSS is a high-water mark (the allocator keeps freed memory): a leak grows it again in every round, memory
        # that is freed and reused does not
        result["later_rounds_kept_per_session_mb"] = [
            measure(app.url, app.proc.pid, args.sessions, args.kb, idle_s=12)["kept_per_session_mb"]
            for _ in range(args.rounds - 1)
        ]
    finally:
        app.stop()
    result.update(load_1min=round(load, 1), cpus=os.cpu_count(), date=time.strftime("%Y-%m-%d %H:%M UTC"))
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
