"""inferlab.lab (control and the modules below it): addressing, the route-clash check, preflight, pidfile stops, file
trees, lab.json, status."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tc_logic import COLLECTION_TC, collection_tc
from unit_fixtures import FIXTURE_ROOT

from inferlab.lab import addressing as lab_addressing
from inferlab.lab import control as lab
from inferlab.lab import lab_files
from inferlab.lab import layout as lab_layout
from inferlab.lab import preflight as lab_preflight
from inferlab.lab import processes as lab_processes
from inferlab.lab import status as lab_status
from inferlab.lab import tc_module as lab_tc_module

REPO_ROOT = Path(__file__).resolve().parents[2]

# `ip -j -4 route show table all` on a plain cloud VM (no lab)
ROUTES_PLAIN = [
    {"dst": "default", "gateway": "192.0.2.1", "dev": "eth0", "flags": []},
    {"dst": "192.0.2.0/24", "dev": "eth0", "protocol": "kernel", "scope": "link", "prefsrc": "192.0.2.2", "flags": []},
    {"type": "local", "dst": "127.0.0.0/8", "dev": "lo", "table": "local", "protocol": "kernel", "scope": "host",
     "prefsrc": "127.0.0.1", "flags": []},
    {"type": "local", "dst": "192.0.2.2", "dev": "eth0", "table": "local", "protocol": "kernel", "scope": "host",
     "prefsrc": "192.0.2.2", "flags": []},
    {"type": "broadcast", "dst": "192.0.2.255", "dev": "eth0", "table": "local", "protocol": "kernel",
     "scope": "link", "prefsrc": "192.0.2.2", "flags": []},
]

# the same machine with lab ilab (octet 77) up: its own veths' routes
ROUTES_ILAB = ROUTES_PLAIN + [
    {"dst": "169.254.77.0/30", "dev": "ilab-a-m", "protocol": "kernel", "scope": "link", "prefsrc": "169.254.77.1",
     "flags": []},
    {"dst": "169.254.77.4/30", "dev": "ilab-b-m", "protocol": "kernel", "scope": "link", "prefsrc": "169.254.77.5",
     "flags": []},
    {"type": "local", "dst": "169.254.77.1", "dev": "ilab-a-m", "table": "local", "protocol": "kernel",
     "scope": "host", "prefsrc": "169.254.77.1", "flags": []},
    {"type": "broadcast", "dst": "169.254.77.3", "dev": "ilab-a-m", "table": "local", "protocol": "kernel",
     "scope": "link", "prefsrc": "169.254.77.1", "flags": []},
    {"type": "local", "dst": "169.254.77.5", "dev": "ilab-b-m", "table": "local", "protocol": "kernel",
     "scope": "host", "prefsrc": "169.254.77.5", "flags": []},
]

# a workstation with avahi-style link-local on its NIC: 169.254.0.0/16 is broader than the lab's /30s
ROUTES_LINK_LOCAL = ROUTES_PLAIN + [
    {"dst": "169.254.0.0/16", "dev": "enp5s0", "scope": "link", "metric": 1000, "flags": []},
]


# --------------------------------------------------------------------------------------------------------------------
# addressing


def test_lab_subnets():
    subnets = lab_addressing.lab_subnets(77)
    assert str(subnets["management"]) == "169.254.77.0/24"
    assert str(subnets["link"]) == "169.254.177.0/24"
    assert str(lab_addressing.lab_subnets("154")["link"]) == "169.254.254.0/24"


@pytest.mark.parametrize("octet, words", [
    (69, "metadata"),  # the link subnet would be 169.254.169.0/24
    (0, "out of range"),
    (155, "out of range"),
    ("x", "not an integer"),
    (None, "not an integer"),
])
def test_lab_subnets_refused(octet, words):
    with pytest.raises(lab_layout.LabError, match=words) as exc:
        lab_addressing.lab_subnets(octet)
    assert "inferlab_lab_octet" in str(exc.value)


@pytest.mark.parametrize("name, ok", [
    ("ilab", True), ("imol", True), ("a", True), ("lab2", True), ("abcdefghij", True),
    ("abcdefghijk", False), ("i-lab", False), ("i_lab", False), ("Lab", False), ("2lab", False), ("", False),
])
def test_check_name(name, ok):
    if ok:
        assert lab_addressing.check_name(name) == name
    else:
        with pytest.raises(lab_layout.LabError, match="inferlab_lab_name"):
            lab_addressing.check_name(name)


def test_name_patterns_do_not_cross_labs():
    assert lab_addressing.netns_re("ilab").match("ilab-a")
    assert not lab_addressing.netns_re("ilab").match("ilab-a-m")
    assert not lab_addressing.netns_re("ila").match("ilab-a")
    assert not lab_addressing.netns_re("ilab").match("imol-a")
    assert lab_addressing.veth_re("ilab").match("ilab-b-m")
    assert not lab_addressing.veth_re("ilab").match("ilab-b")
    assert not lab_addressing.veth_re("ila").match("ilab-b-m")


# --------------------------------------------------------------------------------------------------------------------
# route clashes


@pytest.mark.parametrize("routes", [ROUTES_PLAIN, ROUTES_ILAB, ROUTES_LINK_LOCAL, []], ids=[
    "plain", "own-veths", "link-local-16", "empty"])
def test_no_clash(routes):
    assert lab_addressing.route_clashes(routes, "ilab", 77) == []


def test_other_octet_is_independent():
    assert lab_addressing.route_clashes(ROUTES_ILAB, "imol", 78) == []


def test_another_lab_on_the_same_octet_clashes():
    clashes = lab_addressing.route_clashes(ROUTES_ILAB, "imol", 77)
    assert {c["dev"] for c in clashes} == {"ilab-a-m", "ilab-b-m"}
    assert {"169.254.77.0/30", "169.254.77.4/30", "169.254.77.1/32"} <= {c["dst"] for c in clashes}
    assert {c["table"] for c in clashes} == {"main", "local"}


@pytest.mark.parametrize("route", [
    {"dst": "169.254.77.0/24", "dev": "eth0", "flags": []},
    {"dst": "169.254.77.128/25", "dev": "wg0", "flags": []},
    {"dst": "169.254.77.9", "gateway": "192.0.2.1", "dev": "eth0", "flags": []},
    {"type": "blackhole", "dst": "169.254.77.0/24", "flags": []},
    {"type": "local", "dst": "169.254.77.10", "dev": "eth0", "table": "local", "flags": []},
    {"dst": "169.254.77.0/24", "dev": "ilab-a", "flags": []},  # looks like ours but is not a -m veth
])
def test_clash(route):
    clashes = lab_addressing.route_clashes([*ROUTES_PLAIN, route], "ilab", 77)
    assert len(clashes) == 1
    assert clashes[0]["dev"] == route.get("dev")
    assert clashes[0]["type"] == route.get("type", "unicast")


@pytest.mark.parametrize("route", [
    {"dst": "169.254.76.0/23", "dev": "eth0", "flags": []},  # broader than the /24: the lab's /30s win
    {"dst": "169.254.78.0/24", "dev": "eth0", "flags": []},  # next door
    {"dst": "169.254.169.254", "dev": "eth0", "flags": []},  # metadata host route: not the lab's subnet
    {"dst": "fe80::/64", "dev": "eth0", "flags": []},
    {"dst": "default", "dev": "ilab-a-m", "flags": []},
    {"dst": "not-an-address", "dev": "eth0", "flags": []},
])
def test_not_a_clash(route):
    assert lab_addressing.route_clashes([*ROUTES_PLAIN, route], "ilab", 77) == []


def test_clash_message_names_the_route_and_the_variable():
    clashes = lab_addressing.route_clashes([{"dst": "169.254.77.0/24", "dev": "eth0"}], "ilab", 77)
    text = lab_addressing.clash_problem(clashes, lab_addressing.lab_subnets(77)["management"])
    assert "unicast 169.254.77.0/24 dev eth0 (table main)" in text
    assert "inferlab_lab_octet" in text
    assert "169.254.77.0/24" in text


# --------------------------------------------------------------------------------------------------------------------
# preflight


def _which_all(_tool):
    return "/usr/bin/x"


def test_preflight_ok():
    result = lab_preflight.preflight("ilab", 77, routes=ROUTES_ILAB, which_fn=_which_all, euid=0)
    assert result["ok"] is True
    assert result["problems"] == []
    assert result["subnets"] == {"management": "169.254.77.0/24", "link": "169.254.177.0/24"}


def test_preflight_collects_every_problem():
    result = lab_preflight.preflight("ilab", 77, routes=[*ROUTES_PLAIN, {"dst": "169.254.77.0/24", "dev": "eth0"}],
                                     which_fn=lambda tool: None if tool in ("iperf3", "sshd") else "/x", euid=1000)
    assert result["ok"] is False
    assert result["is_root"] is False
    assert {m["tool"] for m in result["missing_tools"]} == {"iperf3", "sshd"}
    text = " | ".join(result["problems"])
    assert "root" in text
    assert "apt-get install iperf3 openssh-server" in text
    assert "inferlab_lab_octet" in text


def test_preflight_bad_octet_stops_before_routes():
    result = lab_preflight.preflight("ilab", 69, routes=None, which_fn=_which_all, euid=0)
    assert result["ok"] is False
    assert any("metadata" in p for p in result["problems"])
    assert result["clashes"] == []


def test_main_check_routes(tmp_path, capsys):
    routes = tmp_path / "routes.json"
    routes.write_text(json.dumps(ROUTES_ILAB))
    assert lab.main(["check-routes", "--name", "ilab", "--octet", "77", "--routes", str(routes)]) == 0
    assert lab.main(["check-routes", "--name", "imol", "--octet", "77", "--routes", str(routes), "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["clashes"]
    assert "inferlab_lab_octet" in err
    assert lab.main(["check-routes", "--name", "imol", "--octet", "69", "--routes", str(routes)]) == 2


# --------------------------------------------------------------------------------------------------------------------
# processes


@pytest.fixture
def sleeper(tmp_path):
    """A process whose command line mentions a lab host dir, and its pidfile."""
    host_dir = tmp_path / "lab" / "hosts" / "a"
    (host_dir / "run").mkdir(parents=True)
    code = "import time; print('ready', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code, f"{host_dir}/marker"], stdout=subprocess.PIPE, text=True)
    pidfile = host_dir / "run" / "daemon.pid"
    pidfile.write_text(f"{proc.pid}\n")
    try:
        # /proc/PID/cmdline can read empty for a moment after Popen returns: wait until the child runs
        assert proc.stdout.readline().strip() == "ready"
        yield proc, pidfile, host_dir
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()


def test_stop_pid_checks_the_command_line(sleeper):
    proc, pidfile, _host_dir = sleeper
    result = lab_processes.stop_pid(pidfile, "/some/other/lab/")
    assert result["state"] == "mismatch"
    assert proc.poll() is None  # not ours: left alone
    assert not pidfile.exists()  # but the stale pidfile goes


def test_stop_pid_stops(sleeper):
    proc, pidfile, host_dir = sleeper
    result = lab_processes.stop_pid(pidfile, f"{host_dir}/")
    assert result["state"] == "stopped"
    assert result["changed"] is True
    assert proc.wait(timeout=5) == -signal.SIGTERM
    assert not pidfile.exists()
    pidfile.write_text(f"{proc.pid}\n")  # a stale pidfile, e.g. after a reboot
    assert lab_processes.stop_pid(pidfile, f"{host_dir}/") == {"pidfile": str(pidfile), "pid": proc.pid,
                                                               "state": "not_running", "changed": True}
    assert not pidfile.exists()
    assert lab_processes.stop_pid(pidfile, f"{host_dir}/")["changed"] is False


def test_stop_pid_kills_what_ignores_sigterm(tmp_path):
    host_dir = tmp_path / "hosts" / "a"
    (host_dir / "run").mkdir(parents=True)
    code = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); " \
           "time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code, f"{host_dir}/"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        pidfile = host_dir / "run" / "stubborn.pid"
        pidfile.write_text(f"{proc.pid}\n")
        assert lab_processes.stop_pid(pidfile, f"{host_dir}/", timeout=0.3)["state"] == "killed"
        assert proc.wait(timeout=5) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()


def test_stop_pidfiles_walks_the_lab(sleeper):
    proc, _pidfile, host_dir = sleeper
    lab_dir = host_dir.parent.parent
    (host_dir / "run" / "garbage.pid").write_text("not a pid\n")
    (lab_dir / "run").mkdir()
    (lab_dir / "run" / "router.pid").write_text(f"{os.getpid()}\n")  # not the router's title: left alone
    result = lab_processes.stop_pidfiles(lab_dir)
    assert result["changed"] is True
    assert sorted(r["state"] for r in result["results"]) == ["invalid", "mismatch", "stopped"]
    proc.wait(timeout=5)
    assert lab_processes.stop_pidfiles(lab_dir)["changed"] is False


def test_proc_running_sees_zombies_as_gone(sleeper):
    proc, _pidfile, _host_dir = sleeper
    assert lab_processes.proc_running(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while lab_processes.proc_running(proc.pid) and time.monotonic() < deadline:  # a zombie until proc.wait()
        time.sleep(0.02)
    assert not lab_processes.proc_running(proc.pid)


def test_read_pidfile(tmp_path):
    assert lab_processes.read_pidfile(tmp_path / "missing") is None
    (tmp_path / "p").write_text(" 123\n")
    assert lab_processes.read_pidfile(tmp_path / "p") == 123
    (tmp_path / "p").write_text("-1\n")
    assert lab_processes.read_pidfile(tmp_path / "p") is None


# --------------------------------------------------------------------------------------------------------------------
# write-tree


TREE = {
    "mode": "0755",
    "dirs": {"run": "0755", "cp": "0700"},
    "files": {
        "sysfs/devices/domain0/security": "none\n",
        "sysfs/module/thunderbolt_net/taint": "\n",
        "bin/tool.py": {"content": "print('hi')\n", "mode": "0755"},
    },
    "links": {"sysfs/bus/thunderbolt/devices/domain0": "../../../devices/domain0"},
}


def test_write_tree_converges(tmp_path):
    root = tmp_path / "host"
    first = lab_files.write_tree(root, TREE)
    assert first["changed"] is True
    assert (root / "sysfs/devices/domain0/security").read_text() == "none\n"
    assert (root / "sysfs/module/thunderbolt_net/taint").read_text() == "\n"
    assert (root / "bin/tool.py").stat().st_mode & 0o777 == 0o755
    assert (root / "sysfs/devices/domain0/security").stat().st_mode & 0o777 == 0o644
    assert (root / "cp").stat().st_mode & 0o777 == 0o700
    assert (root / "sysfs/bus/thunderbolt/devices/domain0/security").read_text() == "none\n"
    assert lab_files.write_tree(root, TREE) == {"changed": False, "changes": []}

    (root / "sysfs/devices/domain0/security").write_text("user\n")
    (root / "cp").chmod(0o755)
    (root / "extra").write_text("left alone\n")
    again = lab_files.write_tree(root, TREE)
    assert again["changes"] == ["mode cp", "file sysfs/devices/domain0/security"]
    assert (root / "extra").read_text() == "left alone\n"


def test_write_tree_check_mode_writes_nothing(tmp_path):
    root = tmp_path / "host"
    result = lab_files.write_tree(root, TREE, check=True)
    assert result["changed"] is True
    assert not root.exists()


def test_write_tree_installs_the_lab_server_package_from_the_package_itself(tmp_path):
    root = tmp_path / "lab"
    result = lab_files.write_tree(root, {"files": {"gpu.json": "{}"}, "server_package": "lib"})
    server = root / "lib" / "inferlab" / "lab" / "server"
    written = sorted(path.name for path in server.glob("*.py"))
    assert written == sorted(path.name for path in lab_files.SERVER_PACKAGE.glob("*.py")) and "__main__.py" in written
    for name in written:
        assert (server / name).read_bytes() == (lab_files.SERVER_PACKAGE / name).read_bytes()
    assert (root / "lib" / "inferlab" / "__init__.py").is_file() and (root / "gpu.json").read_text() == "{}"
    assert "file lib/inferlab/lab/server/__main__.py" in result["changes"]
    assert lab_files.write_tree(root, {"files": {"gpu.json": "{}"}, "server_package": "lib"})["changed"] is False
    # the hosts' own Python runs it from there alone: nothing else of the package is written
    assert sorted(path.name for path in (root / "lib" / "inferlab").iterdir()) == ["__init__.py", "lab"]


@pytest.mark.parametrize("path", ["../escape", "/etc/passwd", "a/../../b", ""])
def test_write_tree_refuses_paths_outside(tmp_path, path):
    with pytest.raises(lab_layout.LabError, match="relative path"):
        lab_files.write_tree(tmp_path, {"files": {path: "x"}})


# --------------------------------------------------------------------------------------------------------------------
# lab.json and status


def make_spec(lab_dir: Path) -> dict:
    """A pair's spec, with the lab's copy of the collection's tc logic installed as the role installs it."""
    tc_module = lab_dir / "lib" / "inferlab_tc.py"
    tc_module.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(COLLECTION_TC, tc_module)
    hosts = []
    for index, hid in enumerate("ab"):
        host_dir = lab_dir / "hosts" / hid
        (host_dir / "run").mkdir(parents=True, exist_ok=True)
        hosts.append({
            "name": f"lab-{hid}", "id": hid, "index": index, "netns": f"ilab-{hid}", "dir": str(host_dir),
            "management": {"interface": "mgmt0", "address": f"169.254.77.{4 * index + 2}", "prefix": 30,
                           "controller_interface": f"ilab-{hid}-m",
                           "controller_address": f"169.254.77.{4 * index + 1}"},
            "link": {"interface": "thunderbolt0", "address": f"169.254.177.{index + 1}", "prefix": 30,
                     "peer_address": f"169.254.177.{2 - index}", "mtu": 1500, "profile": "clean"},
            "ssh": {"address": f"169.254.77.{4 * index + 2}", "port": 22, "user": "root",
                    "private_key": str(lab_dir / "ssh/id_ed25519"), "pidfile": str(host_dir / "run/sshd.pid")},
            "services": [{"name": f"original-{hid}", "url": f"http://169.254.77.{4 * index + 2}:8000/v1",
                          "model": "lab-qwen-small", "port": 8000,
                          "health_url": f"http://169.254.77.{4 * index + 2}:8000/health",
                          "pidfile": str(host_dir / f"run/original-{hid}.pid")}],
            "state_dir": str(host_dir / "state"), "sysfs_root": str(host_dir / "sysfs"),
            "nvml_snapshot": str(host_dir / "nvml.json"), "model_path": str(host_dir / "models/lab-model"),
        })
    (lab_dir / "run").mkdir(parents=True, exist_ok=True)
    router = {"address": "169.254.77.1", "port": 8100, "prometheus_port": 8101, "url": "http://169.254.77.1:8100",
              "readiness_url": "http://169.254.77.1:8100/readiness",
              "workers": ["http://169.254.77.2:8000", "http://169.254.77.6:8000"],
              "pidfile": str(lab_dir / "run/router.pid"), "log": str(lab_dir / "logs/router.log"),
              "log_dir": str(lab_dir / "logs/router"), "python": "/venv/bin/python"}
    gw = lab_dir / "gateway"
    (gw / "run").mkdir(parents=True, exist_ok=True)
    gateway = {
        "dir": str(gw), "key_file": str(gw / "master_key"), "config": str(gw / "litellm.yaml"),
        "large": {"url": "http://169.254.77.1:8200/v1", "health_url": "http://169.254.77.1:8200/health",
                  "pidfile": str(gw / "run/large.pid")},
        "instances": [{"name": f"litellm-{i}", "url": f"http://169.254.77.1:{4001 + n}",
                       "pidfile": str(gw / f"run/litellm-{i}.pid")} for n, i in enumerate("ab")],
        "front": {"url": "http://169.254.77.1:4000", "readiness_url": "http://169.254.77.1:4000/health/readiness",
                  "pidfile": str(gw / "run/nginx.pid")},
    }
    return {"name": "ilab", "octet": 77, "lab_dir": str(lab_dir), "tc_module": str(tc_module),
            "ssh": {"private_key": str(lab_dir / "ssh/id_ed25519"), "known_hosts": str(lab_dir / "ssh/known_hosts")},
            "hosts": hosts, "router": router, "gateway": gateway}


