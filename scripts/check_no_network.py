"""No network at run time, checked: start the app under strace, run a turn, watch it, fail on any outside call.

    .venv/bin/python scripts/check_no_network.py [--seconds 30] [--turn "GS-40 E-09"]     (or: make check-network)

``python app.py`` starts on a free port of 127.0.0.1 with a temporary CHROMA_PATH (so the first-start indexing is
watched too) under ``strace -f -e trace=connect,sendto,sendmsg``. Once the page answers, one turn runs through the
``/run_turn`` API (gradio_client), then the app is watched for ``--seconds`` more and stopped. The check fails
(exit 1) if any traced call went to a non-loopback address, to port 53 (a DNS query, loopback resolvers such as
127.0.0.53 included) or to a local name-service socket (nscd, systemd-resolved), and lists those calls. It also
fails if strace saw no loopback call at all (then it did not watch the app). Exit 2: the check could not run.

The app's own settings are what is checked: ORT_DISABLE_TELEMETRY, HF_HUB_OFFLINE, GRADIO_ANALYTICS_ENABLED and
CHROMA_HOST/CHROMA_PORT are removed from the environment the app starts with.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STRIPPED = ("ORT_DISABLE_TELEMETRY", "HF_HUB_OFFLINE", "GRADIO_ANALYTICS_ENABLED", "CHROMA_HOST", "CHROMA_PORT")
NAME_SERVICE_SOCKETS = ("nscd/socket", "systemd/resolve", "io.systemd.Resolve")
_CALL = re.compile(r"\b(connect|sendto|sendmsg)\(")
_PORT = re.compile(r"sin6?_port=htons\((\d+)\)")
_INET4 = re.compile(r'sin_addr=inet_addr\("([^"]+)"\)')
_INET6 = re.compile(r'inet_pton\(AF_INET6, "([^"]+)"')
_UNIX = re.compile(r'sun_path=@?"([^"]*)"')


@dataclass(frozen=True)
class NetworkCall:
    """One traced call that names a socket address (sendto/sendmsg on a connected socket name none)."""

    line: str
    family: str
    address: str
    port: int | None
    outside: bool  # a DNS query, a name-service socket, or a non-loopback address


def _loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool((mapped or ip).is_loopback)


def network_calls(strace_text: str) -> list[NetworkCall]:
    """The connect/sendto/sendmsg calls of an ``strace`` log that carry an AF_INET, AF_INET6 or AF_UNIX address."""
    calls: list[NetworkCall] = []
    for line in strace_text.splitlines():
        if not _CALL.search(line):
            continue
        family = re.search(r"sa_family=(AF_\w+)", line)
        if family is None:
            continue  # a connected socket (NULL address), or a resumed call
        fam = family.group(1)
        port_match = _PORT.search(line)
        port = int(port_match.group(1)) if port_match else None
        if fam == "AF_INET" and (m := _INET4.search(line)):
            address = m.group(1)
            outside = port == 53 or not _loopback(address)
        elif fam == "AF_INET6" and (m := _INET6.search(line)):
            address = m.group(1)
            outside = port == 53 or not _loopback(address)
        elif fam == "AF_UNIX" and (m := _UNIX.search(line)):
            address = m.group(1)
            outside = any(name in address for name in NAME_SERVICE_SOCKETS)
        else:
            continue  # AF_NETLINK (interface lists), AF_UNSPEC (disconnect): no traffic leaves the machine
        calls.append(NetworkCall(line=line.strip(), family=fam, address=address, port=port, outside=outside))
    return calls


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _strace_command(strace: str, log: Path) -> list[str]:
    base = [strace, "-f", "-qq", "-e", "trace=connect,sendto,sendmsg", "-o", str(log)]
    probe = subprocess.run([strace, "--seccomp-bpf", *base[1:], "true"], capture_output=True, text=True)
    return [strace, "--seccomp-bpf", *base[1:]] if probe.returncode == 0 else base  # seccomp: far less overhead


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float, log_path: Path) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the app exited with {proc.returncode} before serving:\n{log_path.read_text(errors='replace')[-3000:]}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the app did not answer on {url} within {timeout:.0f} s:\n"
                f"{log_path.read_text(errors='replace')[-3000:]}"
            )
        time.sleep(0.5)


def _run_turn(url: str, turn: str) -> str:
    from gradio_client import Client

    result = Client(url, verbose=False).predict(turn, api_name="/run_turn")
    return str(result)[:200]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to watch after the turn (30)")
    parser.add_argument("--turn", default="GS-40 E-09", help="the turn run through /run_turn")
    parser.add_argument("--start-timeout", type=float, default=900.0, help="seconds to wait for the page (900)")
    args = parser.parse_args(argv)

    strace = shutil.which("strace")
    if strace is None:
        print("check_no_network: strace is not installed: apt-get install -y strace", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="check-no-network-"))
    trace_log, app_log = work / "strace.log", work / "app.log"
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {k: v for k, v in os.environ.items() if k not in STRIPPED}
    env.update(
        GRADIO_SERVER_NAME="127.0.0.1",
        GRADIO_SERVER_PORT=str(port),
        CHROMA_PATH=str(work / "chroma"),
        TOKENIZERS_PARALLELISM="false",
    )
    command = [*_strace_command(strace, trace_log), sys.executable, "app.py"]
    print(f"check_no_network: {' '.join(command[:-2])} python app.py on {url} (CHROMA_PATH={work / 'chroma'})")
    with app_log.open("w") as out:
        tracer = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    started = time.monotonic()
    try:
        _wait_ready(url, tracer, args.start_timeout, app_log)
        print(f"check_no_network: serving after {time.monotonic() - started:.0f} s; running a turn")
        print(f"check_no_network: turn answered: {_run_turn(url, args.turn)!r}...")
        print(f"check_no_network: watching for {args.seconds:.0f} s")
        time.sleep(args.seconds)
    except Exception as exc:  # the check could not run: say why, with the app's log
        print(f"check_no_network: could not run the check: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    finally:
        for pid in _children(tracer.pid):  # the app itself; strace exits with it
            os.kill(pid, signal.SIGTERM)
        try:
            tracer.wait(timeout=30)
        except subprocess.TimeoutExpired:
            for pid in _children(tracer.pid):
                os.kill(pid, signal.SIGKILL)
            tracer.wait(timeout=30)

    calls = network_calls(trace_log.read_text(errors="replace"))
    outside = [c for c in calls if c.outside]
    loopback = [c for c in calls if not c.outside and c.family in ("AF_INET", "AF_INET6")]
    print(
        f"check_no_network: {len(calls)} addressed calls traced over {time.monotonic() - started:.0f} s: "
        f"{len(loopback)} loopback, {len(outside)} outside (log: {trace_log})"
    )
    if not loopback:
        print(
            "check_no_network: FAILED: strace saw no loopback call at all, so it did not watch the app.",
            file=sys.stderr,
        )
        return 1
    if outside:
        print("check_no_network: FAILED: the app made DNS queries or non-loopback connections:", file=sys.stderr)
        for call in outside[:40]:
            print(f"  {call.line}", file=sys.stderr)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("check_no_network: OK: no DNS query and no connection outside 127.0.0.1")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
