"""Real-browser fixtures: JupyterLab driven by headless Debian Chromium through Playwright.

    lab_server     session   JupyterLab on 127.0.0.1 (free port, random token), temp root folder;
                             it also serves Notebook 7 (the `notebook` package) at /notebooks/<path>
    lab_server_without_anywidget
                   session   a second server on the same root, with anywidget's lab extension
                             disabled (`jupyter labextension disable`, in its own config dir)
    browser        session   Playwright Chromium = Debian's `chromium` (never `playwright install`)
    lab_dir        function  a fresh folder inside the lab root for this test's notebooks and files
    open_notebook  function  open_notebook(path, app=, server=) -> LabNotebook: a page showing
                             that notebook in JupyterLab (app="lab") or Notebook 7 ("notebook")
    artifacts_dir  session   where screenshots, browser consoles and the server log go

Every test in this folder gets the `browser` marker (`pytest -m "not browser"` leaves them out).
Without a `chromium` on PATH they are skipped, not failed. Artefacts go to a fresh folder under
/tmp/nbtune-artifacts, or to $NBTUNE_ARTIFACTS; the path is printed at the end of the run.
NBTUNE_HEADED=1 shows the browser (needs a display).

The recipe and its timings are in the shared notes (jupyter-field-notes.md, section 4).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

SERVER_START_TIMEOUT = 60.0  # measured: 2.2-2.6 s
SERVER_STOP_TIMEOUT = 15.0
KERNEL_IDLE_TIMEOUT = 60.0  # measured: 4.5-5.2 s from page load to an idle kernel
RUN_ALL_TIMEOUT = 120.0
ACTION_TIMEOUT_MS = 30_000  # Playwright's default for clicks, locators and expect()

CHROMIUM_ARGS = [
    "--no-sandbox",  # root in a container; Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",  # no traffic to anything but 127.0.0.1
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# Throw-away user settings: no autosave (the notebook on disk is never touched), no news or
# update checks, and a notebook without kernelspec metadata starts the default kernel (python3)
# instead of asking in a "Select Kernel" dialog.
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"autoStartDefaultKernel": True},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}

DEFAULT_ARTIFACTS = Path("/tmp/nbtune-artifacts")
KEEP_RUNS = 10

WIDGET_PLACEHOLDERS = re.compile(r"Loading widget|Error displaying widget")

ARTIFACTS = pytest.StashKey[Path]()
REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


# ----------------------------------------------------------------------------- pytest hooks


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report so fixtures can tell, at teardown, that the test failed."""
    outcome = yield
    report = outcome.get_result()
    item.stash.setdefault(REPORTS, {})[report.when] = report


def pytest_terminal_summary(terminalreporter, config):
    if ARTIFACTS in config.stash:
        terminalreporter.write_line(f"browser test artefacts: {config.stash[ARTIFACTS]}")


