"""The verifier's layers import one way, its modules import each other without a circle
(function-level imports included), and only the standard library (ray only in the cluster probes,
the in-job shard fan-out and the watchdog's evidence; torch only in a collective probe rank).

The layers, lowest first: formats/ < run/ < checks/ < report/ < the top (cli/, the command line).
A module imports its own layer and the layers below it, never one above.
"""
import ast
import sys
from pathlib import Path
from typing import Dict, List, Optional, Set

PACKAGE = Path(__file__).resolve().parents[3] / "tools" / "verl" / "two-worker-grpo" / "twgrpo"
LAYERS = ("formats", "run", "checks", "report")
TOP = len(LAYERS)  # cli/ and the package itself
TOP_PACKAGE = "cli"  # the command line: parser, dispatch and each phase's glue


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """'run.findings' for run/findings.py, 'checks' for checks/__init__.py, 'cli' for cli/__init__.py."""
    parts = list(path.relative_to(package).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or "__init__"


def modules(package: Path = PACKAGE) -> Dict[str, Path]:
    return {module_name(path, package): path for path in sorted(package.rglob("*.py"))}


def layer(module: str) -> int:
    if module == "__init__":  # the package itself holds only its docstring (asserted below)
        return -1
    first = module.split(".")[0]
    return LAYERS.index(first) if first in LAYERS else TOP


def resolve(current: str, is_package: bool, node: ast.ImportFrom, known: Set[str]) -> Set[str]:
    """The twgrpo modules one `from ... import ...` statement reaches."""
    if node.level == 0:
        parts = (node.module or "").split(".")
        if parts[0] != "twgrpo":
            return set()
        base = parts[1:]
    else:
        here = current.split(".") if current != "__init__" else []
        package_parts = here if is_package else here[:-1]
        if node.level - 1 > len(package_parts):
            raise AssertionError(f"{current}: import goes above the package")
        base = package_parts[:len(package_parts) - (node.level - 1)]
        base = base + (node.module.split(".") if node.module else [])
    found = set()
    target = ".".join(base)
    for alias in node.names:  # `from pkg import mod` names a module; otherwise the target itself
        sub = f"{target}.{alias.name}" if target else alias.name
        found.add(sub if sub in known else (target or "__init__"))
    return found


def imports_of(path: Path, known: Set[str], package: Path = PACKAGE) -> Set[str]:
    """Every twgrpo module `path` imports, wherever the import statement stands."""
    current = module_name(path, package)
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            found |= resolve(current, path.name == "__init__.py", node, known)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "twgrpo":
                    found.add(".".join(parts[1:]) or "__init__")
    return found - {current}


def import_graph(package: Path = PACKAGE) -> Dict[str, Set[str]]:
    known = modules(package)
    return {name: imports_of(path, set(known), package) for name, path in known.items()}


def upward_imports(graph: Dict[str, Set[str]]) -> List[str]:
    """'lower -> higher' for every import that goes up the layers (a package's own
    __init__ counts as its layer)."""
    return sorted(f"{name} -> {dep}" for name, deps in graph.items() for dep in deps
                  if layer(dep) > layer(name))


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


def plant(root: Path, files: Dict[str, str]) -> Path:
    package = root / "twgrpo"
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    return package


def test_the_cycle_finder_finds_a_circle_through_a_function_level_import(tmp_path):
    package = plant(tmp_path, {"__init__.py": "", "run/__init__.py": "",
                               "run/a.py": "from . import b\n",
                               "run/b.py": "def f():\n    from .c import x\n    return x\n",
                               "run/c.py": "import twgrpo.run.a\n"})
    graph = import_graph(package)
    assert graph["run.a"] == {"run.b"} and graph["run.b"] == {"run.c"} and graph["run.c"] == {"run.a"}
    assert find_cycle(graph) == ["run.a", "run.b", "run.c", "run.a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_a_planted_upward_import_is_found(tmp_path):
    package = plant(tmp_path, {"__init__.py": "", "formats/__init__.py": "",
                               "run/__init__.py": "", "checks/__init__.py": "",
                               "report/__init__.py": "", "report/page.py": "",
                               "checks/postflight.py": "from ..run import findings\n",
                               "run/findings.py": "from ..formats import lines\n",
                               "formats/lines.py": "def f():\n    from ..report.page import x\n",
                               "cli.py": "from .report import page\n"})
    graph = import_graph(package)
    assert upward_imports(graph) == ["formats.lines -> report.page"]


def test_the_verifier_has_four_layers_and_no_upward_import():
    graph = import_graph()
    assert {"cli", "cli.dispatch", "cli.launcher", "checks.preflight.preflight",
            "checks.postflight.postflight", "run.runfolder", "run.findings", "formats.trainlog",
            "report.page"} <= set(graph)
    assert {name.split(".")[0] for name in graph if "." in name} == set(LAYERS) | {TOP_PACKAGE}
    assert {name for name in graph if "." not in name} == set(LAYERS) | {TOP_PACKAGE, "__init__"}
    assert upward_imports(graph) == []
    assert graph["__init__"] == set()  # so importing the package itself is importing nothing


def test_the_verifier_has_no_import_circle():
    graph = import_graph()
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_every_layer_says_what_it_may_import():
    for name in LAYERS:
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text()))
        assert doc and "May import:" in doc, name


def test_the_verifier_imports_only_the_standard_library_and_ray_in_the_probe():
    stdlib = set(sys.stdlib_module_names)
    outside = {}
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for imported in names:
                top = imported.split(".")[0]
                if top not in stdlib and top != "twgrpo":
                    outside.setdefault(top, set()).add(name)
    # ray in what runs on the cluster; torch only in the collective probe's rank, on its node
    assert outside == {"ray": {"checks.preflight.preflight", "checks.nodeside.probe",
                               "checks.checkpoint.fanout", "checks.rounds.reach",
                               "checks.rounds.cluster", "checks.nodeside.collective_rank",
                               "checks.watch.stall_nodes", "checks.rounds.job_shape",
                               "checks.rounds.node_agents", "checks.nodeside.limits_probe"},
                       "torch": {"checks.nodeside.collective_rank"}}
