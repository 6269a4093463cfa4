"""What the live dashboard costs a real browser over a long run (JupyterLab in Debian's Chromium).

Prints one JSON line per figure:

    python benchmarks/dashboard_browser.py [--trials 64 --reports 100] [--quick]

A notebook runs `trials` trials of `reports` reports each, 4 at a time, its last cell
`tuner.wait()` busy all along, the dashboard on its first tab (the learning curves). Every
`--every` seconds the page is measured through the Chrome DevTools Protocol after a forced
garbage collection (`HeapProfiler.collectGarbage`, then `Performance.getMetrics`):

1. `heap_mb`: JavaScript heap in use, over the run (`series`); target: its last value within
   1.5x of the most it reached in the run's first minute.
2. `dom_nodes`: DOM nodes alive (attached or not), over the run; `attached` counts the elements
   in the document. Target: < 25,000 at any time.
3. `busy_pct`: the share of wall time the page's main thread was busy (`TaskDuration`), over
   each interval; information.
4. `click_ms`: from a row's Pause (then Resume) click to the table showing the trial pausing
   (then not paused): each sample (`series`); target: all < 500 ms.
5. `parcoords_first_draw_ms`: from a click on the "parallel coordinates" tab, a quarter into
   the run, to the first frame that shows its lines as the browser last heard of them (not a
   drawing from before), both timed in the page (`value`; target
   < 300 ms); `driver_ms` is the same from here, the mouse's click sent and the chart found
   through Playwright (tens of ms more, more on a busy page).
6. `hover_highlight_ms`: at every sample, from the mouse entering the line of a running trial
   whose curve is drawn to that curve painted bold on the learning curves; target < 100 ms.
7. `busy_profile` (`--profile`): what the page's main thread spent its time on over
   `--profile-s` seconds three quarters into the run (the DevTools CPU profiler): the
   functions with the most time on the stack (`inclusive_ms`) and the most time of their own
   (`self_ms`), and the share of each script (`by_script_ms`). Information.

`--large` runs 200 trials of 300 reports, a report every 15 ms (a four-minute run).

Every line has `other_cpu_pct`: CPU used by processes other than this benchmark and its
descendants (JupyterLab, the kernel, its workers, Chromium), in % of one core. The machine
this runs on may be shared: a figure with tens of % there was disturbed.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"autoStartDefaultKernel": True},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
CHROMIUM_ARGS += ["--disable-background-networking", "--disable-component-update"]
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

RUN_CELLS = (
    "import time\nimport nbtune as nt",
    "def train(config):\n"
    "    for step in range(1, {reports} + 1):\n"
    "        time.sleep({sleep})\n"
    "        nt.report(loss=config['lr'] * 10 + 1 / step, acc=1 / (1 + step * config['lr']))",
    "tuner = nt.Tuner(\n"
    "    train,\n"
    "    space={{'lr': nt.loguniform(1e-4, 1e-1), 'units': nt.randint(8, 64),\n"
    "           'optimizer': nt.choice(['sgd', 'adam', 'rmsprop'])}},\n"
    "    metric='loss', num_samples={trials}, max_concurrent=4, seed=0,\n"
    "    name='browser-bench', overwrite=True,\n"
    ")\n"
    "tuner.start()",
    "tuner.wait()",
)

PANEL = """
const panel = () => {
  const app = window.jupyterapp;
  if (!app) return null;
  for (const w of app.shell.widgets('main')) if (w.sessionContext && w.content) return w;
  return null;
};
"""
KERNEL_IDLE = (
    "() => {"
    + PANEL
    + """
  const w = panel(), context = w && w.sessionContext;
  const k = context && context.session && context.session.kernel;
  return !!(k && k.connectionStatus === 'connected' && context.kernelDisplayStatus === 'idle');
}"""
)
RUN_ALL = "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }"
FINISHED = """() => { const t = document.querySelector('.nbtune-dashboard .widget-html-content');
  return !!t && /— (finished|stopped|done)/.test(t.textContent); }"""
TRACE_CATEGORIES = [
    "devtools.timeline",
    "disabled-by-default-devtools.timeline",
    "toplevel",
    "v8",
    "blink.user_timing",
]
DURATIONS = ("Task", "Script", "Layout", "RecalcStyle")
"""The page's main-thread times that `Performance.getMetrics` sums (the rest of a task's time
is paint, compositing, garbage collection and the browser's own work)."""
ATTACHED = "() => document.getElementsByTagName('*').length"
TABLE_LINE = ".nbtune-table tr[data-trial], .nbtune-static-table tbody tr"
VISIBLE_CHART = (
    "document.querySelector('.nbtune-dashboard .widget-tab-contents > :not(.lm-mod-hidden)"
    " .js-plotly-plot')"
)
DRAWN_RUNNING = f"""() => {{ const el = {VISIBLE_CHART};
  const drawn = new Set((el && el.data || []).filter(t => (t.x || []).length > 1)
    .map(t => t.name));
  const line = [...document.querySelectorAll('.nbtune-table tr[data-trial]')].find(tr =>
    (tr.querySelector('.nbtune-badge') || {{}}).textContent === 'running'
    && drawn.has(`trial ${{tr.dataset.trial}}`));
  return line ? line.dataset.trial : null; }}"""

