"""nbtune on every OS (issue 33 part 4), tested without Windows: `import nbtune`, a run on
threads and on loky, `load` and `restore` in a Python where the POSIX-only modules (`fcntl`,
`termios`, `pwd`, `grp`, `resource`) cannot be imported and the POSIX-only parts of `os` and
`signal` that nbtune used unguarded are gone; and a rule that no module of the package imports
a module of one OS at its top level unguarded."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_architecture import PACKAGE, module_name

POSIX_ONLY = frozenset(
    {"fcntl", "termios", "tty", "pty", "pwd", "grp", "resource", "posix", "syslog", "crypt"}
    | {"spwd", "nis", "curses", "readline", "_posixsubprocess", "_posixshmem"}
)
WINDOWS_ONLY = frozenset({"msvcrt", "winreg", "winsound", "_winapi", "_overlapped", "nt"})
ONE_OS = POSIX_ONLY | WINDOWS_ONLY

BLOCKED = ("fcntl", "termios", "pwd", "grp", "resource")
"""What the stand-in for Windows cannot import: the POSIX-only modules that the libraries
nbtune uses pick only on POSIX themselves (loky imports `_posixshmem` on POSIX, as it must)."""

WITHOUT_POSIX = textwrap.dedent(f"""
    import importlib.abc, os, signal, sys

    BLOCKED = {BLOCKED!r}

    class NoPosix(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"No module named {{name!r}} (not on Windows)")

    sys.meta_path.insert(0, NoPosix())
    for name in BLOCKED:
        sys.modules.pop(name, None)
    # what nbtune used from os and signal that Windows lacks
    for name in ("O_NOFOLLOW", "O_CLOEXEC", "pread", "pwrite", "geteuid", "setsid", "killpg"):
        if hasattr(os, name):
            delattr(os, name)
    for name in ("SIGKILL", "SIGSTOP"):
        if hasattr(signal, name):
            delattr(signal, name)
""")


def run_without_posix(code: str, tmp_path: Path) -> dict:
    """Run `code` in a fresh Python without the POSIX-only modules; return what it printed
    as JSON on its last line."""
    script = WITHOUT_POSIX + textwrap.dedent(code)
    process = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout.strip().splitlines()[-1])


def test_the_blocker_blocks(tmp_path):
    """The stand-in for Windows is one: the modules cannot be imported there."""
    found = run_without_posix(
        """
        import json, importlib
        refused = []
        for name in ("fcntl", "termios", "pwd", "grp", "resource"):
            try:
                importlib.import_module(name)
            except ImportError:
                refused.append(name)
        print(json.dumps({"refused": refused, "pread": hasattr(os, "pread")}))
        """,
        tmp_path,
    )
    assert found == {"refused": ["fcntl", "termios", "pwd", "grp", "resource"], "pread": False}


def test_import_a_thread_run_load_and_restore_need_no_posix_module(tmp_path):
    found = run_without_posix(
        f"""
        import json, warnings
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import nbtune as nt
            import trainables

            space = {{"steps": 4, "checkpoint": True, "x": nt.grid([0, 1])}}
            tuner = nt.Tuner(trainables.steps, space, metric="loss", name="portable",
                             storage_path="runs", executor=nt.ThreadExecutor(), progress=False)
            tuner.run(display=False)
            loaded = nt.load("runs/portable")
            again = nt.Tuner.restore("runs/portable", trainables.steps, num_samples=2,
                                     executor=nt.ThreadExecutor(), progress=False)
            again.run(display=False)
        print(json.dumps({{
            "imported": sorted(m for m in {sorted(POSIX_ONLY)!r} if m in sys.modules),
            "state": tuner.state,
            "loaded": len(loaded.history()),
            "restored": again.state,
            "trials": again.dataframe()["status"].tolist(),
            "warnings": [str(w.message) for w in caught],
        }}))
        """,
        tmp_path,
    )
    assert found["state"] == "finished" and found["loaded"] == 2 * 4
    assert found["restored"] == "finished" and found["trials"] == ["TERMINATED"] * 4
    assert not set(BLOCKED) & set(found["imported"])
    lock_warnings = [w for w in found["warnings"] if "neither fcntl nor msvcrt" in w]
    assert len(lock_warnings) == 1, "said once, on one line: the system has no lock"
    assert "\n" not in lock_warnings[0]


def test_a_loky_run_needs_no_posix_module_in_the_driver(tmp_path):
    """The driver side of a loky run: its workers are fresh interpreters of this Linux."""
    found = run_without_posix(
        f"""
        import json, warnings
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        warnings.simplefilter("ignore")
        import nbtune as nt
        import trainables

        tuner = nt.Tuner(trainables.count_up, {{"x": nt.grid([0, 1])}}, metric="loss",
                         name="loky", storage_path="runs", max_concurrent=2, progress=False)
        tuner.run(display=False)
        print(json.dumps({{"state": tuner.state, "results": len(nt.load("runs/loky").history()),
                          "fcntl": "fcntl" in sys.modules}}))
        """,
        tmp_path,
    )
    assert found == {"state": "finished", "results": 2 * 5, "fcntl": False}


def imports_of_one_os(source: str) -> list[tuple[int, str]]:
    """The imports of a module of one OS (`ONE_OS`) that run when the module is imported and
    that nothing guards: not in a function, not in a `try` that catches ImportError, not under
    an `if` on the platform (`sys.platform`, `os.name`)."""
    found: list[tuple[int, str]] = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.Try) and _catches_import_error(node):
                visit(node.orelse)
                visit(node.finalbody)
                continue
            if isinstance(node, ast.If) and _tests_platform(node.test):
                continue
            for name in _imported(node):
                if name.split(".")[0] in ONE_OS:
                    found.append((node.lineno, name))
            for field in ("body", "orelse", "finalbody", "handlers"):
                visit(getattr(node, field, []))

    visit(ast.parse(source).body)
    return found


def _imported(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level:
        return [node.module or ""]
    return []


def _catches_import_error(node: ast.Try) -> bool:
    caught = set()
    for handler in node.handlers:
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        caught |= {ast.unparse(kind) for kind in kinds if kind is not None}
    return bool(caught & {"ImportError", "ModuleNotFoundError", "Exception"})


def _tests_platform(test: ast.expr) -> bool:
    text = ast.unparse(test)
    return any(word in text for word in ("sys.platform", "os.name", "platform.system"))


def test_the_rule_sees_an_unguarded_import_and_lets_a_guarded_one_pass():
    assert imports_of_one_os("import fcntl\n") == [(1, "fcntl")]
    assert imports_of_one_os("class A:\n    import termios\n") == [(2, "termios")]
    assert imports_of_one_os("from pwd import getpwuid\n") == [(1, "pwd")]
    assert imports_of_one_os("if True:\n    import msvcrt\n") == [(2, "msvcrt")]
    guarded = """
        try:
            import fcntl
        except ImportError:
            fcntl = None
        if sys.platform == "win32":
            import msvcrt
        def lock():
            import fcntl
    """
    assert imports_of_one_os(textwrap.dedent(guarded)) == []


@pytest.mark.parametrize(
    "path",
    sorted(PACKAGE.rglob("*.py")),
    ids=lambda path: module_name(path).removeprefix("nbtune."),
)
def test_no_module_imports_a_module_of_one_os_at_its_top_level_unguarded(path):
    found = imports_of_one_os(path.read_text())
    assert not found, (
        f"{module_name(path)} imports {', '.join(f'{name} (line {line})' for line, name in found)} "
        "when it is imported: that fails on the other OS; import it where it is used, or "
        "guard it (try/except ImportError)"
    )
