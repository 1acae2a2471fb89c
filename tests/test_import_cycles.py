"""No import cycles inside monitor/: every module imports only from below it.

grimp (installed with import-linter) reads every import statement in
monitor/, at the top of a module, inside a function, or under
``TYPE_CHECKING``, and the test looks for strongly connected groups of
modules in that graph.  A piece two modules share goes in a module both
import (as ``monitor.hub.state`` for the hub's per-session record), and an
object handed upwards is typed by a ``Protocol`` in the lower module (as
``monitor.hub.actions.ActionsHub``).
"""

from __future__ import annotations

import grimp


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of two or more modules that import each other (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_the_cycle_finder_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(edges) == [["a", "b", "c"]]


def test_no_module_in_monitor_imports_itself_back():
    graph = grimp.build_graph("monitor", cache_dir=None)
    edges = {
        module: {m for m in graph.find_modules_directly_imported_by(module) if m.startswith("monitor")}
        for module in graph.modules
        if module.startswith("monitor")
    }
    found = []
    for group in _cycles(edges):
        lines = [
            f"  {importer} -> {imported} (line {', '.join(str(d['line_number']) for d in details)})"
            for importer in group
            for imported in sorted(edges[importer] & set(group))
            if (details := graph.get_import_details(importer=importer, imported=imported))
        ]
        found.append(" <-> ".join(group) + "\n" + "\n".join(lines))
    assert not found, "import cycles in monitor/:\n" + "\n".join(found)


#: The circles issue 29 named, each broken by putting the shared piece below
#: both: the UI's history screen searches through monitor.store.search (not
#: monitor.commands.history); Actions sees the hub through ActionsHub;
#: HubSession lives in monitor.hub.state; scan_jobs and socket_conn share
#: nothing upwards.  Packages count as a whole (monitor.ui, monitor.commands).
NAMED_CIRCLES = [
    ("monitor.ui", "monitor.commands"),
    ("monitor.hub.core", "monitor.hub.actions"),
    ("monitor.hub.sessions", "monitor.hub.snapshots"),
    ("monitor.scan", "monitor.scan_jobs"),
    ("monitor.sources.sockets", "monitor.sources.socket_conn"),
]


def test_the_circles_issue_29_named_stay_broken():
    graph = grimp.build_graph("monitor", cache_dir=None)
    both_ways = [
        f"{a} <-> {b}"
        for a, b in NAMED_CIRCLES
        if graph.chain_exists(importer=a, imported=b, as_packages=True)
        and graph.chain_exists(importer=b, imported=a, as_packages=True)
    ]
    assert not both_ways, "these import each other again (directly or through others):\n  " + "\n  ".join(
        both_ways
    )


def test_no_module_imports_another_modules_private_names():
    """A ``_name`` is its module's own: what another module needs is public (as
    :mod:`monitor.detect.analysis.shell`'s ``segments`` and ``program``)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    found = []
    for path in sorted((root / "monitor").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("monitor"):
                found += [
                    f"{path.relative_to(root)}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert not found, found