def write_pids(spec: dict, base: int = 1000) -> None:
    for n, host in enumerate(spec["hosts"]):
        Path(host["ssh"]["pidfile"]).write_text(f"{base + 10 * n}\n")
        for m, svc in enumerate(host["services"]):
            Path(svc["pidfile"]).write_text(f"{base + 10 * n + m + 1}\n")
    if spec["router"]:
        Path(spec["router"]["pidfile"]).write_text(f"{base + 99}\n")
    gateway = spec["gateway"]
    for n, daemon in enumerate([gateway["large"], *gateway["instances"], gateway["front"]]):
        Path(daemon["pidfile"]).write_text(f"{base + 200 + n}\n")


def test_write_record(tmp_path):
    spec = make_spec(tmp_path)
    payload = {"spec": spec, "spec_digest": "d1", "built_at": "2026-11-30T10:00:00Z"}
    with pytest.raises(lab_layout.LabError, match="no PID"):
        lab_files.write_record(tmp_path, payload)
    write_pids(spec)
    assert lab_files.write_record(tmp_path, payload)["changed"] is True
    assert lab_files.write_record(tmp_path, payload)["changed"] is False
    record = json.loads((tmp_path / "lab.json").read_text())
    assert record["format"] == "inferlab.lab/1"
    assert record["status"] == "up"
    assert record["hosts"][1]["ssh"]["pid"] == 1010
    assert record["hosts"][1]["services"][0]["pid"] == 1011
    assert record["router"]["pid"] == 1099
    assert [i["pid"] for i in record["gateway"]["instances"]] == [1201, 1202]
    assert record["gateway"]["front"]["pid"] == 1203
    assert "pid" not in spec["hosts"][0]["ssh"]  # the spec itself is left alone