# Watch the line of trial `trial`: `window.nbtuneHover` resolves to the ms from the mouse
# entering it to the first animation frame in which its curve is drawn bold ("timeout": not
# within 10 s of the watch; "moved": the mouse entered another line first, or the lines moved
# and it left this one before).
WATCH_HOVER = f"""(trial) => {{
  const tr = document.querySelector(`.nbtune-table tr[data-trial="${{trial}}"]`);
  const bold = () => {{ const el = {VISIBLE_CHART}; return !!el && [...el.querySelectorAll(
    '.scatterlayer .trace')].some(g => g.__data__ && g.__data__[0].trace.name === `trial ${{trial}}`
    && g.querySelector('path.js-line')
    && parseFloat(getComputedStyle(g.querySelector('path.js-line')).strokeWidth) >= 3.5); }};
  window.nbtuneHover = new Promise((resolve) => {{
    setTimeout(() => resolve('timeout'), 10000);
    tr.addEventListener('mouseleave', () => resolve('moved'), {{once: true}});
    document.addEventListener('mouseover', (event) => {{
      if (!tr.contains(event.target)) return resolve('moved');
      const frame = () => bold() ? resolve(Math.round(performance.now() - event.timeStamp))
        : requestAnimationFrame(frame);
      requestAnimationFrame(frame);
    }}, {{once: true, capture: true}});
  }});
}}"""

WATCH_TAB = """tab => {
  delete window.__nbtuneClicked;
  delete window.__nbtuneShown;
  const clicked = (event) => { window.__nbtuneClicked = event.timeStamp; };
  document.addEventListener('pointerdown', clicked, {capture: true, once: true});
  const index = [...tab.parentElement.children].indexOf(tab);
  const panels = tab.closest('.lm-TabBar').parentElement.querySelector('.widget-tab-contents');
  const panel = panels.children[index];
  const check = () => {
    const el = panel.querySelector('.js-plotly-plot');
    const shown = el && el.offsetParent !== null && !panel.classList.contains('lm-mod-hidden');
    const drawn = shown && el._fullLayout && el.data && el.querySelector('.main-svg')
      && el.dataset.stale !== 'true';
    if (window.__nbtuneClicked !== undefined && drawn && el.data.length) {
      window.__nbtuneShown = performance.now();
    } else {
      requestAnimationFrame(check);
    }
  };
  requestAnimationFrame(check);
}"""
"""Times in the page a click on `tab` (its pointerdown) and the first animation frame after it
in which the chart in the tab's panel shows drawn, and not older than its figure (a chart drawn
ahead in its hidden tab is redrawn as it shows if its figure changed meanwhile)."""


