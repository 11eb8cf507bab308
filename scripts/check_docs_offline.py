"""Fail when the built documentation site would load anything from another host.

    python scripts/check_docs_offline.py [SITE_DIR]     (run by ``make docs`` after the build; default: site/)

Every ``<link href>``, ``<script src>``, ``<img src>``, ``<iframe src>``, ``<source src>`` and CSS ``url(...)`` /
``@import`` in the built HTML and CSS must be relative (or a data: URI). Plain ``<a href>`` links to other sites
are allowed: a reader may follow them, the page does not load them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LOADED = re.compile(
    r"""<(?:link|script|img|iframe|source|audio|video|embed)\b[^>]*?\b(?:href|src|srcset)\s*=\s*["']?((?:https?:)?//[^"'\s>]+)""",
    re.IGNORECASE,
)
CSS_URL = re.compile(r"""(?:url\(\s*["']?|@import\s+["'])((?:https?:)?//[^"')\s]+)""", re.IGNORECASE)


def outside_loads(text: str, css: bool = False) -> list[str]:
    """The URLs on other hosts that a page (or, with ``css``, a stylesheet) would load."""
    found = [m.group(1) for m in LOADED.finditer(text)] if not css else []
    return found + [m.group(1) for m in CSS_URL.finditer(text)]


def check(site: Path) -> list[str]:
    problems = []
    for path in sorted(site.rglob("*")):
        if path.suffix in (".html", ".css"):
            for url in outside_loads(path.read_text(encoding="utf-8", errors="replace"), css=path.suffix == ".css"):
                problems.append(f"{path.relative_to(site)}: loads {url}")
    return problems


def main(argv: list[str]) -> int:
    site = Path(argv[0] if argv else "site")
    if not (site / "index.html").is_file():
        print(f"{site}/index.html not found: build the site first (make docs).", file=sys.stderr)
        return 2
    problems = check(site)
    for line in problems:
        print(line, file=sys.stderr)
    print(f"{len(problems)} outside loads in {site}/")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
