"""The layers hold: no import cycle between modules, and no import up the layers, counting the
imports inside functions (``docs/ARCHITECTURE.md``)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "src" / "agentboard"

#: lower numbers may not import higher ones; the services (3) may not import each other's
#: dispatcher: protocol/, agents/ and notify/ never import dispatch/
LAYERS = {"domain": 0, "store": 1, "config": 1, "gitsafe": 1, "gitsizes": 1, "agentcli": 1, "cgroups": 1, "kernel": 2, "observe": 3,
          "dispatch": 3, "protocol": 3, "agents": 3, "notify": 3, "chat": 3, "cli": 4, "api": 4, "mcp": 4}
NOT_DISPATCH = ("protocol", "agents", "notify")
#: known imports up the layers, each with why it is left (none should be added)
KNOWN_UPWARD: dict[tuple[str, str], str] = {}


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        if "migrations" in p.parts:
            continue
        name = ".".join(p.relative_to(PKG.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = p
    return out


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
            found.update(subs or [target])
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in mods and m != name and not name.startswith(m + ".")}


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, mods) for name, path in mods.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert len(graph) > 150
    assert cycles == []


def test_no_module_imports_up_the_layers() -> None:
    upward = []
    for module, deps in _graph().items():
        here = _layer(module)
        for dep in deps:
            there = _layer(dep)
            up = here in LAYERS and there in LAYERS and LAYERS[there] > LAYERS[here]
            if (up or (here in NOT_DISPATCH and there == "dispatch")) and (module, dep) not in KNOWN_UPWARD:
                upward.append((module, dep))
    assert sorted(upward) == []


def test_the_known_upward_imports_are_still_there_to_be_removed() -> None:
    graph = _graph()
    assert all(dep in graph[module] for module, dep in KNOWN_UPWARD)


#: how long a module may grow before it must say why it is kept whole
LONG_MODULE = 600


def test_a_module_over_600_lines_says_at_its_top_why_it_is_kept_whole() -> None:
    unexplained = []
    for name, path in _modules().items():
        text = path.read_text()
        if text.count("\n") <= LONG_MODULE:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if "on purpose" not in " ".join(doc.split("\n\n")[:2]):
            unexplained.append(name)
    assert sorted(unexplained) == [], "split these along their concerns, or say why at the top"
