"""What a saved notebook shows without a kernel: `nbconvert --to html` (as GitHub and nbviewer
render it) has the run's static summary with its learning curves, and no widget's text."""

from __future__ import annotations

from nbclient import NotebookClient
from nbconvert import HTMLExporter
from nbformat.v4 import new_code_cell, new_notebook

RUN = """
import nbtune as nt

def train(config):
    for step in range(1, 6):
        nt.report(loss=config["x"] / step)

tuner = nt.Tuner(train, {"x": nt.grid([1.0, 2.0])}, metric="loss", name="export",
                 executor=nt.ThreadExecutor())
tuner.start()
"""


def test_an_exported_notebook_shows_the_summary_and_its_curves_not_a_widget(tmp_path):
    notebook = new_notebook(cells=[new_code_cell(RUN), new_code_cell("tuner.wait(60)")])
    NotebookClient(notebook, kernel_name="python3", timeout=120).execute(cwd=str(tmp_path))
    page, _ = HTMLExporter().from_notebook_node(notebook)
    assert "nbtune-summary" in page and "— finished" in page, "the summary under the dashboard"
    summary = page[page.index("nbtune-summary") : page.index("</table></div>")]
    assert summary.count("<polyline") >= 2, "the learning curves as a picture"
    assert "<script" not in summary, "drawn without script"
    assert "VBox(" not in page, "no widget's text"
    texts = [
        output["data"].get("text/plain", "")
        for output in notebook.cells[0].outputs
        if output.get("output_type") == "display_data"
    ]
    assert texts[0] == "nbtune dashboard of 'export' (a live widget)"
