"""No network at run time: loading the bundled models makes no DNS query and no non-loopback connect.

onnxruntime's official wheels carry Microsoft's 1DS telemetry, which resolves ``mobile.events.data.microsoft.com``
a few seconds after the first session is created unless ``ORT_DISABLE_TELEMETRY=1`` is set before onnxruntime is
imported (``ort.disable_telemetry_events()`` does not stop it). ``retrieval.encoders`` sets it. This test watches a
real model load with ``strace``; ``scripts/check_no_network.py`` (``make check-network``) watches the whole app.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.app_server import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from check_no_network import network_calls  # noqa: E402

LOAD_AND_WAIT = textwrap.dedent("""
    import time
    from retrieval.encoders import load_embedder
    load_embedder("bge-small-en-v1.5").embed_query("GS-40 E-09")
    load_embedder("multilingual-e5-small").embed_query("GS-40 E-09")
    # unpatched, onnxruntime's telemetry first looks its host up 8.3-8.8 s after the first session (3 runs with
    # onnxruntime imported first, 2026-12-03): a shorter wait could not see it
    time.sleep(12)
""")


def _strace_or_skip() -> str:
    path = shutil.which("strace")
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("strace is needed under CI: apt-get install -y strace")
        pytest.skip("strace is not installed (apt-get install -y strace)")
    return path


def test_model_loading_makes_no_dns_query_or_outside_connect(tmp_path):
    strace = _strace_or_skip()
    log = tmp_path / "strace.log"
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}  # the code must set it itself
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [
            strace,
            "-f",
            "-qq",
            "-e",
            "trace=connect,sendto,sendmsg",
            "-o",
            str(log),
            sys.executable,
            "-c",
            LOAD_AND_WAIT,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outside = [call for call in network_calls(log.read_text()) if call.outside]
    assert outside == [], "\n".join(call.line for call in outside)


@pytest.mark.parametrize(
    ("line", "outside"),
    [
        ('12 connect(5, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = 0', True),
        ('12 connect(5, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("127.0.0.53")}, 16) = 0', True),
        ('12 connect(5, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("13.69.109.130")}, 16) = 0', True),
        (
            "12 connect(5, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), "
            'inet_pton(AF_INET6, "2a01:111:f100::1", &sin6_addr), sin6_scope_id=0}, 28) = 0',
            True,
        ),
        ('12 connect(5, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT', True),
        (
            '12 sendto(5, "\\1\\2", 2, 0, {sa_family=AF_INET, sin_port=htons(53), '
            'sin_addr=inet_addr("8.8.8.8")}, 16) = 2',
            True,
        ),
        (
            '12 sendmsg(5, {msg_name={sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("1.1.1.1")}, '
            "msg_namelen=16}, 0) = 40",
            True,
        ),
        ('12 connect(5, {sa_family=AF_INET, sin_port=htons(7860), sin_addr=inet_addr("127.0.0.1")}, 16) = 0', False),
        (
            "12 connect(5, {sa_family=AF_INET6, sin6_port=htons(7860), sin6_flowinfo=htonl(0), "
            'inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 0',
            False,
        ),
        ('12 connect(5, {sa_family=AF_UNIX, sun_path="/tmp/x.sock"}, 110) = 0', False),
        ('12 sendto(5, "GET / HTTP/1.1", 14, 0, NULL, 0) = 14', False),
        (
            "12 sendto(5, {{nlmsg_len=20, nlmsg_type=RTM_GETADDR}}, 20, 0, {sa_family=AF_NETLINK, nl_pid=0}, 12) = 20",
            False,
        ),
    ],
)
def test_strace_lines_are_classified(line, outside):
    flagged = [call.outside for call in network_calls(line)]
    assert flagged == [True] if outside else not any(flagged)
