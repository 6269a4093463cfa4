"""binder/ installs what the package and the example notebooks need, and nothing is missing;
the README's Binder badge opens this repository's notebooks."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import nbformat
import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).parents[1]
MODULE_TO_DISTRIBUTION = {"sklearn": "scikit-learn", "xgboost": "xgboost-cpu"}


def requirement_names(lines) -> set[str]:
    names = set()
    for line in lines:
        line = line.split("#")[0].strip()
        if line:
            names.add(re.split(r"[<>=!~\[ ;]", line, maxsplit=1)[0].lower())
    return names


def binder_names() -> set[str]:
    return requirement_names((ROOT / "binder" / "requirements.txt").read_text().splitlines())


def test_binder_installs_every_runtime_dependency_and_nbtune_itself():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    missing = requirement_names(project["dependencies"]) - binder_names()
    assert not missing, f"add to binder/requirements.txt: {sorted(missing)}"
    assert "pip install --no-deps ." in (ROOT / "binder" / "postBuild").read_text()


def imported_modules(notebook: Path) -> set[str]:
    modules = set()
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(
            line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module.split(".")[0])
    return modules


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=str)
def test_notebooks_import_only_what_binder_installs(notebook):
    installed = binder_names() | {"nbtune"}
    third_party = imported_modules(notebook) - set(sys.stdlib_module_names)
    needed = {MODULE_TO_DISTRIBUTION.get(module, module) for module in third_party}
    assert needed <= installed, f"{notebook.name} imports {sorted(needed - installed)}"


BADGE = re.compile(
    r"\[!\[Binder\]\(https://mybinder\.org/badge_logo\.svg\)\]"
    r"\(https://mybinder\.org/v2/gh/(?P<repository>[^/]+/[^/]+)/[^?]+"
    r"\?urlpath=lab/tree/(?P<path>[^)]+)\)"
)


def test_the_readmes_binder_badge_opens_the_notebooks_of_pyprojects_repository():
    badge = BADGE.search((ROOT / "README.md").read_text())
    assert badge, "README.md has no mybinder badge"
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert f"https://github.com/{badge['repository']}" == urls["Repository"]
    assert sorted((ROOT / badge["path"]).glob("*.ipynb")), f"{badge['path']} holds no notebook"
