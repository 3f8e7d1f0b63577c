"""Tests of the counter_window module through main(): a real sampler started and stopped through a real ledger, the
real loopback counters, a Thunderbolt fixture tree and a recorded NVML snapshot; and every way an edge fails."""

import json
import os
import signal
import sys
import time

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_proc
from ansible_collections.inferlab.distributed.plugins.modules import counter_window
from ansible_collections.inferlab.distributed.tests.unit.ledger_host import install_ledger
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, run_module, sysfs_tree

HOST = "lab-a"
RUN = "run1"


@pytest.fixture
def tbnet_root(tmp_path):
    return str(sysfs_tree("tb_peer", tmp_path / "sys"))


@pytest.fixture
def state(tmp_path):
    """A host's state directory with the sampler installed as the role installs it."""
    root = tmp_path / "state"
    install_ledger(root / "bin")
    for name in ("windows", "run", "logs"):
        (root / name).mkdir()
    yield root
    for entry in _ledger_core.status(str(root / "ledger"), HOST)["entries"]:  # never leave a sampler behind
        pid = entry["params"].get("pid")
        if pid and _ledger_proc.read_proc_stat(int(pid)) is not None:
            os.kill(int(pid), signal.SIGKILL)


def args(state, tbnet_root, action, window="w1", **extra):
    base = dict(action=action, window=window, run_id=RUN, ledger_dir=str(state / "ledger"), host=HOST,
                pidfile=str(state / "run" / f"sampler-{RUN}-{window}.pid"), interfaces=["lo"],
                tbnet_sysfs_root=tbnet_root,
                nvml_snapshot=str(FIXTURES / "nvml" / "h200.json"))
    if action == "open":
        base["sampler_argv"] = [sys.executable, str(state / "bin" / "inferlab_ledger.py"), "sampler", "start",
                                "--output", str(state / "windows" / f"{RUN}-{window}.jsonl"),
                                "--pidfile", base["pidfile"], "--log", str(state / "logs" / f"{window}.log"),
                                "--interval", "0.05", "--max-seconds", "30", "--interface=lo"]
    base.update(extra)
    return base


def open_entries(state):
    return _ledger_core.status(str(state / "ledger"), HOST)["open"]


def alive(pid):
    info = _ledger_proc.read_proc_stat(pid)
    return info is not None and info["state"] not in ("Z", "X")


def test_open_then_close(state, tbnet_root, tmp_path):
    failed, opened = run_module(counter_window.main, args(state, tbnet_root, "open"))
    assert not failed, opened
    assert opened["changed"] is True
    pid, entry_id = opened["sampler"]["pid"], opened["sampler"]["entry_id"]
    assert alive(pid) and open_entries(state) == [entry_id]
    assert "rx_bytes" in opened["counters"]["interfaces"]["lo"]["statistics"]
    assert "thunderbolt0" in opened["tbnet"]["interfaces"] and opened["nvml"]["gpus"]
    samples = state / "windows" / f"{RUN}-w1.jsonl"
    deadline = time.monotonic() + 10
    while not (samples.exists() and samples.read_text().count("\n") >= 2) and time.monotonic() < deadline:
        time.sleep(0.05)

    files = [str(samples), str(state / "logs" / "nothing.log")]
    failed, closed = run_module(counter_window.main, args(state, tbnet_root, "close", files=files))
    assert not failed, closed
    assert closed["sampler_entries"] == [entry_id] and closed["files_present"] == [str(samples)]
    assert not alive(pid) and open_entries(state) == []
    assert closed["missing"] == []


def test_a_second_opening_of_an_open_window_is_refused_and_changes_nothing(state, tbnet_root, tmp_path):
    failed, opened = run_module(counter_window.main, args(state, tbnet_root, "open"))
    assert not failed, opened
    failed, again = run_module(counter_window.main, args(state, tbnet_root, "open"))
    assert failed
    assert f"window w1 of run {RUN} is already open on {HOST}: ledger entry {opened['sampler']['entry_id']}" \
        in again["msg"]
    assert open_entries(state) == [opened["sampler"]["entry_id"]]
    assert alive(opened["sampler"]["pid"])


def test_an_opening_snapshot_that_fails_stops_the_sampler_it_started(state, tbnet_root, tmp_path):
    failed, result = run_module(counter_window.main, args(state, tbnet_root, "open", interfaces=["lo", "thunderbolt9"]))
    assert failed
    assert result["msg"].startswith(f"Opening counter window w1 on {HOST} failed at the opening snapshot:")
    assert "thunderbolt9" in result["msg"] and result["msg"].endswith("(its sampler was stopped through the ledger)")
    assert open_entries(state) == []
    entries = _ledger_core.status(str(state / "ledger"), HOST)["entries"]
    assert [e["state"] for e in entries] == ["undone"] and not alive(int(entries[0]["params"]["pid"]))


def test_a_sampler_that_does_not_start_leaves_no_open_entry(state, tbnet_root, tmp_path):
    bad = args(state, tbnet_root, "open")
    bad["sampler_argv"] = [sys.executable, str(state / "bin" / "inferlab_ledger.py"), "sampler", "start", "--output",
                           "/nonexistent/dir/x.jsonl", "--pidfile", bad["pidfile"], "--log", "/nonexistent/dir/x.log",
                           "--interface=lo"]
    failed, result = run_module(counter_window.main, bad)
    assert failed
    assert "failed starting its sampler: the sampler did not start" in result["msg"]
    assert "/nonexistent/dir" in result["msg"] and open_entries(state) == []


def test_closing_a_window_never_opened_stops_nothing_and_lists_a_missing_interface(state, tbnet_root, tmp_path):
    failed, result = run_module(counter_window.main,
                                args(state, tbnet_root, "close", window="never", interfaces=["lo", "thunderbolt0"]))
    assert not failed, result.get("msg", result)
    assert result["sampler_entries"] == [] and result["missing"] == ["thunderbolt0"] and result["changed"] is False


def test_a_closing_snapshot_that_fails_still_stops_the_sampler(state, tbnet_root, tmp_path):
    failed, opened = run_module(counter_window.main, args(state, tbnet_root, "open"))
    assert not failed, opened
    bad = tmp_path / "nvml.json"
    bad.write_text("{not json")
    failed, result = run_module(counter_window.main, args(state, tbnet_root, "close", nvml_snapshot=str(bad)))
    assert failed and "failed at the closing snapshot" in result["msg"] and str(bad) in result["msg"]
    assert result["msg"].endswith("(its sampler was stopped through the ledger)")
    assert open_entries(state) == [] and not alive(opened["sampler"]["pid"])


def test_check_mode_starts_and_stops_nothing(state, tbnet_root, tmp_path):
    failed, result = run_module(counter_window.main, dict(args(state, tbnet_root, "open"), _ansible_check_mode=True))
    assert not failed, result.get("msg", result)
    assert result["sampler"] == {"entry_id": None, "pid": None} and result["changed"] is False
    assert not (state / "ledger").exists()
    assert json.dumps(result["counters"])  # the snapshot is still taken
    assert result["msg"].startswith("Check mode: the background sampler of window w1 is not started on ")


def test_a_sampler_start_that_prints_no_pid_is_undone(state, tbnet_root):
    bad = args(state, tbnet_root, "open", sampler_argv=[sys.executable, "-c", "print('started, trust me')"])
    failed, result = run_module(counter_window.main, bad)
    assert failed
    assert "the sampler did not start (exit 0): started, trust me" in result["msg"]
    assert result["msg"].endswith("(its sampler was stopped through the ledger)")
    assert open_entries(state) == []