def link(operstate="UP", addresses=(), mtu=1500):
    flags = ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"] if operstate == "UP" else ["BROADCAST", "MULTICAST"]
    return {"operstate": operstate, "flags": flags, "mtu": mtu,
            "addr_info": [{"family": "inet", "local": a, "prefixlen": p} for a, p in addresses]}


class FakeProbe:
    """A healthy lab unless told otherwise."""

    def __init__(self, spec, dead_pids=(), missing_netns=(), down_links=(), bad_health=()):
        self.spec, self.dead_pids, self.missing_netns = spec, set(dead_pids), set(missing_netns)
        self.down_links, self.bad_health = set(down_links), set(bad_health)

    def _host(self, netns):
        return next(h for h in self.spec["hosts"] if h["netns"] == netns)

    def netns_exists(self, netns):
        return netns not in self.missing_netns

    def root_link(self, ifname):
        host = next(h for h in self.spec["hosts"] if h["management"]["controller_interface"] == ifname)
        return link(addresses=[(host["management"]["controller_address"], 30)])

    def netns_link(self, netns, ifname):
        if netns in self.missing_netns:
            return None
        host = self._host(netns)
        if ifname == "thunderbolt0":
            state = "DOWN" if netns in self.down_links else "UP"
            return link(state, [(host["link"]["address"], 30)])
        return link(addresses=[(host["management"]["address"], 30)])

    def process(self, pid, expect, netns):
        return bool(pid) and pid not in self.dead_pids and netns not in self.missing_netns

    def ssh_banner(self, address, port):
        return True

    def http_ok(self, url):
        return url not in self.bad_health


