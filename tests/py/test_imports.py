"""The verifier's modules import each other without a circle, function-level imports included,
and only the standard library (ray only inside the cluster probe's preflight)."""
import ast
import sys
from pathlib import Path
from typing import Dict, List, Optional, Set

PACKAGE = Path(__file__).resolve().parents[2] / "tools" / "verl" / "two-worker-grpo" / "twgrpo"


def module_names() -> Set[str]:
    return {path.stem for path in PACKAGE.glob("*.py")}


def imports_of(path: Path, modules: Set[str]) -> Set[str]:
    """Every twgrpo module `path` imports, wherever the import statement stands."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and node.module.split(".")[0] == "twgrpo":
                parts = node.module.split(".")[1:]
            elif node.level == 1:
                parts = node.module.split(".") if node.module else []
            else:
                continue
            if parts:
                found.add(parts[0])
            else:  # from . import a, b: each name is a module (or the package's own attribute)
                found |= {alias.name for alias in node.names if alias.name in modules} or {"__init__"}
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "twgrpo":
                    found.add(parts[1] if len(parts) > 1 else "__init__")
    return found - {path.stem}


def import_graph() -> Dict[str, Set[str]]:
    modules = module_names()
    return {path.stem: imports_of(path, modules) for path in sorted(PACKAGE.glob("*.py"))}


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One circle of imports as [a, b, ..., a], or None."""
    state: Dict[str, int] = {}  # 1 on the current path, 2 done
    path: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_finds_a_circle_through_a_function_level_import(tmp_path):
    (tmp_path / "a.py").write_text("from . import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from .c import x\n    return x\n")
    (tmp_path / "c.py").write_text("import twgrpo.a\n")
    modules = {"a", "b", "c"}
    graph = {p.stem: imports_of(p, modules) for p in tmp_path.glob("*.py")}
    assert graph == {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_verifier_has_no_import_circle():
    graph = import_graph()
    assert {"cli", "preflight", "postflight", "runpaths", "findings"} <= set(graph)
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_phase_modules_do_not_import_the_command_line():
    graph = import_graph()
    assert [name for name, deps in graph.items() if "cli" in deps] == []


def test_the_verifier_imports_only_the_standard_library_and_ray_in_the_probe():
    stdlib = set(sys.stdlib_module_names)
    outside = {}
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for name in names:
                top = name.split(".")[0]
                if top not in stdlib and top != "twgrpo":
                    outside.setdefault(top, set()).add(path.stem)
    assert outside == {"ray": {"preflight", "probe"}}
