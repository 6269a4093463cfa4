"""A page reloaded while a cell waits on the run (`tuner.wait()`) asks the kernel for its
widgets as JupyterLab does: which exist (comm_info_request), then each one's state
(request_state). The kernel answers both while the cell is still busy (ipykernel 7)."""

from __future__ import annotations

from kernels import Kernel

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SETUP = """
    import threading
    import nbtune as nt
    from nbtune.ui.dashboard import Dashboard

    def train(config):
        step = 0
        while True:
            step += 1
            nt.report(loss=config["x"] / step)
            threading.Event().wait(0.02)

    tuner = nt.Tuner(train, {"x": nt.uniform(0, 1)}, metric="loss", num_samples=2,
                     name="reloaded", progress=False)
    tuner.start(display=False)
    dashboard = Dashboard(tuner)
    dashboard.show()
    dashboard.ready.wait(30)
    print(dashboard.stop_all.comm.comm_id)
"""


def test_a_reloaded_page_gets_the_widgets_and_their_state_while_a_cell_waits(tmp_path):
    kernel = Kernel(tmp_path)
    try:
        started = kernel.run(SETUP)
        assert started.ok, started.error
        stop_all = started.stdout.strip()
        dashboard = started.displays[0][WIDGET_VIEW]["model_id"]
        busy = kernel.start("tuner.wait()")

        asked = kernel.client.comm_info(target_name="jupyter.widget")
        reply = kernel.client.get_shell_msg(timeout=60)
        assert reply["parent_header"]["msg_id"] == asked, "answered before the cell ended"
        assert dashboard in reply["content"]["comms"]

        request = kernel.client.session.msg(
            "comm_msg", {"comm_id": dashboard, "data": {"method": "request_state"}}
        )
        kernel.client.shell_channel.send(request)
        update = kernel.client.get_iopub_msg(timeout=60)
        while update["parent_header"].get("msg_id") != request["header"]["msg_id"] or (
            update["msg_type"] != "comm_msg"
        ):
            update = kernel.client.get_iopub_msg(timeout=60)
        assert update["content"]["data"]["method"] == "update"
        assert "children" in update["content"]["data"]["state"]

        kernel.click(stop_all)
        ended = kernel.collect(busy)
        assert ended.ok, ended.error
        assert kernel.check("print(tuner.state)") == "stopped\n", "the run went on meanwhile"
    finally:
        kernel.shutdown()