@pytest.fixture
def built_lab(tmp_path, monkeypatch):
    monkeypatch.setattr(lab_layout, "NETNS_DIR", tmp_path / "netns")  # no stray namespaces from this machine
    lab_dir = tmp_path / "ilab"
    spec = make_spec(lab_dir)
    write_pids(spec)
    lab_files.write_record(lab_dir, {"spec": spec, "spec_digest": "d1", "built_at": "2026-11-30T10:00:00Z"})
    return lab_dir, spec


def test_status_up(built_lab):
    lab_dir, spec = built_lab
    st = lab_status.status(lab_dir, probe=FakeProbe(spec))
    assert st["state"] == "up"
    assert st["healthy"] is True
    assert st["spec_digest"] == "d1"
    host = st["hosts"][0]
    assert host["name"] == "lab-a"
    assert host["management_address"] == "169.254.77.2"
    assert host["link_interface"] == "thunderbolt0"
    assert host["link_address"] == "169.254.177.1"
    assert host["ssh_port"] == 22
    assert host["ssh_key"].endswith("ssh/id_ed25519")
    assert host["link_profile"] == "clean"
    assert host["services"][0]["url"] == "http://169.254.77.2:8000/v1"
    assert all(host["checks"].values())
    text = lab_status.render_status_text(st)
    assert "lab ilab: up" in text
    assert "lab-b" in text and "original-b http://169.254.77.6:8000/v1 ok" in text
    assert st["router"]["healthy"] is True
    assert "router http://169.254.77.1:8100 over http://169.254.77.2:8000, http://169.254.77.6:8000: ok" in text
    assert st["gateway"]["healthy"] is True
    assert "litellm-a ok, litellm-b ok, front ok" in text


