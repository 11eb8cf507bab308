"""`make test` leaves the work tree clean: no test writes the documentation's pictures (docs/*.png); they are taken by
an explicit command, ``make screenshots`` (scripts/screenshots.py), which names every picture the docs show."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
# A picture path into docs/ built in a test (ROOT / "docs" / "x.png", "docs/x.png"), or a screenshot saved under a
# docs folder; reading the docs' pages (tests/test_docs_reference.py) is not writing them. This file only names
# the pattern.
INTO_DOCS = re.compile(
    r"""ROOT\s*/\s*["']docs["'][^\n]*\.png|["']docs/[^"']*\.png["']|screenshot\([^\n]*\bdocs\b|\bDOCS\s*/[^\n]*\.png"""
)


def test_no_test_writes_into_docs():
    offenders = [
        f"{path.name}:{n}"
        for path in sorted(TESTS.glob("*.py"))
        if path.name != Path(__file__).name
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if INTO_DOCS.search(line)
    ]
    assert offenders == [], f"tests that build a path into docs/ (write into tmp_path instead): {offenders}"


def test_the_pictures_have_their_command():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^screenshots:.*\n\t\$\(PY\) scripts/screenshots\.py", makefile, re.MULTILINE), (
        "no `make screenshots`"
    )
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import screenshots
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    shown = set(re.findall(r"docs/([\w-]+)\.png", "\n".join(p.read_text(encoding="utf-8") for p in _docs_pages())))
    assert shown <= set(screenshots.PICTURES), (
        f"pictures the docs show that no command takes: {shown - set(screenshots.PICTURES)}"
    )
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "screenshots.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0 and "--only" in out.stdout, out.stderr


def _docs_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
