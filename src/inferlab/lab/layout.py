"""Where the lab lives and what its parts are called: its root, the formats of lab.json and of its status,
its daemons and their pidfiles; and the error every lab helper raises."""

from __future__ import annotations

from pathlib import Path

LAB_ROOT = Path("/var/lib/inferlab-lab")
LAB_JSON_FORMAT = "inferlab.lab/1"
STATUS_FORMAT = "inferlab.lab_status/1"
# sglang-router sets its process title (setproctitle), so its /proc/PID/cmdline reads this and nothing else.
ROUTER_TITLE = "sglang::router"
# The lab's hardware daemons on the controller (link_daemon.py, gpu_daemon.py beside this file), by their key in
# lab.json: (their command line's mark: their module, what it is, what goes wrong without it). Their pidfiles are
# <lab_dir>/run/<key>.pid.
HARDWARE_DAEMONS = {
    "link": ("inferlab.lab.link_daemon", "the direct link's daemon", "a driver reload would leave the link down"),
    "gpu": ("inferlab.lab.gpu_daemon", "the GPU daemon", "a killed server's GPU memory would stay held"),
}
NETNS_DIR = Path("/run/netns")


class LabError(Exception):
    """A lab precondition or input that is wrong; the message says what to change."""


def gateway_daemons(gateway: dict) -> list[tuple[str, str, dict, str]]:
    """The gateway's daemons as ``(key, what, spec, health URL)``: the large-model server, each LiteLLM instance,
    nginx (whose health URL is the public route's ``/health/readiness``)."""
    return ([("large", "large-model server", gateway["large"], gateway["large"]["health_url"])]
            + [(i["name"], f"instance {i['name']}", i, f"{i['url']}/health/readiness") for i in gateway["instances"]]
            + [("front", "nginx", gateway["front"], gateway["front"]["readiness_url"])])
