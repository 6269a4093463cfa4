"""Serving widget clicks while a cell is busy, through an ipykernel 7 subshell.

A kernel handles widget messages on its main thread, between cells: a Pause button clicked
while `tuner.wait()` (or any long cell) runs would act only when the cell ends. ipykernel 7
can run a subshell, a second thread that serves shell messages, and it routes a comm's
messages to the subshell its `_reply_subshell_for(data, default)` names. That hook is private
(ipykernel >= 7), so everything here is guarded: without it, clicks act between cells, and the
dashboard says so. The method is replaced rather than its `_reply_subshell_id` set, because
ipykernel resets that attribute whenever the widget sends an update.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

logger = logging.getLogger("nbtune")
_subshell_ids: dict[int, str] = {}


def serve_on_subshell(widgets: Iterable[object]) -> bool:
    """Route the messages of `widgets` to a subshell; return whether that was possible."""
    subshell_id = _kernel_subshell()
    if subshell_id is None:
        return False
    for widget in widgets:
        comm = getattr(widget, "comm", None)
        if comm is None or not hasattr(comm, "_reply_subshell_for"):
            return False
        comm._reply_subshell_for = lambda data, default, subshell=subshell_id: subshell
    return True


def _kernel_subshell() -> str | None:
    """One subshell per kernel, created through the kernel's own control channel."""
    kernel = _kernel()
    if kernel is None or "kernel subshells" not in _features(kernel):
        return None
    if id(kernel) not in _subshell_ids:
        try:
            _subshell_ids[id(kernel)] = _create_subshell()
        except Exception:
            logger.warning("nbtune: could not create a kernel subshell", exc_info=True)
            return None
    return _subshell_ids[id(kernel)]


def _kernel():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return getattr(shell, "kernel", None)


def _features(kernel) -> list[str]:
    info = getattr(kernel, "kernel_info", {}) or {}
    return list(info.get("supported_features", []))


def _create_subshell() -> str:
    from ipykernel import get_connection_file
    from jupyter_client import BlockingKernelClient

    client = BlockingKernelClient(connection_file=get_connection_file())
    client.load_connection_file()
    client.start_channels(shell=False, iopub=False, stdin=False, hb=False, control=True)
    try:
        client.control_channel.send(client.session.msg("create_subshell_request", {}))
        return client.control_channel.get_msg(timeout=10)["content"]["subshell_id"]
    finally:
        client.stop_channels()