# ----------------------------------------------------------------------------- server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class LabServer:
    """A running JupyterLab server; `root_dir` is what the lab shows as its file browser root."""

    root_dir: Path
    base_url: str
    token: str
    log_path: Path
    process: subprocess.Popen = field(repr=False)

    def url(self, path: str = "") -> str:
        """Absolute URL of `path` (relative to the server root) with the token attached."""
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}/{path.lstrip('/')}{sep}token={self.token}"

    def api(self, method: str, path: str, timeout: float = 10.0) -> Any:
        """Call the REST API (`path` like "api/sessions"); return the decoded JSON, if any."""
        request = urllib.request.Request(
            self.url(path), method=method, data=b"" if method != "GET" else None
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def is_up(self) -> bool:
        try:
            return self.api("GET", "api/status", timeout=2) is not None
        except (OSError, ValueError):
            return False

    def shutdown_kernels(self) -> None:
        """End every session and kernel, so the next test starts from a quiet server."""
        for session in self.api("GET", "api/sessions"):
            self.api("DELETE", f"api/sessions/{session['id']}")
        for kernel in self.api("GET", "api/kernels"):
            self.api("DELETE", f"api/kernels/{kernel['id']}")

    def log_tail(self, lines: int = 30) -> str:
        return _tail(self.log_path, lines)


def _disable_lab_extensions(names: Sequence[str], env: Mapping[str, str], log_path: Path) -> None:
    """`jupyter labextension disable --level=user NAME` for each name, in `env`'s config dir.

    `--level=user` writes `$JUPYTER_CONFIG_DIR/labconfig/page_config.json`, the server's own
    private config dir; the default level, sys_prefix, would write into the shared environment.
    """
    for name in names:
        command = [sys.executable, "-m", "jupyterlab.labextensions", "disable", "--level=user"]
        command.append(name)
        with open(log_path, "a") as log:
            log.write(f"$ {' '.join(command)}\n")
            log.flush()
            done = subprocess.run(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=60, check=False
            )
        if done.returncode != 0:
            pytest.fail(f"could not disable the lab extension {name!r}; log {log_path}")


def _start_lab(
    root: Path, home: Path, log_path: Path, disabled_extensions: Sequence[str] = ()
) -> LabServer:
    settings = home / "settings"
    for rel, content in LAB_SETTINGS.items():
        path = settings / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))
    # Private Jupyter/IPython config and data dirs: nothing from ~/.jupyter or ~/.ipython leaks
    # in; kernelspecs and lab extensions still come from the environment (sys.prefix) first.
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        IPYTHONDIR=str(home / "ipython"),
        PYTHONUNBUFFERED="1",
    )
    _disable_lab_extensions(disabled_extensions, env, log_path)
    token = secrets.token_hex(16)
    for _attempt in range(3):  # another process may grab the free port before the server does
        port = _free_port()
        cmd = [
            sys.executable,  # jupyter_client runs the `python3` kernelspec with this interpreter
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.port_retries=0",  # fail rather than silently moving to another port
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.terminals_enabled=False",
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp, used by LabNotebook
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={home / 'workspaces'}",
            "--LabApp.news_url=None",
            "--LabApp.extension_manager=readonly",  # the default one queries PyPI
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            # The same for Notebook 7's pages (/notebooks/<path>), served by the same server.
            "--JupyterNotebookApp.expose_app_in_browser=True",
            f"--JupyterNotebookApp.user_settings_dir={settings}",
            f"--JupyterNotebookApp.workspaces_dir={home / 'workspaces'}",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        with open(log_path, "a") as log:
            log.write(f"$ {' '.join(cmd)}\n")
            log.flush()
            process = subprocess.Popen(
                cmd,
                cwd=root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so teardown can end it whole
            )
        server = LabServer(root, f"http://127.0.0.1:{port}", token, log_path, process)
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while process.poll() is None and time.monotonic() < deadline:
            if server.is_up():
                return server
            time.sleep(0.2)
        if process.poll() is None:
            _stop_lab(server)
            pytest.fail(
                f"JupyterLab not up within {SERVER_START_TIMEOUT:.0f} s; log {log_path}:\n"
                + server.log_tail()
            )
        if "already in use" not in server.log_tail():
            break
    pytest.fail(
        f"JupyterLab exited with code {process.returncode}; log {log_path}:\n" + server.log_tail()
    )


def _stop_lab(server: LabServer) -> None:
    """Polite shutdown (which also ends the kernels), then SIGTERM, then SIGKILL."""
    process = server.process
    if process.poll() is None:
        try:
            server.api("POST", "api/shutdown", timeout=5)
            process.wait(timeout=SERVER_STOP_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired):
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if process.poll() is not None:
            break
        try:
            os.killpg(process.pid, sig)
            process.wait(timeout=SERVER_STOP_TIMEOUT)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def artifacts_dir(pytestconfig) -> Path:
    """Folder for screenshots, browser console logs and the server log (kept after the run).

    $NBTUNE_ARTIFACTS if set, else a new run-<time>-<pid> folder in /tmp/nbtune-artifacts (only
    the newest KEEP_RUNS are kept). Not pytest's tmp_path: that keeps only the last 3 pytest runs
    of anyone on the machine, so a failure's screenshot could vanish before anyone looks at it.
    """
    chosen = os.environ.get("NBTUNE_ARTIFACTS")
    if chosen:
        path = Path(chosen)
    else:
        runs = DEFAULT_ARTIFACTS
        runs.mkdir(parents=True, exist_ok=True)
        for old in sorted(runs.glob("run-*"))[: -(KEEP_RUNS - 1)]:
            shutil.rmtree(old, ignore_errors=True)
        path = runs / time.strftime(f"run-%Y%m%d-%H%M%S-{os.getpid()}")
    path.mkdir(parents=True, exist_ok=True)
    pytestconfig.stash[ARTIFACTS] = path
    return path


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Debian's Chromium; skips every browser test when it is not installed."""
    path = shutil.which("chromium")
    if path is None:
        pytest.skip(
            "chromium not found on PATH: `apt-get install chromium` (what `make test` does) "
            "to run the browser tests; never `playwright install`"
        )
    return path


@pytest.fixture(autouse=True)
def _skip_without_chromium(chromium_path) -> None:
    """Check for Chromium before anything else, so a skip starts no server."""


@pytest.fixture(scope="session")
def browser(chromium_path) -> Iterator[Browser]:
    """A headless Chromium (Debian's binary) driven by Playwright, shared by the session."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    playwright = sync_api.sync_playwright().start()
    try:
        browser = playwright.chromium.launch(
            executable_path=chromium_path,
            args=CHROMIUM_ARGS,
            headless=os.environ.get("NBTUNE_HEADED") != "1",
        )
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory, artifacts_dir) -> Iterator[LabServer]:
    """A JupyterLab server for the session, rooted at an empty temporary folder.

    Tests write their notebooks under `lab_server.root_dir` (see `lab_dir`). Its log is kept at
    `lab_server.log_path` (in the artefact folder).
    """
    pytest.importorskip("jupyterlab", reason="pip install jupyterlab")
    root = tmp_path_factory.mktemp("lab-root")
    home = tmp_path_factory.mktemp("lab-home")
    server = _start_lab(root, home, artifacts_dir / "jupyterlab.log")
    try:
        yield server
    finally:
        _stop_lab(server)


@pytest.fixture(scope="session")
def lab_server_without_anywidget(
    lab_server, tmp_path_factory, artifacts_dir
) -> Iterator[LabServer]:
    """A JupyterLab server whose front end has no anywidget: its lab extension is disabled.

    It stands for a front end that cannot draw anywidgets. It shares `lab_server`'s root folder,
    so `lab_dir` serves both; its settings, config and kernels are its own.
    """
    home = tmp_path_factory.mktemp("lab-home-without-anywidget")
    log_path = artifacts_dir / "jupyterlab-without-anywidget.log"
    server = _start_lab(lab_server.root_dir, home, log_path, disabled_extensions=["anywidget"])
    try:
        yield server
    finally:
        _stop_lab(server)


@pytest.fixture
def lab_dir(lab_server, request) -> Path:
    """A fresh folder inside the lab root, named after the test."""
    name = re.sub(r"[^\w.-]+", "_", request.node.name)[:80]
    path = lab_server.root_dir / name
    suffix = 1
    while path.exists():
        suffix += 1
        path = lab_server.root_dir / f"{name}-{suffix}"
    path.mkdir()
    return path


# JavaScript run in the page. `panel(path)` finds the notebook panel showing `path` in Lab's
# main area (the server is started with expose_app_in_browser, so window.jupyterapp exists).
_PANEL = """
const panel = (path) => {
  const app = window.jupyterapp;
  if (!app) return null;
  for (const w of app.shell.widgets('main')) {
    if (w.context && w.context.path === path && w.sessionContext && w.content) return w;
  }
  return null;
};
"""

_KERNEL_STATUS = (
    "({path, states}) => {"
    + _PANEL
    + """
  const w = panel(path);
  const kernel = w && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!(kernel && kernel.connectionStatus === 'connected' &&
            (!states || states.includes(w.sessionContext.kernelDisplayStatus)));
}"""
)

# No `return` of the command's promise: it resolves only once every cell has finished, and the
# test must stay free to act while cells run. The outcome is parked in window.__nbtuneRunAll.
_RUN_ALL = (
    "(path) => {"
    + _PANEL
    + """
  const app = window.jupyterapp, w = panel(path);
  if (!w) throw new Error('no notebook panel for ' + path);
  app.shell.activateById(w.id);  // notebook:run-all-cells acts on the current notebook
  const runs = (window.__nbtuneRunAll = window.__nbtuneRunAll || {});
  runs[path] = {done: false};
  app.commands.execute('notebook:run-all-cells').then(
    (ok) => { runs[path] = {done: true, ok: ok !== false}; },
    (err) => { runs[path] = {done: true, ok: false, error: String(err)}; });
}"""
)

_RUN_ALL_DONE = "(path) => !!(window.__nbtuneRunAll && (window.__nbtuneRunAll[path] || {}).done)"

_CELLS = (
    "(path) => {"
    + _PANEL
    + """
  const w = panel(path), cells = w.content.model.cells, out = [];
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type !== 'code') continue;
    const outputs = cell.outputs.toJSON();
    out.push({
      index: i,
      execution_count: cell.executionCount,
      errors: outputs.filter((o) => o.output_type === 'error')
                     .map((o) => o.ename + ': ' + o.evalue),
    });
  }
  return {cells: out, run: (window.__nbtuneRunAll || {})[path] || null};
}"""
)

# What a clean cell never shows: an error, text on stderr, or a traceback in any output.
_OUTPUT_PROBLEMS = (
    "(path) => {"
    + _PANEL
    + """
  const cells = panel(path).content.model.cells, problems = [];
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type !== 'code') continue;
    for (const o of cell.outputs.toJSON()) {
      const text = o.output_type === 'stream' ? [].concat(o.text).join('')
                                              : JSON.stringify(o.data || {});
      if (o.output_type === 'error') problems.push(`cell ${i}: ${o.ename}: ${o.evalue}`);
      else if (o.name === 'stderr') problems.push(`cell ${i}: stderr: ${text.slice(0, 500)}`);
      else if (text.includes('Traceback')) problems.push(`cell ${i}: ${text.slice(0, 500)}`);
    }
  }
  return problems;
}"""
)

_CHANGE_THEME = """(theme) => {
  window.jupyterapp.commands.execute('apputils:change-theme', {theme});
}"""

_DIAGNOSE = (
    "(path) => {"
    + _PANEL
    + """
  const w = panel(path), sc = w && w.sessionContext;
  const kernel = sc && sc.session && sc.session.kernel;
  const dialog = document.querySelector('.jp-Dialog');
  return {
    app: !!window.jupyterapp,
    panel: !!w,
    kernel: kernel ? kernel.name + ' (' + kernel.connectionStatus + ')' : null,
    status: sc ? sc.kernelDisplayStatus : null,
    dialog: dialog ? dialog.innerText : null,
    run: (window.__nbtuneRunAll || {})[path] || null,
  };
}"""
)


class LabNotebook:
    """A browser page showing one notebook in JupyterLab, with the waits a test needs.

    Attributes:
        page: the Playwright page, for anything the helpers do not cover.
        path: the notebook's path relative to the lab root (forward slashes).
        console: the browser console so far ("type: text" lines, page errors included).
    """

    def __init__(self, page: Page, path: str, server: LabServer, artifacts: Path, prefix: str):
        self.page = page
        self.path = path
        self.console: list[str] = []
        self.server = server
        self._artifacts = artifacts
        self._prefix = prefix
        self.theme_changed = False
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))

    def _wait(self, script: str, what: str, timeout: float, arg: Any = None) -> None:
        """Poll `script(arg or path)` in the page until truthy; on timeout fail with what Lab
        shows."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        arg = self.path if arg is None else arg
        try:
            self.page.wait_for_function(script, arg=arg, timeout=timeout * 1000, polling=100)
        except PlaywrightTimeout:
            try:
                state = self.page.evaluate(_DIAGNOSE, self.path)
            except Exception as exc:
                state = f"(page not readable: {exc})"
            raise AssertionError(
                f"{what} not within {timeout:.0f} s for {self.path}\n"
                f"lab state: {state}\nbrowser console (last 10): {self.console[-10:]}\n"
                f"server log {self.server.log_path} (tail):\n{self.server.log_tail(15)}"
            ) from None

    def wait_for_idle_kernel(self, timeout: float = KERNEL_IDLE_TIMEOUT) -> None:
        """Wait until the notebook's kernel is connected and idle."""
        self.wait_for_kernel(("idle",), timeout)

    def wait_for_kernel(
        self, states: Sequence[str] | None = None, timeout: float = KERNEL_IDLE_TIMEOUT
    ) -> None:
        """Wait until the notebook's kernel is connected and, if `states` are given, in one of
        them (as the notebook's toolbar shows it: "idle", "busy", "unknown", ...)."""
        arg = {"path": self.path, "states": None if states is None else list(states)}
        what = "a connected kernel" + (f" ({' or '.join(states)})" if states else "")
        self._wait(_KERNEL_STATUS, what, timeout, arg)

    def reload(self) -> None:
        """Reload the page, as a user pressing F5 does, and wait until the notebook is back and
        connected to its kernel again. A kernel busy with a cell shows as "unknown" then,
        until the cell ends: the new connection has not seen its status yet."""
        self.page.reload()
        self.wait_for_kernel()

    def save(self) -> None:
        """Save the notebook with its outputs, and wait until it is saved: without autosave
        (the fixture turns it off) a reloaded or reopened page shows the file without them."""
        self.page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        self.page.wait_for_function(
            "() => !window.jupyterapp.shell.currentWidget.context.model.dirty"
        )

    def output_problems(self) -> list[str]:
        """Every error, stderr text and traceback in the notebook's cell outputs, one line each
        ("cell <index>: ..."); empty for a clean notebook."""
        return self.page.evaluate(_OUTPUT_PROBLEMS, self.path)

    def change_theme(self, theme: str) -> None:
        """Switch the front end's theme ("JupyterLab Dark", "JupyterLab Light") and wait until
        the page shows it. The choice is saved in the server's user settings: the fixture
        switches back to the light theme when the test ends."""
        self.theme_changed = True
        self.page.evaluate(_CHANGE_THEME, theme)
        self.page.wait_for_function(  # Lab's splash covers the page while the theme loads
            "(theme) => document.body.dataset.jpThemeName === theme &&"
            " !document.getElementById('jupyterlab-splash')",
            arg=theme,
        )

    def run_all(self) -> None:
        """Start "Run All Cells" and return at once, while the cells run."""
        self.page.evaluate(_RUN_ALL, self.path)

    def wait_until_all_ran(self, timeout: float = RUN_ALL_TIMEOUT, check: bool = True) -> list:
        """Wait until the run started by `run_all` has finished; return one dict per code cell.

        Each dict holds `index`, `execution_count` and `errors` ("EName: value" strings). With
        `check`, fail the test when a cell raised or did not run.
        """
        self._wait(_RUN_ALL_DONE, "the end of Run All", timeout)
        state = self.page.evaluate(_CELLS, self.path)
        cells = state["cells"]
        if check:
            problems = [
                f"cell {c['index']}: {'; '.join(c['errors']) or 'not executed'}"
                for c in cells
                if c["errors"] or not isinstance(c["execution_count"], int)
            ]
            if problems or not state["run"]["ok"]:
                raise AssertionError(
                    f"Run All in {self.path} failed: {state['run']}\n  " + "\n  ".join(problems)
                )
        return cells

    def run_all_and_wait(self, timeout: float = RUN_ALL_TIMEOUT) -> list:
        """`wait_for_idle_kernel`, `run_all` and `wait_until_all_ran` in one call."""
        self.wait_for_idle_kernel()
        self.run_all()
        return self.wait_until_all_ran(timeout)

    def output(self, selector: str) -> Locator:
        """Locator for `selector` inside the notebook's output areas."""
        return self.page.locator(f".jp-OutputArea {selector}")

    def widget_placeholders(self) -> int:
        """How many "Loading widget..." or "Error displaying widget" placeholders are shown."""
        return self.page.get_by_text(WIDGET_PLACEHOLDERS).count()

    def console_errors(self) -> list[str]:
        return [line for line in self.console if line.startswith(("error", "pageerror"))]

    def screenshot(self, name: str = "screenshot", scroll_to: Locator | None = None) -> Path:
        """Save a PNG of the viewport into the artefact folder and return its path.

        The notebook scrolls inside its own panel (a full-page shot shows only the viewport),
        so pass `scroll_to` to bring an element into view first.
        """
        if scroll_to is not None:  # by script: a live element is seldom "stable" for Playwright
            scroll_to.evaluate("el => el.scrollIntoView({block: 'nearest'})")
        path = self._artifacts / f"{self._prefix}-{name}.png"
        self.page.screenshot(path=str(path))
        return path

    def save_console(self) -> Path:
        path = self._artifacts / f"{self._prefix}-console.txt"
        path.write_text("\n".join(self.console) + "\n")
        return path


