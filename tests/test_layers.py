"""Frameworks stay in their backends: outside ``nbinspect/backends/`` no module imports MLX,
vLLM or torch's DTensor, nor tests for them by name (import-linter holds the layer order;
this holds what import-linter cannot see: names and string checks)."""

from __future__ import annotations

import ast
from pathlib import Path

import nbinspect

PACKAGE = Path(nbinspect.__file__).parent
FRAMEWORKS = ("mlx", "vllm", "dtensor")
# The public names of the lazy API: `nbinspect.mlx` (the MLX summary, built on the
# framework-neutral Inspection) and the module vLLM loads into its workers by name; and
# schema/totals.py, which declares every total, those only one backend produces among them.
PUBLIC = {"__init__.py", "mlx.py", "ui/vllm_worker.py", "schema/totals.py"}


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return {id(n.body[0].value) for n in nodes if n.body and isinstance(n.body[0], ast.Expr)}  # type: ignore[attr-defined]


def _framework_names(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            names = [node.value]
        for name in names:
            low = name.lower()
            if any(f in low.replace(".", "_").split("_") or low.startswith(f) for f in FRAMEWORKS):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {name!r}")
    return found


def test_no_module_outside_the_backends_names_a_framework():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("backends/") or rel in PUBLIC:
            continue
        found += _framework_names(path)
    assert found == []


def test_the_check_sees_a_framework_name():
    """The scan itself can fail: it finds the names the backends use."""
    assert _framework_names(PACKAGE / "backends" / "mlx" / "source.py")
    assert _framework_names(PACKAGE / "backends" / "vllm" / "engine.py")
