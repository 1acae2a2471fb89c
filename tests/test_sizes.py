"""No function in monitor/ is over 60 lines and no class over 350.

A function's lines run from its ``def`` to its last line (a nested function
counts towards the one around it; decorators do not count); a class's from
``class`` to its last line.  ``EXCEPTIONS`` lists what is still over its
limit (nothing now); an entry that is short enough must leave the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_FUNCTION_LINES = 60
MAX_CLASS_LINES = 350

#: path::qualified name of each function or class still over its limit.
EXCEPTIONS: frozenset[str] = frozenset()


def _sizes(tree: ast.Module):
    """(qualified name, kind, lines) of every function and class in ``tree``."""

    def walk(node: ast.AST, prefix: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                yield name, kind, (child.end_lineno or child.lineno) - child.lineno + 1
                yield from walk(child, name + ".")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def _too_long() -> dict[str, str]:
    found = {}
    for path in sorted((ROOT / "monitor").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for name, kind, lines in _sizes(ast.parse(path.read_text(encoding="utf-8"))):
            limit = MAX_CLASS_LINES if kind == "class" else MAX_FUNCTION_LINES
            if lines > limit:
                found[f"{relative}::{name}"] = f"{kind} of {lines} lines (at most {limit})"
    return found


def test_decorators_do_not_count_and_nested_functions_do():
    source = "@property\n@staticmethod\ndef f():\n    def g():\n        return 1\n    return g\n"
    assert list(_sizes(ast.parse(source))) == [("f", "function", 4), ("f.g", "function", 2)]


def test_no_function_or_class_in_monitor_is_too_long():
    found = _too_long()
    new = {name: why for name, why in found.items() if name not in EXCEPTIONS}
    assert not new, "split these:\n" + "\n".join(f"  {name}: {why}" for name, why in sorted(new.items()))


def test_every_listed_exception_is_still_too_long():
    stale = sorted(EXCEPTIONS - set(_too_long()))
    assert not stale, "short enough now, remove from EXCEPTIONS:\n  " + "\n  ".join(stale)