def test_status_of_a_lab_without_a_router(tmp_path, monkeypatch):
    """inventory/lab/hosts-norouter.yml: the role writes ``router: {}``; the lab is up without one and says so."""
    monkeypatch.setattr(lab_layout, "NETNS_DIR", tmp_path / "netns")
    lab_dir = tmp_path / "ilab"
    spec = {**make_spec(lab_dir), "router": {}}
    write_pids(spec)
    lab_files.write_record(lab_dir, {"spec": spec, "spec_digest": "d1", "built_at": "2026-11-30T10:00:00Z"})
    st = lab_status.status(lab_dir, probe=FakeProbe(spec))
    assert st["state"] == "up" and st["healthy"] is True, st["problems"]
    assert "router" not in st
    assert "router: none (the gateway balances over the original replicas)" in lab_status.render_status_text(st)


def test_a_clusters_switch_is_the_labs_own_and_its_absence_a_problem(tmp_path, monkeypatch):
    """A cluster (hosts-cluster.yml): lab.json names the switch's namespace and has no direct-link daemon; the
    namespace is the lab's own, not a stray one, and without it no host reaches another."""
    monkeypatch.setattr(lab_layout, "NETNS_DIR", tmp_path / "netns")
    (tmp_path / "netns").mkdir()
    for name in ("ilab-a", "ilab-b", "ilab-sw"):
        (tmp_path / "netns" / name).write_text("")
    lab_dir = tmp_path / "ilab"
    spec = {**make_spec(lab_dir), "shape": "cluster", "link": {}, "switch": {"netns": "ilab-sw", "bridge": "br0"}}
    del spec["tc_module"]  # a fabric's ports carry no link profile: its status needs no tc module
    for host, flow in zip(spec["hosts"], (None, 35.8), strict=True):
        host["link"].pop("profile", None)
        host["link"]["fabric"] = {"port_mbit": 93.0, "flow_mbit": flow}
    write_pids(spec)
    lab_files.write_record(lab_dir, {"spec": spec, "spec_digest": "d1", "built_at": "2026-11-30T10:00:00Z"})
    st = lab_status.status(lab_dir, probe=FakeProbe(spec))
    assert st["healthy"] is True and st["stray_netns"] == [] and "link" not in st, st["problems"]
    assert st["switch"] == {"netns": "ilab-sw", "present": True}
    assert [h["link_profile"] for h in st["hosts"]] == ["fabric 93 Mbit/s",
                                                        "fabric 93 Mbit/s, suspect: 35.8 Mbit/s a flow"]
    st = lab_status.status(lab_dir, probe=FakeProbe(spec, missing_netns={"ilab-sw"}))
    assert st["problems"] == ["the switch's namespace ilab-sw is missing: no host reaches another"]


@pytest.mark.parametrize("kwargs, words", [
    ({"dead_pids": {1011}}, "service original-b (pid 1011) is not running"),
    ({"dead_pids": {1000}}, "sshd (pid 1000) is not running in ilab-a"),
    ({"missing_netns": {"ilab-b"}}, "network namespace ilab-b is missing"),
    ({"down_links": {"ilab-a"}}, "ilab-a:thunderbolt0 is missing or down"),
    ({"bad_health": {"http://169.254.77.2:8000/health"}}, "does not answer 200"),
    ({"dead_pids": {1099}}, "router (pid 1099) is not running"),
    ({"bad_health": {"http://169.254.77.1:8100/readiness"}}, "router: http://169.254.77.1:8100/readiness does not"),
    ({"dead_pids": {1201}}, "gateway: instance litellm-a (pid 1201) is not running"),
    ({"bad_health": {"http://169.254.77.1:4000/health/readiness"}},
     "gateway: nginx: http://169.254.77.1:4000/health/readiness does not answer 200"),
    ({"bad_health": {"http://169.254.77.1:8200/health"}}, "gateway: large-model server"),
])
def test_status_degraded(built_lab, kwargs, words):
    lab_dir, spec = built_lab
    st = lab_status.status(lab_dir, probe=FakeProbe(spec, **kwargs))
    assert st["state"] == "degraded"
    assert st["healthy"] is False
    assert any(words in p for p in st["problems"]), st["problems"]
    assert "problem:" in lab_status.render_status_text(st)


@pytest.mark.parametrize("kwargs, restart", [
    ({}, []),
    ({"dead_pids": {1011}}, [{"kind": "service", "host": "lab-b", "name": "original-b"}]),
    ({"dead_pids": {1099}}, [{"kind": "router"}]),
    ({"dead_pids": {1001, 1099}}, [{"kind": "service", "host": "lab-a", "name": "original-a"}, {"kind": "router"}]),
    # anything but a stopped service or router means a rebuild
    ({"dead_pids": {1000}}, None),
    ({"dead_pids": {1011}, "down_links": {"ilab-b"}}, None),
    ({"bad_health": {"http://169.254.77.2:8000/health"}}, None),
    ({"bad_health": {"http://169.254.77.1:8100/readiness"}}, None),
    ({"dead_pids": {1201}}, None),
    ({"dead_pids": {1011, 1201}}, None),
    ({"missing_netns": {"ilab-b"}}, None),
])
def test_status_restart_plan(built_lab, kwargs, restart):
    """What `lab up` may start again alone instead of rebuilding the lab (roles/lab/tasks/build.yml)."""
    lab_dir, spec = built_lab
    st = lab_status.status(lab_dir, probe=FakeProbe(spec, **kwargs))
    assert st["restart"] == restart, st["problems"]
    text = lab_status.render_status_text(st)
    if restart:
        assert "`inferlab lab up` would start again: " + ", ".join(r.get("name", "router") for r in restart) in text
    elif restart is None:
        assert "`inferlab lab up` would remove the lab and build it again" in text
    else:
        assert "`inferlab lab up` would" not in text


