"""The lab's direct-link daemon (inferlab.lab.link_daemon): when it brings the link back after a reload, what it reads
of each host's fixture root, the configs it refuses, and the driver's link profile on a real veth pair. Its reload
handling runs for real in the molecule scenarios that reload the driver."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
from tc_logic import COLLECTION_TC, collection_tc

from inferlab.lab import link_daemon as lab_link

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


@pytest.mark.parametrize(
    "profiles, message",
    [
        ({"stock": "fast"}, "driver_profiles maps stock and candidate to one of clean, tx_cliff, lossy"),
        ({"beta": "clean"}, "found {'beta': 'clean'}"),
        (["lossy"], "driver_profiles maps"),
    ],
)
def test_read_config_refuses_driver_profiles_it_cannot_apply(tmp_path, profiles, message):
    path = tmp_path / "link.json"
    path.write_text(json.dumps({"hosts": [HOST, HOST], "login_delay_s": 3, "poll_s": 0.2,
                                "driver_profiles": profiles, "tc_module": str(COLLECTION_TC)}))
    with pytest.raises(lab_link.LinkConfigError, match=re.escape(message)):
        lab_link.read_config(path)


@pytest.mark.parametrize("tc_module, message", [
    (None, "driver_profiles need tc_module, the lab's copy of the collection's tc logic, found None"),
    ("/nonexistent/inferlab_tc.py", "tc module /nonexistent/inferlab_tc.py is missing"),
])
def test_read_config_needs_the_labs_tc_module_for_driver_profiles(tmp_path, tc_module, message):
    """The daemon applies the profiles with the lab's copy of the collection's tc logic (link.json's tc_module),
    never with the collection's own file; a config without a loadable one stops it before its pidfile."""
    config = {"hosts": [HOST, HOST], "login_delay_s": 3, "poll_s": 0.2, "driver_profiles": {"stock": "lossy"}}
    path = tmp_path / "link.json"
    path.write_text(json.dumps({**config, "tc_module": tc_module}))
    with pytest.raises(lab_link.LinkConfigError, match=re.escape(message)):
        lab_link.read_config(path)
    assert lab_link.main(["--config", str(path), "--pidfile", str(tmp_path / "link.pid")]) == 2
    assert not (tmp_path / "link.pid").exists()
    path.write_text(json.dumps({**config, "driver_profiles": {}}))
    assert lab_link.read_config(path)["driver_profiles"] == {}  # no profile to apply: no tc logic needed


def test_each_driver_has_its_profile_and_an_unloaded_one_none():
    config = {"driver_profiles": {"stock": "lossy", "candidate": "clean"}}
    assert [lab_link.driver_profile(config, d) for d in ("stock", "candidate", "absent")] == ["lossy", "clean", None]
    assert lab_link.driver_profile({}, "stock") is None  # no profiles configured: the link is left as it is


SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("tc", path=SBIN), reason="needs root and tc")
def test_the_driver_profiles_go_on_a_new_bare_pair_and_follow_the_driver(monkeypatch):
    """What the daemon does after a reload, on a real veth pair created down and bare in throwaway namespaces: each
    end gets its own host's driver profile, and a repeat changes nothing."""
    monkeypatch.setenv("PATH", SBIN)
    tag = f"{os.getpid() % 100000}{os.urandom(1).hex()}"
    a = {"netns": f"ilk{tag}a", "interface": "thunderbolt0", "mtu": 1500, "sysfs_root": "/nonexistent"}
    b = {**a, "netns": f"ilk{tag}b"}
    config = {"hosts": [a, b], "driver_profiles": {"stock": "lossy", "candidate": "clean"},
              "tc_module": str(COLLECTION_TC)}
    tc = collection_tc()
    try:
        for host in (a, b):
            subprocess.run(["ip", "netns", "add", host["netns"]], check=True)
        assert lab_link.create_link(a, b) == ""

        def shown(host):
            out = subprocess.run(["ip", "netns", "exec", host["netns"], *tc.show_argv("thunderbolt0")],
                                 capture_output=True, text=True, check=True).stdout
            return tc.classify_output(out)["profile"]

        lab_link.apply_driver_profiles(config, ["stock", "candidate"])
        assert (shown(a), shown(b)) == ("lossy", "clean")
        assert lab_link.apply_profile(a, "lossy", tc) == ""  # already there: nothing to run
        lab_link.apply_driver_profiles(config, ["candidate", "stock"])
        assert (shown(a), shown(b)) == ("clean", "lossy")
    finally:
        for host in (a, b):
            subprocess.run(["ip", "netns", "del", host["netns"]], check=False)
