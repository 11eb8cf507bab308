"""The house rules of ARCHITECTURE.md, checked on the source: one direction of imports, no circles, a core that
stays small enough to read, the UI free of retrieval logic and of hand-kept copies of the settings."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("retrieval", "inspector")
MAX_MODULE_LINES = 500
MAX_BLOCK_LINES = 120


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Project modules imported anywhere in the file (top level or inside functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found.update(n for n in names if n in known)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(path, set(mods)) - {name} for name, path in mods.items()}


def is_core(name: str) -> bool:
    return name.startswith("retrieval") and not name.startswith("retrieval.evaluation") and name != "retrieval.__main__"


def test_the_core_never_imports_the_evaluation_tools_or_the_ui():
    bad = {
        m: sorted(d for d in deps if d.startswith(("retrieval.evaluation", "inspector")))
        for m, deps in graph().items()
        if is_core(m)
    }
    assert not {m: d for m, d in bad.items() if d}


def test_no_import_circles():
    g = graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(g.get(node, ())):
            if dep not in g:
                continue
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep) :] + [dep] if dep in path else [node, dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for node in sorted(g):
        if node not in state:
            visit(node, [node])
    # A package's __init__ importing its own submodules is not a circle through code paths we care about.
    cycles = [c for c in cycles if not all(m == c[0] or m.startswith(c[0] + ".") for m in c)]
    assert not cycles


def test_every_room_reads_in_one_sitting():
    """No module of the core or the page over MAX_MODULE_LINES lines, no definition (a function, a method, a class
    with its methods) over MAX_BLOCK_LINES: a room that grows past them is split by what it does."""
    too_long = []
    for name, path in modules().items():
        source = path.read_text(encoding="utf-8")
        if source.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{name}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_BLOCK_LINES:
                    too_long.append(f"{name}.{node.name}: {lines} lines")
    assert not too_long, "split by what it does: " + "; ".join(too_long)


def test_the_ui_has_no_model_or_store_code():
    heavy = {"chromadb", "onnxruntime", "torch", "sentence_transformers", "rank_bm25", "tokenizers"}
    for name, path in modules().items():
        if name.startswith("inspector"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            used = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            used |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
            assert not used & heavy, f"{name} imports {sorted(used & heavy)}"


def test_the_ui_does_not_restate_settings_types():
    """The controls' kinds, ranges and choices come from Settings' field metadata, never from hand-kept sets."""
    for module in ("handlers.py", "controls.py"):
        source = (ROOT / "inspector" / module).read_text(encoding="utf-8")
        for leftover in ("_INT_CONTROLS", "_BOOL_CONTROLS", "_FLOAT_CONTROLS", '"snowball", "plain"'):
            assert leftover not in source
    ui = (ROOT / "inspector" / "ui.py").read_text(encoding="utf-8")
    assert "importlib" not in ui
