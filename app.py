"""Hybrid retrieval inspector: `make run`, then open http://127.0.0.1:7860."""

from __future__ import annotations

import errno
import os
import socket
import sys

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # onnxruntime's telemetry (see retrieval/encoders.py)


DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7860


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def server_address() -> tuple[str, int]:
    """``GRADIO_SERVER_NAME`` and ``GRADIO_SERVER_PORT``, checked; exits 2 with a message if the port is not a
    number from 1 to 65535."""
    host = os.environ.get("GRADIO_SERVER_NAME", DEFAULT_HOST) or DEFAULT_HOST
    raw = os.environ.get("GRADIO_SERVER_PORT", str(DEFAULT_PORT)).strip()
    if not raw.isdigit() or not 1 <= int(raw) <= 65535:
        _fail(
            f"GRADIO_SERVER_PORT={raw!r} is not a port: use a number from 1 to 65535, e.g. "
            f"GRADIO_SERVER_PORT={DEFAULT_PORT + 1} make run"
        )
    return host, int(raw)


def check_port(host: str, port: int) -> None:
    """Exit 2 at once, before the warm-up, if ``host:port`` cannot be bound (busy, or not this machine's)."""
    another = DEFAULT_PORT + 1 if port != DEFAULT_PORT + 1 else DEFAULT_PORT + 2
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        _fail(
            f"GRADIO_SERVER_NAME={host!r} is not an address of this machine ({exc.strerror}); "
            f"use {DEFAULT_HOST} (the default)."
        )
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is not busy
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                _fail(
                    f"port {port} on {host} is already in use (another program, or an inspector already "
                    f"running). Pick another port: GRADIO_SERVER_PORT={another} make run"
                )
            _fail(
                f"cannot listen on {host} port {port} ({exc.strerror or exc}). Pick another port "
                f"(GRADIO_SERVER_PORT={another} make run) or address (GRADIO_SERVER_NAME={DEFAULT_HOST})."
            )


def main() -> None:
    host, port = server_address()
    check_port(host, port)  # before the warm-up, which can take minutes when a store is rebuilt

    from inspector import handlers
    from inspector.ui import build_app, launch_options

    try:
        handlers.warm_up()  # index the corpus and load the models now, so the first turn is fast
    except ValueError as exc:  # bad settings or corpus: the message says how to fix it
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    app = build_app()
    # uvicorn reads the proxies it trusts from here when launch() starts it; by default it would trust 127.0.0.1
    from inspector.guard import forwarded_allow_ips

    os.environ["FORWARDED_ALLOW_IPS"] = forwarded_allow_ips(handlers.base_settings().trusted_proxies)
    try:
        app.launch(server_name=host, server_port=port, share=False, **launch_options())
    except OSError as exc:  # taken by someone else during the warm-up
        _fail(
            f"port {port} on {host} could not be opened ({exc}). Pick another port: "
            f"GRADIO_SERVER_PORT={port + 1 if port < 65535 else DEFAULT_PORT} make run"
        )


if __name__ == "__main__":
    main()
