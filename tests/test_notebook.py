"""A trainable defined in a real Jupyter kernel's __main__ reaches the worker processes."""

from __future__ import annotations

import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook


def execute(cells, tmp_path):
    notebook = new_notebook(cells=[new_code_cell(source) for source in cells])
    NotebookClient(notebook, kernel_name="python3", timeout=120).execute(cwd=str(tmp_path))
    return notebook


def stdout_of(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_a_notebook_tunes_a_function_defined_in_a_cell(tmp_path):
    notebook = execute(
        [
            "import time\nimport nbtune as nt",
            "OFFSET = 0.5\n"
            "def train(config):\n"
            "    print('inside a trial')\n"
            "    for step in range(1, 6):\n"
            "        time.sleep(0.2)\n"
            "        nt.report(loss=OFFSET + config['x'] / step)",
            "tuner = nt.Tuner(train, {'x': nt.grid([1.0, 2.0, 3.0])}, metric='loss', "
            "max_concurrent=2, name='nb', seed=0)\n"
            "tuner.start()\n"
            "print(tuner.state)",
            "assert tuner.wait(60)\n"
            "frame = tuner.dataframe()\n"
            "print(frame['status'].tolist())\n"
            "print(frame['loss'].round(3).tolist(), len(tuner.history()))\n"
            "print(nt.load('nbtune-runs/nb').best_config)",
        ],
        tmp_path,
    )
    assert stdout_of(notebook.cells[2]) == "running\n", "start() returns while trials run"
    assert stdout_of(notebook.cells[3]).splitlines() == [
        "['TERMINATED', 'TERMINATED', 'TERMINATED']",
        "[0.7, 0.9, 1.1] 15",
        "{'x': 1.0}",
    ]
    assert all("inside a trial" not in stdout_of(cell) for cell in notebook.cells)
    dashboard, summary = (o.data for o in notebook.cells[2].outputs if o.output_type != "stream")
    assert "application/vnd.jupyter.widget-view+json" in dashboard
    assert "nbtune · nb</b> — finished" in summary["text/html"], "saved under the dashboard"
    assert (tmp_path / "nbtune-runs" / "nb" / "trials" / "0" / "output.log").exists()
    assert nbformat.validate(notebook) is None
