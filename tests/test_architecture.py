"""Invariant 2, core knows no UI: no core module imports the front end, at any depth.

Only `nbtune/ui/`, the magic (`nbtune/magic.py`) and the package's face (`nbtune/__init__.py`,
which wires the front end in) may import `nbtune.ui`, ipywidgets, plotly, IPython or anywidget.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "nbtune"
FRONT_END_MODULES = ("nbtune.ui", "ipywidgets", "plotly", "IPython", "anywidget")
DYNAMIC_IMPORTS = {"import_module", "__import__"}


def core_modules() -> list[Path]:
    """Every module of the package but the front end, the magic and the face."""
    exempt = {PACKAGE / "magic.py", PACKAGE / "__init__.py"}
    return sorted(
        path
        for path in PACKAGE.rglob("*.py")
        if path not in exempt and (PACKAGE / "ui") not in path.parents
    )


def module_name(path: Path) -> str:
    """`nbtune/search/random.py` -> "nbtune.search.random"; a package's `__init__` -> its name."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The modules an import statement (or an `import_module("...")` call) brings in, with
    relative imports resolved against `module` and `from a import b` counted as `a.b` too."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = (node.module or "").split(".") if node.module else []
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            base = package[: len(package) - node.level + 1] + base
        origin = ".".join(base)
        return [origin, *(f"{origin}.{alias.name}" for alias in node.names)]
    if isinstance(node, ast.Call) and _called_name(node.func) in DYNAMIC_IMPORTS:
        first = node.args[0] if node.args else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return [first.value]
    return []


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def front_end_imports(
    source: str, filename: str, module: str, is_package: bool = False
) -> list[str]:
    """Each import of a front-end module in `source` (module `module`), by line, as
    "filename:line: module"."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        banned = next(filter(is_front_end, imported_names(node, module, is_package)), None)
        if banned is not None:
            found.append((node.lineno, f"{filename}:{node.lineno}: {banned}"))
    return [line for _, line in sorted(found)]


def is_front_end(name: str) -> bool:
    return any(name == banned or name.startswith(f"{banned}.") for banned in FRONT_END_MODULES)


def test_no_core_module_imports_the_front_end():
    found = []
    for path in core_modules():
        filename = str(path.relative_to(PACKAGE.parent))
        is_package = path.name == "__init__.py"
        found += front_end_imports(path.read_text(), filename, module_name(path), is_package)
    assert found == [], "the core imports the front end; wire it in from nbtune/__init__.py"


def test_the_walk_covers_the_core_and_only_the_core():
    names = {module_name(path) for path in core_modules()}
    assert {"nbtune.tuner", "nbtune.results", "nbtune.search", "nbtune.search._base"} <= names
    assert not {"nbtune", "nbtune.magic", "nbtune.ui", "nbtune.ui.dashboard"} & names


SNEAKY = """\
import ipywidgets
import plotly.graph_objects as go
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nbtune.ui.dashboard import Dashboard

def start(self):
    from IPython.display import display
    import anywidget, json

class Tuner:
    def dashboard(self):
        from nbtune import ui
        from ..ui import summary
        from .. import ui as front
        return importlib.import_module("nbtune.ui.dashboard")
"""

INNOCENT = """\
import sys
import plotlyish
from nbtune import results
from nbtune.uix import thing
from . import results as again
shell = sys.modules.get("IPython")
importlib.import_module(name)
"""


def test_the_checker_finds_an_import_at_any_depth_and_names_its_line():
    found = front_end_imports(SNEAKY, "nbtune/search/sneaky.py", "nbtune.search.sneaky")
    assert found == [
        "nbtune/search/sneaky.py:1: ipywidgets",
        "nbtune/search/sneaky.py:2: plotly.graph_objects",
        "nbtune/search/sneaky.py:6: nbtune.ui.dashboard",
        "nbtune/search/sneaky.py:9: IPython.display",
        "nbtune/search/sneaky.py:10: anywidget",
        "nbtune/search/sneaky.py:14: nbtune.ui",
        "nbtune/search/sneaky.py:15: nbtune.ui",
        "nbtune/search/sneaky.py:16: nbtune.ui",
        "nbtune/search/sneaky.py:17: nbtune.ui.dashboard",
    ]


def test_the_checker_lets_other_imports_and_a_look_at_sys_modules_pass():
    assert front_end_imports(INNOCENT, "nbtune/x.py", "nbtune.x") == []


@pytest.mark.parametrize(
    ("filename", "is_package", "found"),
    [("nbtune/x.py", False, ["nbtune/x.py:1: nbtune.ui"]), ("nbtune/x/__init__.py", True, [])],
)
def test_a_relative_import_is_resolved_from_the_module_or_the_package(filename, is_package, found):
    assert front_end_imports("from .ui import table", filename, "nbtune.x", is_package) == found