class OtherCpu:
    """CPU of the processes that are neither this one nor its descendants, since made."""

    def __init__(self) -> None:
        self._began = time.perf_counter()
        self._machine = _machine_cpu_s()
        self._own = _tree_cpu_s()

    def percent(self) -> float:
        wall = time.perf_counter() - self._began
        other = (_machine_cpu_s() - self._machine) - (_tree_cpu_s() - self._own)
        return round(max(0.0, 100 * other / wall), 1)


def _machine_cpu_s() -> float:
    with open("/proc/stat", encoding="ascii") as stat:
        user, nice, system = (int(field) for field in stat.readline().split()[1:4])
    return (user + nice + system) / _CLOCK_TICKS


def _tree_cpu_s() -> float:
    """CPU seconds of this process and its living descendants (their dead children included)."""
    parents, cpu = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = sum(int(value) for value in fields[11:15]) / _CLOCK_TICKS
    mine, total = {os.getpid()}, 0.0
    for pid in sorted(parents):  # a child's pid is mostly larger than its parent's
        if pid in mine or parents[pid] in mine:
            mine.add(pid)
            total += cpu[pid]
    return total


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def lab(root: Path, anywidget: bool = True) -> Iterator[str]:
    """A JupyterLab server on `root`, without anywidget's lab extension unless `anywidget`;
    yields the URL of a notebook's page, its path left as `{path}`."""
    home = root / ".home"
    for rel, content in LAB_SETTINGS.items():
        path = home / "settings" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        IPYTHONDIR=str(home / "ipython"),
        PYTHONPATH=os.environ.get("PYTHONPATH") or str(Path(__file__).parents[1]),
    )
    if not anywidget:  # in the server's own config dir (--level=user), as a user would
        disable = [sys.executable, "-m", "jupyterlab.labextensions", "disable", "--level=user"]
        subprocess.run([*disable, "anywidget"], env=env, capture_output=True, check=True)
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1"]
    command += [
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
    ]
    command += ["--LabApp.expose_app_in_browser=True", "--allow-root", "--LabApp.news_url=None"]
    command += [
        f"--LabApp.user_settings_dir={home / 'settings'}",
        "--LabApp.extension_manager=readonly",
    ]
    command += [f"--LabApp.workspaces_dir={home / 'workspaces'}"]
    command += ["--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    log = open(home / "server.log", "w")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2).close()
                break
            time.sleep(0.2)
        yield f"{base}/lab/workspaces/bench/tree/{{path}}?token={token}"
    finally:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            request = urllib.request.Request(
                f"{base}/api/shutdown?token={token}", method="POST", data=b""
            )
            urllib.request.urlopen(request, timeout=5).close()
            server.wait(timeout=15)
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


class Page:
    """The notebook's page and a DevTools session on it."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.cdp = page.context.new_cdp_session(page)
        self.cdp.send("Performance.enable")
        self.cdp.send("HeapProfiler.enable")
        self._spent = self._durations(self._metrics())
        self._at = time.perf_counter()

    @staticmethod
    def _durations(metrics: dict[str, float]) -> dict[str, float]:
        return {name: metrics[f"{name}Duration"] for name in DURATIONS}

    def _metrics(self) -> dict[str, float]:
        return {m["name"]: m["value"] for m in self.cdp.send("Performance.getMetrics")["metrics"]}

    def sample(self, began: float) -> dict[str, float]:
        """Heap, nodes (after a forced GC) and how busy the page was since the last sample."""
        self.cdp.send("HeapProfiler.collectGarbage")
        metrics = self._metrics()
        now = time.perf_counter()
        spent = self._durations(metrics)
        shares = {
            name: round(100 * (spent[name] - self._spent[name]) / (now - self._at), 1)
            for name in DURATIONS
        }
        self._spent, self._at = spent, now
        return {
            "s": round(now - began, 1),
            "heap_mb": round(metrics["JSHeapUsedSize"] / 2**20, 1),
            "nodes": int(metrics["Nodes"]),
            "attached": self.page.evaluate(ATTACHED),
            "busy_pct": shares.pop("Task"),
            **{f"{name.lower()}_pct": share for name, share in shares.items()},
        }

    def profile(self, seconds: float) -> dict[str, Any]:
        """Where the main thread's time went over the next `seconds` (DevTools' CPU profiler)."""
        self.cdp.send("Profiler.enable")
        self.cdp.send("Profiler.setSamplingInterval", {"interval": 500})
        self.cdp.send("Profiler.start")
        self.page.wait_for_timeout(seconds * 1000)
        return profile_summary(self.cdp.send("Profiler.stop")["profile"])

    def trace(self, seconds: float) -> dict[str, Any]:
        """What the page's main thread did over the next `seconds`, by trace event (a Chromium
        trace of DevTools' timeline categories)."""
        browser = self.page.context.browser
        browser.start_tracing(page=self.page, categories=TRACE_CATEGORIES)
        self.page.wait_for_timeout(seconds * 1000)
        return trace_summary(json.loads(browser.stop_tracing()))

    def click_ms(self) -> list[float]:
        """Pause a running trial from its row, then resume it: each click to its effect (the
        trial no longer shown running, then neither pausing nor paused)."""
        page = self.page
        row = page.locator(".nbtune-table tr[data-trial]").filter(
            has=page.locator(".nbtune-badge", has_text="running")
        )
        if not row.count():
            return []
        from playwright.sync_api import Error as PlaywrightError

        try:
            trial = row.first.get_attribute("data-trial", timeout=2000)
        except PlaywrightError:  # the trial ended meanwhile, its line left the page
            return []
        found = []
        held = "['paused', 'pausing'].includes(b.textContent)"
        for action, shows in (("pause", "b.textContent !== 'running'"), ("resume", f"!{held}")):
            button = page.locator(f'tr[data-trial="{trial}"] button[data-action="{action}"]')
            try:
                button.evaluate("el => el.scrollIntoView({block: 'nearest'})", timeout=2000)
                box = button.bounding_box(timeout=2000)
            except PlaywrightError:  # the trial ended meanwhile, its line left the page
                box = None
            if box is None:
                resume_all = page.get_by_role("button", name="Resume all")
                if found and resume_all.is_visible():  # a trial left paused never ends
                    resume_all.click(timeout=10_000)
                return found
            started = time.perf_counter()
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.wait_for_function(
                f"""() => {{ const b = document.querySelector(
                    'tr[data-trial="{trial}"] .nbtune-badge');
                    return !b || {shows}; }}""",
                polling="raf",
                timeout=20_000,
            )
            found.append(round((time.perf_counter() - started) * 1e3))
        return found

    def open_tab(self, name: str) -> tuple[float | None, float | None]:
        """Click a tab of the dashboard; ms from the click to the first frame that shows its
        chart drawn, timed in the page, then from here (None, None: not within 60 s)."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        tab = self.page.locator(".nbtune-dashboard .lm-TabBar-tab", has_text=name).first
        box = tab.bounding_box()
        tab.evaluate(WATCH_TAB)
        started = time.perf_counter()
        self.page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        try:
            self.page.wait_for_function(
                "() => window.__nbtuneShown !== undefined", polling="raf", timeout=60_000
            )
        except PlaywrightTimeout:
            return None, None
        driver = round((time.perf_counter() - started) * 1e3)
        in_page = self.page.evaluate("() => window.__nbtuneShown - window.__nbtuneClicked")
        return round(in_page), driver

    def hover_ms(self) -> float | str:
        """Move onto the line of a running trial whose curve the chart draws (two points or
        more: a line); ms from the mouse entering the line (the event's time, in the page) to
        the first frame with that curve bold (its line's computed width). Else why not: "no
        running curve", "line gone" (the trial ended meanwhile), "moved" (the mouse entered
        another line: the table's lines move as trials end) or "timeout" (not within 10 s)."""
        from playwright.sync_api import Error as PlaywrightError

        page = self.page
        trial = page.evaluate(DRAWN_RUNNING)
        if trial is None:
            return "no running curve"
        try:
            line = page.locator(f'.nbtune-table tr[data-trial="{trial}"]')
            page.mouse.move(0, 0)
            line.evaluate("el => el.scrollIntoView({block: 'nearest'})", timeout=2000)
            box = line.locator('td[data-key="iteration"]').bounding_box(timeout=2000)
            page.evaluate(WATCH_HOVER, trial)
        except PlaywrightError:  # the trial ended meanwhile, its line left the page
            return "line gone"
        if box is None:
            return "line gone"
        page.mouse.move(box["x"] + 2, box["y"] + box["height"] / 2)
        try:
            return page.evaluate("() => window.nbtuneHover")
        finally:
            page.mouse.move(0, 0)


def profile_summary(profile: dict[str, Any], top: int = 25) -> dict[str, Any]:
    """A CPU profile's samples summed by function (on the stack, and at its top) and by
    script; "(idle)" is time the thread waited."""
    nodes = {node["id"]: node for node in profile["nodes"]}
    parent = {child: node["id"] for node in profile["nodes"] for child in node.get("children", ())}
    inclusive: dict[str, float] = {}
    own: dict[str, float] = {}
    scripts: dict[str, float] = {}
    for sample, delta in zip(profile["samples"], profile["timeDeltas"], strict=True):
        ms = delta / 1000
        name = _frame(nodes[sample]["callFrame"])
        own[name] = own.get(name, 0.0) + ms
        script = nodes[sample]["callFrame"]["url"].rsplit("/", 1)[-1][:60] or name
        scripts[script] = scripts.get(script, 0.0) + ms
        seen, node = set(), sample
        while node is not None:
            frame = _frame(nodes[node]["callFrame"])
            if frame not in seen:
                seen.add(frame)
                inclusive[frame] = inclusive.get(frame, 0.0) + ms
            node = parent.get(node)

    def ranked(sums: dict[str, float]) -> list[tuple[str, float]]:
        return [(k, round(v)) for k, v in sorted(sums.items(), key=lambda kv: -kv[1])[:top]]

    return {
        "profiled_ms": round((profile["endTime"] - profile["startTime"]) / 1000),
        "inclusive_ms": ranked(inclusive),
        "self_ms": ranked(own),
        "by_script_ms": ranked(scripts),
    }


def trace_summary(trace: dict[str, Any], top: int = 25) -> dict[str, Any]:
    """A trace's events on the page's main thread, summed by name: the time of their own
    (their children's taken out), and for the events that call scripts, by where they came
    from (`FunctionCall`'s function, `EventDispatch`'s type, `TimerFire`...)."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    main = [
        e
        for e in events
        if e.get("ph") == "X" and "dur" in e and names.get((e["pid"], e["tid"])) == "CrRendererMain"
    ]
    main.sort(key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    own: dict[str, float] = {}
    open_: list[list] = []  # [end, name, own time]
    busy = 0.0

    def close(until: float) -> None:
        while open_ and open_[-1][0] <= until:
            _, name, ms = open_.pop()
            own[name] = own.get(name, 0.0) + ms

    for event in main:
        start, ms = event["ts"], event["dur"] / 1000
        close(start)
        name = event["name"]
        detail = event.get("args", {}).get("data", {})
        if name == "FunctionCall":
            script = detail.get("url", "").rsplit("/", 1)[-1][:40]
            name += f" {detail.get('functionName') or '?'} {script}"
        elif name == "EventDispatch":
            name += f" {detail.get('type', '?')}"
        if open_:
            open_[-1][2] -= ms
        else:
            busy += ms
        open_.append([start + event["dur"], name, ms])
    close(float("inf"))
    ranked = sorted(own.items(), key=lambda kv: -kv[1])[:top]
    return {"busy_ms": round(busy), "self_ms": [(k, round(v)) for k, v in ranked]}


def _frame(frame: dict[str, Any]) -> str:
    script = frame["url"].rsplit("/", 1)[-1][:40]
    where = f" {script}:{frame['lineNumber'] + 1}" if script else ""
    return f"{frame['functionName'] or '(anonymous)'}{where}"


def write_notebook(folder: Path, trials: int, reports: int, sleep: float) -> Path:
    cells = [cell.format(trials=trials, reports=reports, sleep=sleep) for cell in RUN_CELLS]
    path = folder / "bench.ipynb"
    notebook = new_notebook(
        cells=[new_code_cell(c) for c in cells], metadata={"kernelspec": KERNELSPEC}
    )
    nbformat.write(notebook, path)
    return path


def measure(
    trials: int,
    reports: int,
    sleep: float,
    every: float,
    width: int,
    anywidget: bool,
    profile_s: float | None = None,
    trace: bool = False,
) -> list[dict]:
    from playwright.sync_api import sync_playwright

    others = OtherCpu()
    run = {"trials": trials, "reports": reports, "report_every_s": sleep, "anywidget": anywidget}
    with tempfile.TemporaryDirectory() as folder, lab(Path(folder), anywidget) as url:
        notebook = write_notebook(Path(folder), trials, reports, sleep)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
            )
            page = browser.new_page(viewport={"width": width, "height": 1000})
            page.goto(url.format(path=notebook.name))
            page.wait_for_function(KERNEL_IDLE, timeout=120_000, polling=200)
            watched = Page(page)
            page.evaluate(RUN_ALL)
            page.locator(TABLE_LINE).first.wait_for(timeout=120_000)
            began = time.perf_counter()
            samples, clicks, parcoords, hover = [watched.sample(began)], [], (None, None), []
            tabs_opened, profiled, traced = False, None, None
            planned = trials * reports * sleep / 4  # s, the run's length without overheads
            longest = 3 * planned + 60  # s; a trial left paused never ends
            try:
                while not page.evaluate(FINISHED) and time.perf_counter() - began < longest:
                    page.wait_for_timeout(every * 1000)
                    samples.append(watched.sample(began))
                    clicks += [(samples[-1]["s"], ms) for ms in watched.click_ms()]
                    hover.append((samples[-1]["s"], watched.hover_ms()))
                    if not tabs_opened and samples[-1]["s"] > 0.25 * planned:
                        tabs_opened = True
                        parcoords = watched.open_tab("parallel coordinates")
                        watched.open_tab("learning curves")
                    if profile_s and profiled is None and samples[-1]["s"] > 0.75 * planned:
                        profiled = watched.profile(profile_s) | {"at_s": samples[-1]["s"]}
                        if trace:
                            traced = watched.trace(profile_s) | {"at_s": samples[-1]["s"]}
                    print(json.dumps({"sample": samples[-1]}), file=sys.stderr, flush=True)
            except Exception:
                page.screenshot(path="/tmp/dashboard_browser_failure.png")
                raise
            samples.append(watched.sample(began))
            browser.close()
    cpu = others.percent()
    quarter = samples[-1]["s"] / 4
    first_minute = max(s["heap_mb"] for s in samples if s["s"] <= 60)
    heap = {
        "figure": "heap_mb",
        **run,
        "first_minute_max": first_minute,
        "last": samples[-1]["heap_mb"],
        "max": max(s["heap_mb"] for s in samples),
        "target": "last <= 1.5 x first_minute_max",
        "passed": samples[-1]["heap_mb"] <= 1.5 * first_minute,
        "series": [(s["s"], s["heap_mb"]) for s in samples],
    }
    nodes = {
        "figure": "dom_nodes",
        **run,
        "max": max(s["nodes"] for s in samples),
        "last": samples[-1]["nodes"],
        "attached_last": samples[-1]["attached"],
        "target": "< 25000",
        "passed": max(s["nodes"] for s in samples) < 25000,
        "series": [(s["s"], s["nodes"], s["attached"]) for s in samples],
    }
    late = [s for s in samples if s["s"] >= 3 * quarter]
    busy = {
        "figure": "busy_pct",
        **run,
        "max": max(s["busy_pct"] for s in samples[1:]),
        "last_quarter_mean": _busy_mean(late, samples),
        "last_quarter_by_kind": {
            kind: _busy_mean(late, samples, f"{kind.lower()}_pct") for kind in DURATIONS[1:]
        },
        "series": [(s["s"], s["busy_pct"]) for s in samples[1:]],
        "passed": None,
    }
    click = {
        "figure": "click_ms",
        **run,
        "max": max((ms for _, ms in clicks), default=None),
        "first_quarter_max": max((ms for s, ms in clicks if s <= quarter), default=None),
        "last_quarter_max": max((ms for s, ms in clicks if s >= 3 * quarter), default=None),
        "target": "< 500",
        "passed": bool(clicks) and max(ms for _, ms in clicks) < 500,
        "series": clicks,
    }
    draw = {
        "figure": "parcoords_first_draw_ms",
        **run,
        "value": parcoords[0],
        "driver_ms": parcoords[1],
        "target": "< 300",
        "passed": parcoords[0] is not None and parcoords[0] < 300,
    }
    hovered = [ms for _, ms in hover if not isinstance(ms, str)]
    highlight = {
        "figure": "hover_highlight_ms",
        **run,
        "max": max(hovered, default=None),
        "median": sorted(hovered)[len(hovered) // 2] if hovered else None,
        "missed": dict(Counter(ms for _, ms in hover if isinstance(ms, str))),
        "series": [(s, ms) for s, ms in hover if not isinstance(ms, str)],
        "target": "< 100",
        "passed": bool(hovered) and max(hovered) < 100,
    }
    lines = [heap, nodes, busy, click, draw, highlight]
    if profiled is not None:
        lines.append({"figure": "busy_profile", **run, **profiled, "passed": None})
    if traced is not None:
        lines.append({"figure": "busy_trace", **run, **traced, "passed": None})
    return [line | {"other_cpu_pct": cpu} for line in lines]


def _busy_mean(chosen: list[dict], samples: list[dict], share: str = "busy_pct") -> float | None:
    """A busy share over the intervals that end at the `chosen` samples, by their length."""
    began = {id(b): a["s"] for a, b in itertools.pairwise(samples)}
    spans = [(s[share], s["s"] - began[id(s)]) for s in chosen if id(s) in began]
    total = sum(span for _, span in spans)
    return round(sum(busy * span for busy, span in spans) / total, 1) if total else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--reports", type=int, default=100)
    parser.add_argument("--sleep", type=float, default=0.05, help="seconds between reports")
    parser.add_argument("--every", type=float, default=6.0, help="seconds between samples")
    parser.add_argument("--width", type=int, default=1280, help="the window's width (px)")
    parser.add_argument("--quick", action="store_true", help="16 trials x 100 reports")
    parser.add_argument(
        "--large", action="store_true", help="200 trials x 300 reports, one every 15 ms"
    )
    parser.add_argument(
        "--profile", action="store_true", help="profile the page three quarters into the run"
    )
    parser.add_argument("--profile-s", type=float, default=5.0, help="how long to profile")
    parser.add_argument(
        "--trace", action="store_true", help="with --profile: then a Chromium trace as long"
    )
    parser.add_argument(
        "--without-anywidget",
        action="store_true",
        help="anywidget's lab extension disabled: the static table and charts",
    )
    args = parser.parse_args()
    if args.quick:
        args.trials, args.reports, args.every = 16, 100, 3.0
    if args.large:
        args.trials, args.reports, args.sleep, args.every = 200, 300, 0.015, 10.0
    anywidget = not args.without_anywidget
    profile_s = args.profile_s if args.profile else None
    figures = measure(
        args.trials,
        args.reports,
        args.sleep,
        args.every,
        args.width,
        anywidget,
        profile_s,
        args.trace,
    )
    for line in figures:
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
