"""No import circles between the modules of ``src/courtier``.

Every module is parsed with :mod:`ast` (nothing is imported): each ``import`` and
``from … import`` statement, at module level or inside a function, is an edge of the
module graph; imports under ``if TYPE_CHECKING:`` are not (they never run). An import
of ``courtier.a.b`` is an edge to that module, or to its package ``__init__`` when
``courtier.a.b`` is a package; ``from courtier.a import b`` is an edge to the module
``courtier.a.b`` when there is one, else to ``courtier.a``. A cycle is a strongly
connected set of modules; each one found is printed as a path that closes on itself.

Checked by breaking it: the test failed on the main branch before the cli ↔ ops and
cli_query ↔ cli_values circles were broken (``cli -> ops.commands -> cli`` and
``cli_query -> cli_values -> cli_query`` printed), and the synthetic-package test
below fails when the ``TYPE_CHECKING`` skip or the function-level walk is removed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

#: Known cycles, each one a set of modules, tolerated until it is removed; an entry
#: that is no longer a cycle fails the test, so the list cannot go stale. Empty: the
#: worker.py <-> worker_commit.py circle of issue #32 is a type-only one today
#: (worker_commit.py imports ``CrawlStatus`` from courtier.worker under
#: ``if TYPE_CHECKING``), so it is no edge of this graph. Should the worker's rewrite
#: need a runtime circle for a while, list it here as
#: ``frozenset({"courtier.worker", "courtier.worker_commit"})``, then delete it.
ALLOWED_CYCLES: list[frozenset[str]] = []


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``: dotted name -> file (a package is
    named by its ``__init__.py``)."""
    out: dict[str, Path] = {}
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree``, at any depth, except under ``if TYPE_CHECKING``
    (the ``else:`` branch of such an ``if`` runs, so it counts)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """The module ``name`` names, or the nearest enclosing one that exists."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(modules: Mapping[str, Path], package: str) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports (see the module docstring)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        is_package = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative: from the module's package
                    anchor = name.split(".")
                    anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules
                           else base for alias in node.names]
            for target in targets:
                if target == package or target.startswith(package + "."):
                    found = _resolve(target, modules)
                    if found is not None and found != name:
                        edges.add(found)
        graph[name] = edges
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One closed path through each strongly connected set of two or more modules."""
    return sorted(_closed_path(graph, c) for c in strong_components(graph))