def test_status_restart_plan_of_a_lab_not_built(tmp_path, monkeypatch):
    monkeypatch.setattr(lab_layout, "NETNS_DIR", tmp_path / "netns")
    assert lab_status.status(tmp_path / "ilab")["restart"] is None


def test_status_follows_a_restarted_daemon_through_its_pidfile(built_lab):
    """A service paused and resumed, or a gateway instance restarted with another config, runs under a new pid:
    the status reads the pidfile, not the pid lab.json recorded at build time."""
    lab_dir, spec = built_lab
    Path(spec["hosts"][1]["services"][0]["pidfile"]).write_text("2011\n")
    Path(spec["gateway"]["instances"][0]["pidfile"]).write_text("2201\n")
    st = lab_status.status(lab_dir, probe=FakeProbe(spec, dead_pids={1011, 1201}))
    assert st["state"] == "up", st["problems"]
    assert st["hosts"][1]["services"][0]["pid"] == 2011
    assert st["gateway"]["daemons"]["litellm-a"]["pid"] == 2201
    Path(spec["gateway"]["instances"][0]["pidfile"]).unlink()  # no pidfile: the recorded pid
    assert lab_status.current_pid(spec["gateway"]["instances"][0] | {"pid": 1201}) == 1201


def started(argv: list[str], marker: str) -> subprocess.Popen:
    """A child whose /proc cmdline already names ``marker`` (right after fork it still shows the parent's)."""
    proc = subprocess.Popen(argv, start_new_session=True)
    deadline = time.monotonic() + 10
    while marker not in (lab_processes.proc_cmdline(proc.pid) or "") and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc


def test_stop_pidfiles_stops_the_gateways_daemons_by_their_directory(tmp_path):
    gw = tmp_path / "gateway"
    (gw / "run").mkdir(parents=True)
    # a process whose command line names the gateway directory, as nginx's -p and LiteLLM's --config do
    proc = started([sys.executable, "-c", "import time; time.sleep(30)", f"{gw}/"], f"{gw}/")
    foreign = started(["sleep", "30"], "sleep")
    try:
        (gw / "run" / "litellm-a.pid").write_text(f"{proc.pid}\n")
        (gw / "run" / "nginx.pid").write_text(f"{foreign.pid}\n")  # does not name the gateway dir: left alone
        result = lab_processes.stop_pidfiles(tmp_path)
        assert sorted(r["state"] for r in result["results"]) == ["mismatch", "stopped"]
        assert proc.wait(timeout=5) == -signal.SIGTERM
        assert foreign.poll() is None
    finally:
        for p in (proc, foreign):
            if p.poll() is None:
                p.kill()
            p.wait()


def test_stop_pidfiles_stops_a_prober_left_on_the_controller(tmp_path):
    run = tmp_path / "controller" / "state" / "run"
    run.mkdir(parents=True)
    proc = started([sys.executable, "-c", "import time; time.sleep(30)", "--api-key-file",
                    f"{tmp_path}/gateway/master_key"], f"{tmp_path}/gateway")
    try:
        (run / "continuity-killed-run.pid").write_text(f"{proc.pid}\n")
        result = lab_processes.stop_pidfiles(tmp_path)
        assert [r["state"] for r in result["results"]] == ["stopped"]
        assert proc.wait(timeout=5) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_status_not_built(tmp_path, monkeypatch):
    monkeypatch.setattr(lab_layout, "NETNS_DIR", tmp_path / "netns")
    st = lab_status.status(tmp_path / "nothing")
    assert st["state"] == "down"
    assert st["built"] is False
    assert "not built" in lab_status.render_status_text(st)


def test_status_leftovers_without_lab_json(tmp_path, monkeypatch):
    netns = tmp_path / "netns"
    netns.mkdir()
    for name in ("ilab-a", "imol-a", "other"):
        (netns / name).touch()
    monkeypatch.setattr(lab_layout, "NETNS_DIR", netns)
    inventory = tmp_path / "inv"
    inventory.mkdir()
    (inventory / "hosts.yml").write_text("all:\n  vars:\n    inferlab_lab_name: ilab\n    inferlab_lab_octet: 77\n")
    monkeypatch.setattr(lab_layout, "LAB_ROOT", tmp_path / "labs")
    st = lab_status.status(inventory / "hosts.yml")
    assert st["lab"] == "ilab"
    assert st["state"] == "degraded"
    assert st["stray_netns"] == ["ilab-a"]


def test_status_rejects_unknown_format(built_lab):
    lab_dir, _spec = built_lab
    (lab_dir / "lab.json").write_text(json.dumps({"format": "something/9"}))
    with pytest.raises(lab_layout.LabError, match="format"):
        lab_status.status(lab_dir)


def test_lab_dir_from_the_repo_inventory():
    name, lab_dir = lab_status.resolve_lab(REPO_ROOT / "inventory" / "lab" / "hosts.yml")
    assert (name, lab_dir) == ("ilab", Path("/var/lib/inferlab-lab/ilab"))
    assert lab_status.resolve_lab(REPO_ROOT / "inventory" / "lab") == (name, lab_dir)


def test_lab_dir_from_a_second_lab_sharing_group_vars(tmp_path):
    (tmp_path / "group_vars").symlink_to(REPO_ROOT / "inventory" / "lab" / "group_vars")
    (tmp_path / "hosts.yml").write_text("all:\n  vars:\n    inferlab_lab_name: imol\n    inferlab_lab_octet: 78\n")
    assert lab_status.resolve_lab(tmp_path / "hosts.yml") == ("imol", Path("/var/lib/inferlab-lab/imol"))


