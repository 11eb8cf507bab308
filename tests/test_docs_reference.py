"""The documentation cannot drift from the code: the reference pages are what scripts/gen_reference.py writes now,
they name every environment variable and every subcommand, every docs page is in the site's navigation, the README
is a short front door whose links resolve, and no page speaks of issue numbers. Fast: no model, no Chroma, no
browser (the site itself is built by `make docs`, which CI runs)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen():
    return _load("gen_reference")


@pytest.fixture(scope="module")
def fresh_pages(gen, tmp_path_factory):
    folder = tmp_path_factory.mktemp("reference")
    gen.write(folder)
    return folder


@pytest.mark.parametrize("page", ["settings.md", "cli.md", "api.md", "modules.md"])
def test_reference_page_is_what_the_code_generates(fresh_pages, page):
    fresh = (fresh_pages / page).read_text(encoding="utf-8")
    committed = (REFERENCE / page).read_text(encoding="utf-8")
    assert fresh == committed, f"docs/reference/{page} is out of date with the code: run `make reference` and commit it"


def test_settings_page_names_every_environment_variable_settings_declares():
    # Read the variables from the knobs' source (retrieval/settings_knobs.py), not through the generator, so a
    # generator that skipped a field would be caught.
    source = (ROOT / "retrieval" / "settings_knobs.py").read_text(encoding="utf-8")
    declared = set(re.findall(r"_knob\(\s*\"([A-Z][A-Z0-9_]+)\"", source))
    from retrieval.settings import ENV_VARS

    assert declared == set(ENV_VARS), "the source scan disagrees with Settings' knobs: fix this test's pattern"
    page = (REFERENCE / "settings.md").read_text(encoding="utf-8")
    missing = sorted(var for var in declared if f"### `{var}`" not in page or f"[`{var}`]" not in page)
    assert not missing, f"docs/reference/settings.md lacks {missing}: run `make reference`"


def test_settings_page_names_the_upload_limits_and_every_variable_the_code_reads(gen):
    from retrieval.formats import Limits

    page = (REFERENCE / "settings.md").read_text(encoding="utf-8")
    wanted = set(Limits.ENV.values()) | (set(gen.env_vars_in_code()) - gen.IGNORED_ENV)
    assert {"MAX_UPLOAD_MB", "MAX_RETRIEVERS", "GRADIO_SERVER_PORT"} <= wanted
    missing = sorted(var for var in wanted if f"`{var}`" not in page)
    assert not missing, f"docs/reference/settings.md lacks {missing}: run `make reference`"


def test_cli_page_names_every_subcommand_and_flag():
    from retrieval.cli import build_parser
    from retrieval.evaluation.cli import register

    page = (REFERENCE / "cli.md").read_text(encoding="utf-8")
    top = next(a for a in build_parser((register,))._actions if a.__class__.__name__ == "_SubParsersAction")
    assert {"query", "index", "eval", "bench", "lab", "why", "tune", "judgments"} <= set(top.choices)
    for name, sub in top.choices.items():
        assert f"\n## {name}\n" in page, f"docs/reference/cli.md has no section for `{name}`: run `make reference`"
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in page, f"{name} {flag} is missing from docs/reference/cli.md"


def test_api_page_names_run_turn_every_control_and_the_span_level():
    from retrieval.settings import CONTROLS

    page = (REFERENCE / "api.md").read_text(encoding="utf-8")
    assert "`/run_turn`" in page and "`agent.hybrid_path`" in page and "`retrieval.retrieve`" in page
    assert all(f"| `{name}` |" in page for name in CONTROLS)
    assert "| `hybrid_path` |" in page and "| `timings_ms` |" in page  # the export's top-level keys


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def test_no_page_speaks_of_issue_numbers():
    pattern = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
    found = []
    for path in _pages():
        text = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(ROOT)}: {m.group(0)!r}" for m in pattern.finditer(text)]
    assert not found, "say what the work was, not its issue number: " + "; ".join(found)


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for value in node.values() for p in _nav_pages(value)]
    return [p for item in node for p in _nav_pages(item)]


def test_every_docs_page_is_in_the_navigation_and_every_nav_entry_exists():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_pages(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages, "mkdocs.yml's nav and the pages under docs/ differ"
    assert config["theme"]["font"] is False, "web fonts are an outside request: keep theme.font false"


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_readme_is_a_short_front_door_whose_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "make run" in text and "make test" in text
    links = [m.group(1) for m in LINK.finditer(text)]
    assert len(links) >= 8, "the README should point to the guides"
    broken = []
    for target in links:
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = (ROOT / target.split("#", 1)[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"README links to missing files: {broken}"
    for guide in ("presenting", "teaching", "exploring", "own-data"):
        assert f"docs/guides/{guide}.md" in links


def test_offline_check_finds_outside_loads_and_allows_plain_links():
    check = _load("check_docs_offline")
    html = (
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">'
        '<script src="//cdn.example.org/x.js"></script><img src="assets/a.png">'
        '<a href="https://squidfunk.github.io/mkdocs-material/">Material</a><link href="assets/main.css">'
    )
    assert check.outside_loads(html) == ["https://fonts.googleapis.com/css?family=Roboto", "//cdn.example.org/x.js"]
    assert check.outside_loads("@import 'https://x.org/a.css'; a{background:url(data:image/png;base64,AA)}", True) == [
        "https://x.org/a.css"
    ]