def strong_components(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """The strongly connected sets of two or more modules (Tarjan's algorithm,
    iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(iter(children), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return components


def _closed_path(graph: Mapping[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, inside it."""
    start = min(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start \
                        else [start, start]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a strong component has one


def test_no_import_cycles_between_courtier_modules() -> None:
    modules = module_names(SRC, "courtier")
    assert "courtier.cli.main" in modules and "courtier.frontier" in modules  # it found them
    graph = import_graph(modules, "courtier")
    components = [frozenset(c) for c in strong_components(graph)]
    stale = [sorted(allowed) for allowed in ALLOWED_CYCLES if allowed not in components]
    assert stale == [], f"ALLOWED_CYCLES lists circles that are gone: {stale}"
    unexpected = sorted(_closed_path(graph, set(component)) for component in components
                        if component not in ALLOWED_CYCLES)
    for path in unexpected:
        print("import cycle: " + " -> ".join(path))
    assert unexpected == [], "import cycles: " + "; ".join(" -> ".join(p) for p in unexpected)


def test_the_graph_sees_function_level_imports_and_skips_type_checking_ones(
        tmp_path: Path) -> None:
    """The walker itself, on a small package: a function-level import closes a cycle,
    an import under ``if TYPE_CHECKING`` does not, ``from pkg.sub import mod`` is an edge
    to the module and an import of a package an edge to its ``__init__``."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from pkg.sub import c\n\ndef f():\n    from pkg import b\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.d\n"
                "else:\n    import os\nimport pkg.a\n",
        "d.py": "import pkg.b\n",
        "sub/__init__.py": "from . import c\n",
        "sub/c.py": "import pkg.sub\n",
    }
    for rel, text in files.items():
        (pkg / rel).write_text(text, encoding="utf-8")
    modules = module_names(tmp_path, "pkg")
    graph = import_graph(modules, "pkg")
    assert graph["pkg.a"] == {"pkg.sub.c", "pkg.b"}
    assert graph["pkg.b"] == {"pkg.a"}  # pkg.d only under TYPE_CHECKING
    assert graph["pkg.sub"] == {"pkg.sub.c"} and graph["pkg.sub.c"] == {"pkg.sub"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"], ["pkg.sub", "pkg.sub.c", "pkg.sub"]]


#: The layers a package may not import (module level or inside a function). The core
#: (URLs, records, clock, errors, configuration, logging) is at the bottom: it imports
#: nothing of courtier outside itself, save the exceptions below. Storage knows no
#: coordination and no crawl process; no stage imports the command line.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "courtier.core": ("courtier.",),  # anything outside courtier.core (checked below)
    "courtier.store": ("courtier.cluster", "courtier.crawl", "courtier.cli", "courtier.api",
                       "courtier.consumer"),
    "courtier.frontier": ("courtier.crawl", "courtier.cli", "courtier.api", "courtier.store",
                          "courtier.cluster", "courtier.consumer"),
    "courtier.politeness": ("courtier.crawl", "courtier.cli", "courtier.store",
                            "courtier.consumer"),
    "courtier.fetch": ("courtier.crawl", "courtier.cli", "courtier.store", "courtier.consumer"),
    "courtier.parse": ("courtier.crawl", "courtier.cli", "courtier.store", "courtier.consumer"),
    "courtier.archive": ("courtier.crawl", "courtier.cli", "courtier.consumer"),
    "courtier.events": ("courtier.cli", "courtier.consumer"),
    # the reference consumer reads the feed it is given, the archive and the parser; it
    # knows no crawl process, cluster or API, and the command line wires it
    "courtier.consumer": ("courtier.crawl", "courtier.cluster", "courtier.api",
                          "courtier.cli"),
}
#: (importer, imported) pairs allowed across a layer, each with its reason:
#: the configuration validates the trap and tier settings with the grammar their owner
#: (the frontier) defines, and a --ca-file with the fetch stage's PEM reader, each loaded
#: on use (docs/design.md, "Where the code lives").
LAYER_EXCEPTIONS = {
    ("courtier.core.config", "courtier.frontier.trap_rules"),
    ("courtier.core.config", "courtier.frontier.tiers"),
    ("courtier.core.config", "courtier.fetch.tls"),
}


def layer_violations(graph: Mapping[str, set[str]]) -> list[str]:
    found = []
    for importer, imported_all in sorted(graph.items()):
        for layer, banned in FORBIDDEN.items():
            if not (importer == layer or importer.startswith(layer + ".")):
                continue
            for imported in sorted(imported_all):
                if (importer, imported) in LAYER_EXCEPTIONS:
                    continue
                if layer == "courtier.core":
                    bad = imported != "courtier" and not (
                        imported == layer or imported.startswith(layer + "."))
                else:
                    bad = any(imported == b or imported.startswith(b + ".") for b in banned)
                if bad:
                    found.append(f"{importer} -> {imported}")
    return found


def test_each_layer_imports_nothing_above_it() -> None:
    """Checked by breaking it: an import of ``courtier.api.browser`` in core/config.py
    (as before the authority parser moved to core/authority.py) fails it."""
    modules = module_names(SRC, "courtier")
    assert "courtier.core.config" in modules and "courtier.store.base" in modules
    graph = import_graph(modules, "courtier")
    assert layer_violations(graph) == []
    stale = sorted(pair for pair in LAYER_EXCEPTIONS if pair[1] not in graph.get(pair[0], ()))
    assert stale == [], f"LAYER_EXCEPTIONS lists imports that are gone: {stale}"