def test_lab_dir_from_a_molecule_ephemeral_inventory(tmp_path):
    """Molecule links the hosts file into its inventory directory as ``hosts``, beside its own
    ansible_inventory.yml; the lab must still be found (else lab status reads as down and checks go hollow)."""
    (tmp_path / "group_vars").symlink_to(REPO_ROOT / "inventory" / "lab" / "group_vars")
    (tmp_path / "hosts").symlink_to(REPO_ROOT / "molecule" / "shared" / "inventory" / "hosts.yml")
    (tmp_path / "ansible_inventory.yml").write_text("all:\n  hosts:\n    lab-a: {}\n")
    assert lab_status.resolve_lab(tmp_path) == ("imol", Path("/var/lib/inferlab-lab/imol"))


def test_lab_dir_from_an_inventory_directory_without_hosts(tmp_path):
    (tmp_path / "ansible_inventory.yml").write_text("all:\n  hosts:\n    lab-a: {}\n")
    with pytest.raises(lab_layout.LabError, match="holds no hosts.yml"):
        lab_status.lab_dir_from_inventory(tmp_path)


def test_lab_dir_from_an_inventory_without_a_lab(tmp_path):
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    gpu1: {}\n")
    with pytest.raises(lab_layout.LabError, match="inferlab_lab_name"):
        lab_status.resolve_lab(tmp_path / "hosts.yml")


# --------------------------------------------------------------------------------------------------------------------
# the link profile in status: read from tc now, classified by the lab's copy of the collection's _tc.py

TC_FIXTURES = FIXTURE_ROOT / "tc"


class TcProbe(FakeProbe):
    """A healthy lab whose hosts' `tc -j qdisc show dev thunderbolt0` print the given fixtures (None: unreadable)."""

    def __init__(self, spec, fixtures, **kwargs):
        super().__init__(spec, **kwargs)
        self.fixtures, self.asked = fixtures, []

    def link_profile(self, netns, ifname, tc):
        self.asked.append((netns, ifname, Path(tc.__file__).name))
        name = self.fixtures.get(netns)
        return None if name is None else tc.classify_output((TC_FIXTURES / f"{name}.json").read_text())


def test_load_tc_loads_a_file_once_and_fails_clearly_without_it(tmp_path):
    copy = tmp_path / "inferlab_tc.py"
    shutil.copyfile(COLLECTION_TC, copy)
    tc = lab_tc_module.load_tc(copy)
    assert Path(tc.__file__) == copy and tc.PROFILES == ("clean", "tx_cliff", "lossy")
    assert lab_tc_module.load_tc(str(copy)) is tc  # one module per file, however named
    with pytest.raises(lab_layout.LabError, match=r"tc module .*/gone\.py is missing .*"
                                                  r"rebuild the lab \(`inferlab lab down && inferlab lab up`\)"):
        lab_tc_module.load_tc(tmp_path / "gone.py")
    (tmp_path / "broken.py").write_text("def (\n")
    with pytest.raises(lab_tc_module.TcModuleError, match="broken.py cannot be loaded"):
        lab_tc_module.load_tc(tmp_path / "broken.py")


def test_status_reads_the_profiles_with_the_labs_own_copy(built_lab):
    lab_dir, spec = built_lab
    record = json.loads((lab_dir / "lab.json").read_text())
    assert record["tc_module"] == str(lab_dir / "lib" / "inferlab_tc.py")
    assert Path(lab_status.lab_tc(record, "lab.json").__file__) == lab_dir / "lib" / "inferlab_tc.py"
    probe = TcProbe(spec, {"ilab-a": "clean_veth", "ilab-b": "clean_veth"})
    assert lab_status.status(lab_dir, probe=probe)["state"] == "up"
    assert [asked[-1] for asked in probe.asked] == ["inferlab_tc.py", "inferlab_tc.py"]


@pytest.mark.parametrize("drop", ["record", "file"])
def test_status_of_a_lab_without_its_tc_module_says_to_rebuild_it(built_lab, drop):
    """A lab built before the lab installed its tc module (lab.json names none), or whose copy is gone: status
    reports it as a problem, never an error (`lab up` and `lab down` read status first), and a rebuild heals it."""
    lab_dir, spec = built_lab
    if drop == "record":
        record = json.loads((lab_dir / "lab.json").read_text())
        del record["tc_module"]
        (lab_dir / "lab.json").write_text(json.dumps(record))
        found = f"{lab_dir / 'lab.json'} names no tc_module"
    else:
        (lab_dir / "lib" / "inferlab_tc.py").unlink()
        found = f"{lab_dir / 'lib' / 'inferlab_tc.py'} is missing"
    probe = TcProbe(spec, {"ilab-a": "clean_veth", "ilab-b": "clean_veth"})
    st = lab_status.status(lab_dir, probe=probe)
    assert probe.asked == []  # no tc module: the recorded profile stands, unjudged
    assert [h["link_profile"] for h in st["hosts"]] == ["clean", "clean"]
    assert st["state"] == "degraded" and st["restart"] is None
    assert len(st["problems"]) == 1 and found in st["problems"][0], st["problems"]
    assert st["problems"][0].endswith("rebuild the lab (`inferlab lab down && inferlab lab up`)")
    assert "problem: " + st["problems"][0] in lab_status.render_status_text(st)


def test_status_reports_the_profile_tc_shows(built_lab):
    lab_dir, spec = built_lab
    probe = TcProbe(spec, {"ilab-a": "clean_veth", "ilab-b": "tx_cliff"})
    st = lab_status.status(lab_dir, probe=probe)
    assert probe.asked == [("ilab-a", "thunderbolt0", "inferlab_tc.py"), ("ilab-b", "thunderbolt0", "inferlab_tc.py")]
    a, b = st["hosts"]
    assert (a["link_profile"], a["link_profile_parameters"]) == ("clean", {})
    assert b["link_profile"] == "tx_cliff"
    assert b["link_profile_parameters"] == {"rate_mbit": 300, "burst_kb": 63.98, "latency_ms": 50}
    assert "169.254.177.2/30 -> 169.254.177.1 up (tx_cliff)" in lab_status.render_status_text(st)
    # the lab's spec sets clean here: a profile a run left behind (and nothing put back) is a fault of the lab
    assert st["state"] == "degraded" and not b["healthy"] and b["checks"]["link_profile"] is False
    assert b["link_profile_expected"] == "clean" and a["checks"]["link_profile"] is True
    assert st["problems"] == ["lab-b: ilab-b:thunderbolt0 has the link profile tx_cliff {'rate_mbit': 300, "
                              "'burst_kb': 63.98, 'latency_ms': 50} (tbf 1ab: alone), not the lab's clean: a run "
                              "changed it and nothing put it back (`inferlab lab up` rebuilds the lab)"]
    assert lab_status.restart_plan(st) is None  # a rebuild puts the lab's profile back


