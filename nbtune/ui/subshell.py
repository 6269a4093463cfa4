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
_state_served: set[int] = set()
_REPLIES = {"kernel_info_request": "kernel_info_reply", "comm_info_request": "comm_info_reply"}
"""The main shell's requests a reloaded page waits on that the shell channel thread answers."""


def serve_on_subshell(widgets: Iterable[object]) -> bool:
    """Route the messages of `widgets` to a subshell; return whether that was possible.
    A page reloaded meanwhile gets them back too (`serve_widget_state_while_busy`)."""
    subshell_id = _kernel_subshell()
    if subshell_id is None:
        return False
    serve_widget_state_while_busy()
    for widget in widgets:
        comm = getattr(widget, "comm", None)
        if comm is None or not hasattr(comm, "_reply_subshell_for"):
            return False
        comm._reply_subshell_for = lambda data, default, subshell=subshell_id: subshell
    return True


def serve_widget_state_while_busy() -> bool:
    """Let a reloaded page get its widgets back while a cell is busy; return whether it can.

    A page that loads asks the kernel what it is (`kernel_info_request`: the page holds its
    other requests up to 3 s for the answer), which widgets exist (`comm_info_request`) and
    then each widget for its state (a `request_state` comm message), all on the main shell,
    which a busy cell (`tuner.wait()`) holds until it ends: the page shows "Loading widget..."
    until then. This answers the first two on the kernel's shell channel thread (from what the
    kernel holds: its info, the comm ids) and routes the third to the subshell (sending a
    widget's state is thread-safe).
    It replaces the shell channel's receiver by one that passes every other message on
    unchanged, once per kernel; like `serve_on_subshell` it rests on ipykernel 7's private
    parts, so anything missing leaves the kernel as it was.
    """
    subshell_id = _kernel_subshell()
    kernel = _kernel()
    if subshell_id is None or kernel is None:
        return False
    if id(kernel) in _state_served:
        return True
    stream = getattr(kernel, "shell_stream", None)
    channel = getattr(kernel, "shell_channel_thread", None)
    original = getattr(kernel, "shell_channel_thread_main", None)
    if stream is None or channel is None or original is None or kernel.session is None:
        return False

    async def receive(msg: list) -> None:
        try:
            if _answered(kernel, stream, channel, subshell_id, msg):
                return
        except Exception:
            logger.debug("nbtune: a shell message could not be served early", exc_info=True)
        await original(msg)

    stream.io_loop.add_callback(stream.on_recv, receive, copy=False)
    _state_served.add(id(kernel))
    return True


def _answered(kernel, stream, channel, subshell_id: str, msg: list) -> bool:
    """Answer a kernel_info_request or a comm_info_request, or send a request_state to the
    subshell; return whether the message was one of them (else the kernel handles it as
    usual). Messages a page sends to a subshell of its own are left alone."""
    session = kernel.session
    idents, rest = session.feed_identities(msg, copy=False)
    peeked = session.deserialize(rest, content=False, copy=False)
    header = peeked["header"]
    kind = header["msg_type"]
    if header.get("subshell_id") is not None or kind not in (*_REPLIES, "comm_msg"):
        return False
    if kind == "comm_msg":
        data = session.unpack(peeked["content"]).get("data") or {}
        if not isinstance(data, dict) or data.get("method") != "request_state":
            return False
        channel.manager.get_shell_channel_to_subshell_socket(subshell_id).send_multipart(
            msg, copy=False
        )
        return True
    parent = session.deserialize(rest, copy=False)
    if kind == "kernel_info_request":
        reply = {"status": "ok", **kernel.kernel_info}
    else:
        target = parent["content"].get("target_name")
        comms = {
            comm_id: {"target_name": comm.target_name}
            for comm_id, comm in list(kernel.comm_manager.comms.items())
            if target is None or comm.target_name == target
        }
        reply = {"comms": comms, "status": "ok"}
    kernel._publish_status("busy", "shell", parent)
    session.send(stream, _REPLIES[kind], reply, parent, idents)
    kernel._publish_status("idle", "shell", parent)  # the page waits for both
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
