"""The reverse proxy of the scale-out recipe (``scripts/scale_out.py``): Debian's nginx with the generated config,
in front of two small HTTP servers on the loopback that answer their own name. A first visit gets a backend and
the ``inspector_backend`` cookie; every request carrying the cookie (a Gradio session's page, queue join and event
stream) stays on that backend; new visitors are spread over both. Cheap (no app, no model): seconds."""

from __future__ import annotations

import http.server
import shutil
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from tests.app_server import free_port
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))


def _backend(name: str, echo_forwarded: bool = False) -> tuple[http.server.ThreadingHTTPServer, int]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            forwarded = self.headers.get_all("X-Forwarded-For") or []
            body = (f"{name} {self.path}" + (f" xff={forwarded!r}" if echo_forwarded else "")).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def _get(url: str, cookie: str | None = None, headers: dict[str, str] | None = None) -> tuple[str, str | None]:
    request = urllib.request.Request(url, headers={**({"Cookie": cookie} if cookie else {}), **(headers or {})})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode(), response.headers.get("Set-Cookie")


def test_sticky_sessions_through_nginx(tmp_path):
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        pytest.fail("nginx is not installed: `apt-get install -y nginx` (.ci/run installs it)")
    import scale_out

    servers = [_backend("app1"), _backend("app2")]
    proxy = scale_out.Proxy(tmp_path, free_port(), [port for _, port in servers])
    try:
        proxy.start()
        url = f"http://127.0.0.1:{proxy.port}"
        seen = set()
        for visitor in range(24):
            body, cookie = _get(f"{url}/")
            backend = body.split()[0]
            assert cookie and cookie.startswith(f"inspector_backend={backend};"), cookie
            seen.add(backend)
            jar = cookie.split(";")[0]
            for path in ("/gradio_api/queue/join", f"/gradio_api/queue/data?session_hash=s{visitor}", "/config"):
                again, _ = _get(url + path, jar)
                assert again == f"{backend} {path}"  # the session's every request: one backend
        assert seen == {"app1", "app2"}  # new visitors spread over both (24 fair coins: 2 in 2^23 fail)
    finally:
        proxy.stop()
        for server, _ in servers:
            server.shutdown()


def test_nginx_replaces_a_forged_forwarded_for(tmp_path):
    """The recipe's nginx sends the address it saw as X-Forwarded-For, whatever the client put there: appending
    (``$proxy_add_x_forwarded_for``) passed ``6.6.6.6, 127.0.0.1`` on, and uvicorn took the forged first address as
    the client's, so one client could take the per-address upload bound once per address it named."""
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        pytest.fail("nginx is not installed: `apt-get install -y nginx` (.ci/run installs it)")
    import scale_out

    server, port = _backend("app1", echo_forwarded=True)
    proxy = scale_out.Proxy(tmp_path, free_port(), [port])
    try:
        proxy.start()
        for forged in ("6.6.6.6", "6.6.6.6, 7.7.7.7", ""):
            body, _ = _get(f"http://127.0.0.1:{proxy.port}/x", headers={"X-Forwarded-For": forged} if forged else None)
            assert body == "app1 /x xff=['127.0.0.1']", (forged, body)
    finally:
        proxy.stop()
        server.shutdown()