def test_status_is_up_with_the_profile_the_lab_sets(built_lab):
    lab_dir, spec = built_lab
    st = lab_status.status(lab_dir, probe=TcProbe(spec, {"ilab-a": "clean_veth", "ilab-b": "clean_pfifo_fast"}))
    assert st["state"] == "up", st["problems"]


def test_the_expected_profile_is_the_loaded_drivers(tmp_path):
    host = {"sysfs_root": str(tmp_path), "link": {"profile": "lossy"}}
    profiles = {"stock": "lossy", "candidate": "clean"}
    assert lab_status.expected_link_profile(host, None) == "lossy"  # lab.json's, without the daemon's config
    assert lab_status.expected_link_profile(host, profiles) is None  # no driver loaded: the link is being re-made
    (tmp_path / "module" / "thunderbolt_net" / "parameters").mkdir(parents=True)
    assert lab_status.expected_link_profile(host, profiles) == "lossy"
    (tmp_path / "module" / "thunderbolt_net" / "parameters" / "tx_e2e").write_text("Y\n")
    assert lab_status.expected_link_profile(host, profiles) == "clean"


def test_status_with_a_foreign_or_unreadable_profile(built_lab):
    lab_dir, spec = built_lab
    st = lab_status.status(lab_dir, probe=TcProbe(spec, {"ilab-a": "foreign_htb", "ilab-b": None}))
    a, b = st["hosts"]
    assert a["link_profile"] == "foreign" and not a["healthy"]
    assert b["link_profile"] == "clean" and "link_profile_parameters" not in b  # lab.json's, as recorded
    assert b["healthy"] and "link_profile" not in b["checks"]  # unread: not judged


def test_system_probe_reads_tc_in_the_namespace(monkeypatch, tmp_path):
    monkeypatch.setattr(lab_layout, "NETNS_DIR", tmp_path)
    (tmp_path / "ilab-b").touch()
    calls = []

    def fake_run(argv, check=True):
        calls.append(argv)
        out = (TC_FIXTURES / "lossy.json").read_text() if argv[3] == "ilab-b" else "garbage"
        return subprocess.CompletedProcess(argv, 0, stdout=out, stderr="")

    monkeypatch.setattr(lab_status, "run", fake_run)
    monkeypatch.setattr(lab_status, "which", lambda tool: f"/usr/sbin/{tool}")
    probe, tc = lab_status.SystemProbe(), collection_tc()
    found = probe.link_profile("ilab-b", "thunderbolt0", tc)
    assert calls == [["ip", "netns", "exec", "ilab-b", "/usr/sbin/tc", "-j", "qdisc", "show", "dev", "thunderbolt0"]]
    assert found["profile"] == "lossy" and found["parameters"]["pfifo_limit"] == 10
    assert probe.link_profile("ilab-x", "thunderbolt0", tc) is None  # no such namespace: not asked
    (tmp_path / "ilab-c").touch()
    assert probe.link_profile("ilab-c", "thunderbolt0", tc)["profile"] == "unknown"
    monkeypatch.setattr(lab_status, "run",
                        lambda argv, check=True: subprocess.CompletedProcess(argv, 1, "", "no device"))
    assert probe.link_profile("ilab-b", "thunderbolt0", tc) is None


def test_gpu_holders_reads_who_holds_each_gpu_from_the_rendered_snapshot(tmp_path):
    snapshot = tmp_path / "nvml.json"
    document = json.loads((FIXTURE_ROOT / "nvml" / "rtx5090.json").read_text())
    document["gpus"][0]["compute_processes"] = [{"pid": 4100, "name": "sglang::schedul",
                                                 "used_memory_bytes": 27656 * 2**20}]
    snapshot.write_text(json.dumps(document))
    assert lab_status.gpu_holders(str(snapshot)) == [
        {"index": 0, "used_mib": 1024, "total_mib": 32607,
         "processes": [{"pid": 4100, "name": "sglang::schedul", "used_mib": 27656}]}]


@pytest.mark.parametrize("content", [None, "{", '{"gpus": [{"index": 0}]}', '{"gpus": 3}'])
def test_gpu_holders_is_empty_for_a_snapshot_it_cannot_read(tmp_path, content):
    snapshot = tmp_path / "nvml.json"
    if content is not None:
        snapshot.write_text(content)
    assert lab_status.gpu_holders(str(snapshot)) == []


def test_lab_down_kills_what_runs_the_labs_scripts_and_nothing_else(tmp_path):
    """A killed run's dead man's switch on the controller runs the ledger script from the lab's files, in the root
    namespace: `lab down` must stop it (it would fire on a lab that is gone), and only it."""
    script = tmp_path / "ilab" / "gateway" / "state" / "bin" / "inferlab_ledger.py"
    script.parent.mkdir(parents=True)
    script.write_text("import time\ntime.sleep(60)\n")
    other = tmp_path / "elsewhere" / "bin" / "sleeper.py"
    other.parent.mkdir(parents=True)
    other.write_text(script.read_text())
    ours = subprocess.Popen([sys.executable, str(script), "deadman"])
    theirs = subprocess.Popen([sys.executable, str(other)])
    try:
        assert lab_processes.lab_script_pids(tmp_path / "ilab") == [ours.pid]
        result = lab_processes.kill_lab_scripts(tmp_path / "ilab")
        assert result == {"changed": True, "killed": [ours.pid]}
        assert ours.wait(timeout=5) is not None and theirs.poll() is None
        assert lab_processes.kill_lab_scripts(tmp_path / "ilab") == {"changed": False, "killed": []}
    finally:
        for proc in (ours, theirs):
            proc.kill()
            proc.wait()
