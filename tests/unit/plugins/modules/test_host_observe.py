"""Tests of the host_observe module through main(): a real ping over loopback, a real chat server on loopback, the
real loopback counters and addresses, a Thunderbolt fixture tree and a recorded NVML snapshot; and what it reports
or refuses when a part is missing, silent or malformed."""

import json
import os
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from ansible_collections.inferlab.distributed.plugins.module_utils import _host_observe, _nvml
from ansible_collections.inferlab.distributed.plugins.modules import host_observe
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import (
    FIXTURES,
    run_module,
    set_module_args,
    sysfs_tree,
)

REPLY = {"choices": [{"message": {"role": "assistant", "content": "Verified."}}], "usage": {"completion_tokens": 2}}


class ChatHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.asked.append((self.path, body))
        status, payload = self.server.starting.pop(0) if self.server.starting else self.server.answer
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def chat_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatHandler)
    server.daemon_threads = True
    server.asked, server.answer, server.starting = [], (200, REPLY), []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def closed_port():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatHandler)
    port = server.server_address[1]
    server.server_close()
    return port


@pytest.fixture
def host(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    return {"link_interface": "lo", "peer_address": "127.0.0.1", "ping_count": 2, "model_path": str(model),
            "tbnet_sysfs_root": str(sysfs_tree("tb_peer", tmp_path / "sys")),
            "nvml_snapshot": str(FIXTURES / "nvml" / "h200.json")}


def service(port, name="original-a"):
    return {"name": name, "url": f"http://127.0.0.1:{port}/v1/", "model": "m", "gpu_processes": ["python3"]}


def test_reads_everything_in_one_call(host, chat_server):
    args = dict(host, services=[service(chat_server.server_address[1])], prompt="say ok", max_tokens=4)
    failed, result = run_module(host_observe.main, args)
    assert not failed, result.get("msg", result)
    assert result["changed"] is False
    assert result["ping"]["rc"] == 0 and "2 packets transmitted, 2 received" in result["ping"]["stdout"]
    assert [a["local"] for link in json.loads(result["addresses"]) for a in link["addr_info"]] == ["127.0.0.1"]
    if shutil.which("tc", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])):
        assert [q["kind"] for q in json.loads(result["qdiscs"])] == ["noqueue"]  # the loopback's default root
    assert result["net"]["missing"] == [] and result["net"]["interfaces"]["lo"]["operstate"] == "unknown"
    assert "RetransSegs" in result["net"]["tcp"]
    assert result["tbnet"]["peers"][0]["rx_speed_gbps"] == 20.0
    # what the host runs on, from the same fixture root (the tests of _identity read it whole)
    assert result["identity"]["host_router"]["pci_id"] == "1b21:2425" and result["identity"]["missing"] == []
    assert result["nvml"]["source"] == "snapshot" and result["nvml"]["gpus"]
    assert result["storage"]["exists"] is True and result["storage"]["disk_free_bytes"] > 0
    [answer] = result["services"]
    assert answer["status"] == 200 and answer["json"] == REPLY and answer["msg"] is None
    assert answer["service"]["name"] == "original-a"
    [(path, body)] = chat_server.asked
    assert path == "/v1/chat/completions"
    assert body == {"model": "m", "messages": [{"role": "user", "content": "say ok"}], "max_tokens": 4}


def test_silent_and_failing_services_are_observations(host, chat_server):
    chat_server.answer = (500, "model not loaded")
    refused = closed_port()
    args = dict(host, services=[service(chat_server.server_address[1]), service(refused, "original-b")])
    failed, result = run_module(host_observe.main, args)
    assert not failed, result.get("msg", result)
    erroring, silent = result["services"]
    assert erroring["status"] == 500 and erroring["json"] is None
    assert "HTTP 500" in erroring["msg"] and "model not loaded" in erroring["msg"]
    assert silent["status"] is None and silent["msg"].startswith(f"no answer from http://127.0.0.1:{refused}/v1")


def test_after_a_restart_each_service_is_asked_until_it_serves(host, chat_server, monkeypatch):
    """A server that loads answers 503 first: asked again, with growing pauses, until it serves; the answer says how
    long it took and how often it was asked."""
    monkeypatch.setattr(_host_observe, "READY_FIRST_PAUSE_S", 0.05)
    chat_server.starting = [(503, "loading"), (503, "loading")]
    args = dict(host, services=[service(chat_server.server_address[1])], service_ready_timeout_s=30)
    failed, result = run_module(host_observe.main, args)
    assert not failed, result.get("msg", result)
    [answer] = result["services"]
    assert answer["status"] == 200 and answer["msg"] is None
    assert answer["wait"]["attempts"] == 3 and answer["wait"]["ready_timeout_s"] == 30.0
    assert 0.1 <= answer["wait"]["waited_s"] < 30
    assert len(chat_server.asked) == 3


def test_a_service_that_never_serves_is_given_up_at_its_own_deadline(host, monkeypatch):
    monkeypatch.setattr(_host_observe, "READY_FIRST_PAUSE_S", 0.05)
    refused = dict(service(closed_port()), ready_timeout_s=0.5)
    failed, result = run_module(host_observe.main, dict(host, services=[refused], service_ready_timeout_s=600))
    assert not failed, result.get("msg", result)
    [answer] = result["services"]
    assert answer["status"] is None and answer["msg"].startswith("no answer from")
    assert answer["wait"]["ready_timeout_s"] == 0.5 and answer["wait"]["attempts"] >= 2
    assert 0.5 <= answer["wait"]["waited_s"] < 60   # the last try at the deadline


