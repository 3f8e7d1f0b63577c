"""The lab's direct-link daemon (src/inferlab/lab_link.py): when it brings the link back after a reload, what it reads
of each host's fixture root, and the configs it refuses. Its veth handling runs for real in the molecule scenarios
that reload the driver."""

from __future__ import annotations

import json

import pytest

from inferlab import lab_link

HOST = {"netns": "ilab-1", "interface": "thunderbolt0", "mtu": 1500, "sysfs_root": "/x/sysfs"}


@pytest.mark.parametrize(
    "present, drivers, ready_since, now, login, expected",
    [
        (True, ["stock", "stock"], 5.0, 9.0, "ok", ("none", None)),
        (False, ["absent", "stock"], 5.0, 9.0, "ok", ("wait", None)),  # one host is between rmmod and insmod
        (False, ["stock", "candidate"], None, 9.0, "ok", ("wait", 9.0)),  # the login delay starts now
        (False, ["stock", "candidate"], 9.0, 10.0, "ok", ("wait", 9.0)),
        (False, ["stock", "candidate"], 9.0, 12.0, "ok", ("create", 9.0)),
        (False, ["candidate", "candidate"], 1.0, 99.0, "never", ("refuse", None)),
        (False, ["stock", "stock"], 1.0, 99.0, "never", ("create", 1.0)),  # the stock driver always logs in
    ],
)
def test_next_action_waits_for_both_drivers_and_the_login_delay(present, drivers, ready_since, now, login, expected):
    assert lab_link.next_action(present, drivers, ready_since, now, 3.0, login) == expected


def test_driver_state_reads_the_fixture_root(tmp_path):
    module = tmp_path / "module" / "thunderbolt_net"
    assert lab_link.driver_state(str(tmp_path)) == "absent"
    (module / "parameters").mkdir(parents=True)
    assert lab_link.driver_state(str(tmp_path)) == "stock"
    (module / "parameters" / "tx_e2e").write_text("Y\n")
    assert lab_link.driver_state(str(tmp_path)) == "candidate"


@pytest.mark.parametrize(
    "config, message",
    [
        ({"hosts": [HOST], "login_delay_s": 3, "poll_s": 0.2}, "expected two hosts"),
        ({"hosts": [HOST, {**HOST, "netns": ""}], "login_delay_s": 3, "poll_s": 0.2}, "each host needs"),
        ({"hosts": [HOST, HOST], "login_delay_s": -1, "poll_s": 0.2}, "login_delay_s must be"),
        ({"hosts": [HOST, HOST], "login_delay_s": 3, "poll_s": 0.2, "candidate_login": "later"}, "candidate_login"),
    ],
)
def test_read_config_refuses_what_it_cannot_act_on(tmp_path, config, message):
    path = tmp_path / "link.json"
    path.write_text(json.dumps(config))
    with pytest.raises(lab_link.LinkConfigError, match=message):
        lab_link.read_config(path)


def test_read_config_refuses_a_file_that_is_not_json(tmp_path):
    path = tmp_path / "link.json"
    path.write_text("{")
    with pytest.raises(lab_link.LinkConfigError, match="cannot read"):
        lab_link.read_config(path)
    assert lab_link.main(["--config", str(path), "--pidfile", str(tmp_path / "link.pid")]) == 2
    assert not (tmp_path / "link.pid").exists()
