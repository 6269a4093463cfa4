"""A real Jupyter kernel, driven the way a notebook front end drives it; shared by the tests."""

from __future__ import annotations

import queue
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_client.manager import start_new_kernel

WAIT_UNTIL_HELD = """
    import threading

    def wait_until_held(tuner):
        changed = threading.Event()
        tuner.subscribe(lambda event: changed.set())
        while tuner.state != "paused":
            changed.wait(1)
            changed.clear()
"""
"""Kernel code: `wait_until_held(tuner)` returns once the run holds (`max_consecutive_failures`
in a notebook); run it before using the function."""


@dataclass
class Cell:
    """What a front end shows for one executed cell."""

    ok: bool = True
    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    """The text of the cell's value (`Out[n]`), if it has one."""
    displays: list[dict] = field(default_factory=list)
    """The data of each display, as updated since through its display id (by any cell)."""
    error: str | None = None
    page: str = ""
    """What `?` sends to the pager."""


class Kernel:
    """A kernel of `kernel_name` working in `cwd`."""

    def __init__(self, cwd: Path, kernel_name: str = "python3") -> None:
        self.manager, self.client = start_new_kernel(kernel_name=kernel_name, cwd=str(cwd))
        self.subshells = kernel_name == "python3"
        """Whether the kernel serves widget clicks while a cell runs (ipykernel 7 subshells)."""
        self._displayed: dict[str, list[tuple[Cell, int]]] = {}
        """Where each display id was shown: the cell and the index in its `displays`."""

    def start(self, code: str) -> str:
        """Start executing `code` without waiting; return the request's id."""
        return self.client.execute(textwrap.dedent(code))

    def collect(self, msg_id: str, timeout: float = 60) -> Cell:
        """Everything the cell `msg_id` shows, once it has finished."""
        cell = Cell()
        while True:
            try:
                msg = self.client.get_iopub_msg(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no reply within {timeout} s; so far {cell}") from None
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                setattr(cell, content["name"], getattr(cell, content["name"]) + content["text"])
            elif kind == "execute_result":
                cell.result = content["data"]["text/plain"]
            elif kind == "display_data":
                self._display(cell, content)
            elif kind == "update_display_data":
                self._update_display(content)
            elif kind == "error":
                cell.error = "\n".join(content["traceback"])
            elif kind == "status" and content["execution_state"] == "idle":
                break
        reply = self.client.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.client.get_shell_msg(timeout=timeout)
        cell.ok = reply["content"]["status"] == "ok"
        for payload in reply["content"].get("payload", []):
            cell.page += payload.get("data", {}).get("text/plain", "")
        return cell

    def _display(self, cell: Cell, content: dict) -> None:
        cell.displays.append(content["data"])
        display_id = content.get("transient", {}).get("display_id")
        if display_id:
            self._displayed.setdefault(display_id, []).append((cell, len(cell.displays) - 1))

    def _update_display(self, content: dict) -> None:
        """Replace every output of the display id, in whichever cell, as front ends do."""
        for cell, index in self._displayed.get(content["transient"]["display_id"], []):
            cell.displays[index] = content["data"]

    def run(self, code: str, timeout: float = 60) -> Cell:
        """Execute `code` and wait for it."""
        return self.collect(self.start(code), timeout)

    def check(self, code: str) -> str:
        """Run `code`, which must succeed; return what it printed."""
        cell = self.run(code)
        assert cell.ok, cell.error or cell.stderr
        return cell.stdout

    def click(self, comm_id: str) -> None:
        """Send a button click exactly as the widget front end does."""
        self.send(comm_id, {"event": "click"})

    def send(self, comm_id: str, message: dict) -> None:
        """Send a widget's custom message (a click, a row's action) as the front end does."""
        content = {"comm_id": comm_id, "data": {"method": "custom", "content": message}}
        self.client.shell_channel.send(self.client.session.msg("comm_msg", content))

    def click_then_run(self, comm_id: str, code: str, message: dict | None = None) -> Cell:
        """Click (or send `message`), then run `code`: during the click where subshells serve
        clicks, else after."""
        message = message or {"event": "click"}
        if not self.subshells:
            self.send(comm_id, message)
            return self.run(code)
        busy = self.start(code)
        self.send(comm_id, message)
        return self.collect(busy)

    def shutdown(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)
