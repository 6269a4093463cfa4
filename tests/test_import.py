import subprocess
import sys


def test_importing_nbtune_leaves_the_ui_libraries_alone():
    code = (
        "import sys, nbtune\n"
        "heavy = [m for m in ('ipywidgets', 'plotly', 'IPython', 'optuna', 'distributed') "
        "if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