APPS = {"lab": "JupyterLab", "notebook": "Notebook 7"}


@pytest.fixture
def open_notebook(
    browser, lab_server, artifacts_dir, request
) -> Iterator[Callable[..., LabNotebook]]:
    """Factory: `open_notebook(path, app="lab", server=lab_server)` opens a notebook (its path
    absolute or relative to the lab root) in JupyterLab (`app="lab"`) or in Notebook 7
    (`app="notebook"`, the page /notebooks/<path> of the same server).

    Each notebook gets its own browser context (and in JupyterLab its own workspace), so nothing
    carries over between tests. Returns a `LabNotebook`; call `wait_for_idle_kernel()` before
    running cells. At teardown, a failed test leaves a screenshot and the browser console in
    `artifacts_dir`; a changed theme is switched back to the light one (it is saved in the
    server's settings); pages are closed and all kernels shut down.
    """
    prefix = re.sub(r"[^\w.-]+", "_", request.node.name)[:80]
    opened: list[tuple[Any, LabNotebook]] = []

    def open_(path: str | Path, app: str = "lab", server: LabServer | None = None) -> LabNotebook:
        if app not in APPS:
            raise ValueError(f"app={app!r}: use one of {', '.join(APPS)}")
        server = server or lab_server
        path = Path(path)
        if path.is_absolute():
            path = path.resolve().relative_to(server.root_dir.resolve())
        rel = path.as_posix()
        context = browser.new_context(viewport={"width": 1280, "height": 1000})
        context.set_default_timeout(ACTION_TIMEOUT_MS)
        page = context.new_page()
        notebook = LabNotebook(page, rel, server, artifacts_dir, f"{prefix}-{len(opened)}")
        opened.append((context, notebook))
        if app == "lab":
            workspace = f"{prefix}-{len(opened)}-{secrets.token_hex(4)}"
            page.goto(server.url(f"lab/workspaces/{workspace}/tree/{urllib.parse.quote(rel)}"))
        else:
            page.goto(server.url(f"notebooks/{urllib.parse.quote(rel)}"))
        return notebook

    yield open_

    reports = request.node.stash.get(REPORTS, {})
    failed = any(report.failed for report in reports.values())
    try:
        for context, notebook in opened:
            if failed:
                try:
                    notebook.screenshot("failure")
                except Exception as exc:  # the page may be what broke
                    notebook.console.append(f"(no failure screenshot: {exc})")
                notebook.save_console()
            if notebook.theme_changed:
                with contextlib.suppress(Exception):  # the page may be what broke
                    notebook.change_theme("JupyterLab Light")
            context.close()
    finally:
        for server in {id(nb.server): nb.server for _, nb in opened}.values() or [lab_server]:
            with contextlib.suppress(OSError, ValueError):  # URLError is an OSError
                server.shutdown_kernels()


@pytest.fixture
def code_notebook(lab_dir) -> Callable[[str, Sequence[str]], Path]:
    """Factory: `code_notebook(name, cells)` writes a notebook of those code cells into
    `lab_dir`, asking for the `python3` kernel (no kernel dialog); returns its path."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    kernelspec = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}

    def write(name: str, cells: Sequence[str]) -> Path:
        path = lab_dir / name
        notebook = new_notebook(
            cells=[new_code_cell(source) for source in cells], metadata={"kernelspec": kernelspec}
        )
        nbformat.write(notebook, path)
        return path

    return write
