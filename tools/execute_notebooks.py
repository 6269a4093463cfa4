"""Run the example notebooks top to bottom and save them with their outputs.

    .venv/bin/python tools/execute_notebooks.py [notebooks/quickstart.ipynb ...]

Each runs in a fresh kernel from its own folder, as nbval runs it in the test suite. Widget
state is not stored: each plotly FigureWidget would add about 5 MB; the static summary that
`tuner.wait()` leaves shows the results wherever widgets cannot.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).parents[1] / "notebooks"
WITHOUT_OUTPUTS = {"live_dashboard.ipynb"}
"""Kept blank: the browser test runs it and must see only the outputs of its own run."""


def execute(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, kernel_name="python3", timeout=120, store_widget_state=False)
    client.execute(cwd=str(path.parent))
    for cell in notebook.cells:
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        stderr = [o for o in cell.get("outputs", []) if o.get("name") == "stderr"]
        if errors or stderr:
            raise SystemExit(f"{path.name}: a cell printed an error or a warning:\n{cell.source}")
    notebook.metadata.pop("widgets", None)
    nbformat.write(notebook, path)
    print(f"executed {path}")


if __name__ == "__main__":
    every = [path for path in sorted(NOTEBOOKS.glob("*.ipynb")) if path.name not in WITHOUT_OUTPUTS]
    for name in sys.argv[1:] or every:
        execute(Path(name))
