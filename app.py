"""Hybrid retrieval inspector: `make run`, then open http://127.0.0.1:7860."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    from inspector import handlers
    from inspector.ui import build_app, launch_options

    try:
        handlers.warm_up()  # index the corpus and load the models now, so the first turn is fast
    except ValueError as exc:  # bad settings or corpus: the message says how to fix it
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    app = build_app()
    app.launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
        share=False,
        **launch_options(),
    )


if __name__ == "__main__":
    main()
