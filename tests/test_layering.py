"""Invariant 7, calls go down, and the engine's parts owning their state.

- No import cycle in the package, counting imports under TYPE_CHECKING and inside functions
  (the package's face, `nbtune/__init__.py`, aside: it wires everything in from above).
- Only `nbtune/book.py` assigns the fields of a trial's `LiveTrial`: every other module goes
  through its named transitions.
- No class grows past 500 lines, and the runner stays the one documented orchestrator of
  about 600.
"""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

from test_architecture import PACKAGE, imported_names, module_name

from nbtune.book import LiveTrial

OWNER_OF_LIVE_FACTS = PACKAGE / "book.py"
LIVE_FIELDS = frozenset(field.name for field in fields(LiveTrial)) - {"trial_id"}
MAX_CLASS_LINES = 500
MAX_RUNNER_LINES = 600


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Which of the package's modules each module imports, at any depth of its code."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in imported_names(node, name, is_package):
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target not in (name, "nbtune"):
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or not (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for module in graph:
        if module not in index and module != "nbtune":
            visit(module)
    return found


def test_no_module_of_the_package_imports_itself_back():
    assert cycles(import_graph(package_modules())) == []


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import():
    graph = {"nbtune.a": {"nbtune.b"}, "nbtune.b": {"nbtune.c"}, "nbtune.c": {"nbtune.a"}}
    graph["nbtune.d"] = {"nbtune.a"}
    assert cycles(graph) == [["nbtune.a", "nbtune.b", "nbtune.c"]]
    source = "def later():\n    from nbtune.runner import TrialRunner\n"
    names = [n for node in ast.walk(ast.parse(source)) for n in imported_names(node, "x", False)]
    assert "nbtune.runner" in names


def live_fact_writes(source: str, filename: str) -> list[str]:
    """Each assignment in `source` to an attribute named like a `LiveTrial` field (on any
    object but `self`), or through `setattr`, as "filename:line: field"."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in _unpacked(target)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            if _is_live_field(target):
                found.append(f"{filename}:{node.lineno}: {target.attr}")
        if _is_setattr_of_live_field(node):
            found.append(f"{filename}:{node.lineno}: {node.args[1].value}")
    return found


def _unpacked(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [t for element in target.elts for t in _unpacked(element)]
    return [target]


def _is_live_field(target: ast.expr) -> bool:
    if not isinstance(target, ast.Attribute) or target.attr not in LIVE_FIELDS:
        return False
    return not (isinstance(target.value, ast.Name) and target.value.id == "self")


def _is_setattr_of_live_field(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    if node.func.id != "setattr" or len(node.args) < 2:
        return False
    name = node.args[1]
    return isinstance(name, ast.Constant) and name.value in LIVE_FIELDS


def test_only_the_book_assigns_a_live_trials_facts():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != OWNER_OF_LIVE_FACTS:
            found += live_fact_writes(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    assert found == [], "use a LiveTrial transition (nbtune/book.py) instead"


def test_the_check_finds_every_way_of_writing_a_live_fact():
    source = """\
live.on_worker = True
self.book.live[3].pending = None
live.making_room, other = False, 1
live.replay_until += 1
setattr(live, "told", None)
self.heard_at = 0.0
record.status = "x"
"""
    assert live_fact_writes(source, "nbtune/x.py") == [
        "nbtune/x.py:1: on_worker",
        "nbtune/x.py:2: pending",
        "nbtune/x.py:3: making_room",
        "nbtune/x.py:4: replay_until",
        "nbtune/x.py:5: told",
    ]


def class_sizes() -> dict[str, int]:
    sizes = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                name = f"{path.relative_to(PACKAGE.parent)}:{node.name}"
                sizes[name] = node.end_lineno - node.lineno + 1
    return sizes


def test_no_class_is_longer_than_500_lines():
    long = {name: size for name, size in class_sizes().items() if size > MAX_CLASS_LINES}
    assert long == {}, "split it by what each part owns"


def test_the_runner_stays_one_readable_orchestrator():
    lines = len((PACKAGE / "runner.py").read_text().splitlines())
    assert lines <= MAX_RUNNER_LINES, "move what a part owns out of the runner"