def test_without_a_restart_a_service_is_asked_once(host, chat_server):
    chat_server.starting = [(503, "loading")]
    args = dict(host, services=[dict(service(chat_server.server_address[1]), ready_timeout_s=600)])
    failed, result = run_module(host_observe.main, args)
    assert not failed
    [answer] = result["services"]
    assert answer["status"] == 503
    assert (answer["wait"]["ready_timeout_s"], answer["wait"]["attempts"]) == (0.0, 1)
    assert len(chat_server.asked) == 1


def test_a_reply_that_is_not_json_is_said(host, chat_server):
    chat_server.answer = (200, "<html>proxy</html>")
    failed, result = run_module(host_observe.main, dict(host, services=[service(chat_server.server_address[1])]))
    assert not failed
    assert "the body is not a JSON object" in result["services"][0]["msg"]


def test_a_missing_interface_path_and_peer_are_observations(host, tmp_path):
    args = dict(host, link_interface="thunderbolt9", model_path=str(tmp_path / "nowhere"), ping_count=1)
    failed, result = run_module(host_observe.main, args)
    assert not failed, result.get("msg", result)
    assert result["net"]["missing"] == ["thunderbolt9"] and "thunderbolt9" not in result["net"]["interfaces"]
    assert result["addresses"] == "" and result["qdiscs"] is None
    assert result["ping"]["rc"] not in (0, None) and "thunderbolt9" in result["ping"]["stderr"]
    assert result["storage"] == {"model_path": str(tmp_path / "nowhere"), "exists": False, "disk_free_bytes": None}


def test_malformed_sysfs_fails_naming_the_file(host, tmp_path):
    (tmp_path / "sys" / "bus/thunderbolt/devices/0-1/rx_speed").write_text("fast\n")
    failed, result = run_module(host_observe.main, host)
    assert failed
    assert result["msg"] == (f"malformed rx_speed in {tmp_path}/sys/bus/thunderbolt/devices/0-1/rx_speed: 'fast' "
                             "(expected like '20.0 Gb/s')")


def test_a_malformed_nvml_snapshot_fails(host, tmp_path):
    bad = tmp_path / "nvml.json"
    bad.write_text("{")
    failed, result = run_module(host_observe.main, dict(host, nvml_snapshot=str(bad)))
    assert failed and str(bad) in result["msg"]


def test_nvml_without_pynvml_names_the_snapshot_variable(host):
    def missing():
        raise ImportError("No module named 'pynvml'")
    with pytest.raises(_nvml.NvmlUnavailableError, match=r"nvidia-ml-py .*inferlab_nvml_snapshot.*pynvml"):
        _host_observe.observe("lo", "127.0.0.1", host["model_path"], [], post=None, ping_count=1,
                              tbnet_sysfs_root=host["tbnet_sysfs_root"], import_pynvml=missing)


@pytest.mark.parametrize("args, message", [
    ({"services": [{"name": "a", "url": "http://127.0.0.1:1/v1"}]},
     'every service needs name, url and model (inferlab_original_services); found [{"name": "a", '
     '"url": "http://127.0.0.1:1/v1"}]'),
    ({"ping_count": 0}, "ping_count must be at least 1, got 0"),
])
def test_bad_input_is_refused(host, args, message):
    failed, result = run_module(host_observe.main, dict(host, **args))
    assert failed and result["msg"] == message


def test_ping_that_cannot_run_is_an_observation():
    def no_ping(*args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", "ping")
    started = _host_observe.start_ping("lo", "127.0.0.1", 1, popen=no_ping)
    assert _host_observe.finish_ping(started) == {
        "rc": None, "stdout": "", "stderr": "ping could not run: [Errno 2] No such file or directory: 'ping'"}


def test_argument_spec_matches_documentation():
    options = yaml.safe_load(host_observe.DOCUMENTATION)["options"]
    with set_module_args({"link_interface": "lo", "peer_address": "127.0.0.1", "model_path": "/m"}):
        spec = host_observe.build_module().argument_spec

    def shape(opts):
        return {name: (o["type"], o.get("default"), o.get("required", False), o.get("elements"))
                for name, o in opts.items()}

    assert shape(options) == shape(spec)
    yaml.safe_load(host_observe.EXAMPLES)
    assert set(yaml.safe_load(host_observe.RETURN)) == {"tbnet", "identity", "net", "addresses", "qdiscs", "nvml",
                                                        "ping", "storage", "services", "nic"}


def test_an_ethernet_link_is_read_from_the_real_sysfs(host):
    """link_kind=ethernet adds the NIC, read through the real sysfs (the loopback here: no speed, no PCI function;
    ethtool's answers or its absence are notes) and the NIC in the identity."""
    failed, result = run_module(host_observe.main, dict(host, link_kind="ethernet"))
    assert not failed, result.get("msg", result)
    nic = result["nic"]
    assert nic["interface"] == "lo" and nic["present"] is True and nic["pci"] is None
    assert nic["speed_mbps"] is None and isinstance(nic["mtu"], int)
    assert result["identity"]["nic"] == {"interface": "lo", "driver": nic["driver"],
                                         "driver_version": nic["driver_version"],
                                         "firmware_version": nic["firmware_version"], "speed_mbps": None,
                                         "pci_id": None}


def test_a_thunderbolt_link_reads_no_nic(host):
    failed, result = run_module(host_observe.main, host)
    assert not failed and "nic" not in result and "nic" not in result["identity"]
