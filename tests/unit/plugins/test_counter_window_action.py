"""The counters role's window through a real ansible-playbook run on two local hosts: the counter_window action
plugin's three steps (open, close, finish), a real sampler started and stopped through a real ledger, the real
loopback counters, a Thunderbolt fixture tree and a recorded NVML snapshot; what lands in the run directory; and the
refusals, which change nothing."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core
from ansible_collections.inferlab.distributed.plugins.plugin_utils import _counter_window_controller
from ansible_collections.inferlab.distributed.tests.unit.ledger_host import REPO_ROOT, ledger_files
from ansible_collections.inferlab.distributed.tests.unit.playbook_run import ansible_playbook, playbook_env
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, sysfs_tree

HOSTS = ("lab-a", "lab-b")

PLAYBOOK = """\
- name: A counter window on two hosts
  hosts: all
  gather_facts: false
  tasks:
    - name: Open
      ansible.builtin.include_role:
        name: inferlab.distributed.counters
        tasks_from: open
      vars:
        counters_window: "{{ window }}"
      when: open | default(true) | bool

    - name: Let the sampler take a few samples
      ansible.builtin.wait_for:
        timeout: 1

    - name: Close
      ansible.builtin.include_role:
        name: inferlab.distributed.counters
        tasks_from: close
      vars:
        counters_window: "{{ close_window | default(window) }}"

    - name: Keep the fact the role set
      ansible.builtin.copy:
        content: "{{ counters_window_result | default({}) | to_json }}"
        dest: "{{ result_dir }}/result-{{ inventory_hostname }}.json"
        mode: "0644"
"""


@pytest.fixture
def lab(tmp_path):
    tbnet = sysfs_tree("tb_peer", tmp_path / "sys")
    lines = ["[all]"]
    for host in HOSTS:
        lines.append(f"{host} ansible_connection=local ansible_python_interpreter={sys.executable} "
                     f"inferlab_state_dir={tmp_path / ('state-' + host)}")
    (tmp_path / "hosts.ini").write_text("\n".join(lines) + "\n")
    (tmp_path / "window.yml").write_text(PLAYBOOK)
    (tmp_path / "run").mkdir()
    common = {"inferlab_run_dir": str(tmp_path / "run"), "inferlab_link_interface": "lo",
              "inferlab_tbnet_sysfs_root": str(tbnet), "inferlab_nvml_snapshot": str(FIXTURES / "nvml" / "h200.json"),
              "counters_sample_interval_s": 0.2, "window": "w1", "result_dir": str(tmp_path)}
    yield tmp_path, common
    for host in HOSTS:  # never leave a sampler behind
        ledger = tmp_path / f"state-{host}" / "ledger"
        if ledger.exists():
            for entry in _ledger_core.status(str(ledger), host)["entries"]:
                if entry["params"].get("pid"):
                    try:
                        os.kill(int(entry["params"]["pid"]), 9)
                    except ProcessLookupError:
                        pass


def play(lab, *extra, **extravars):
    tmp_path, common = lab
    proc = subprocess.run(
        [ansible_playbook(), "-i", str(tmp_path / "hosts.ini"), str(tmp_path / "window.yml"),
         "-e", json.dumps({**common, **extravars}), *extra],
        env=playbook_env(tmp_path, ANSIBLE_STRATEGY="linear"), capture_output=True, text=True, timeout=180,
        check=False)
    return proc


def results(tmp_path):
    """Each host's counters_window_result after the closing."""
    return [json.loads((tmp_path / f"result-{host}.json").read_text()) for host in HOSTS]


def sampler_entries(tmp_path, host):
    ledger = tmp_path / f"state-{host}" / "ledger"
    return [e for e in _ledger_core.entries(str(ledger), host) if e["kind"] == "sampler"] if ledger.exists() else []


def test_a_window_is_opened_measured_and_closed_on_both_hosts(lab):
    tmp_path = lab[0]
    proc = play(lab)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    run = tmp_path / "run"
    for host in HOSTS:
        window = json.loads((run / "fragments" / "window_w1" / f"{host}.json").read_text())
        assert window["window"] == "w1" and window["host"] == host
        assert window["elapsed_s"] >= 1.0
        assert window["interfaces"]["lo"]["rx_packets"] >= 0 and window["resets"] == []
        assert "CurrEstab" not in window["tcp"]  # a gauge, not a counter
        # both hosts' snapshots were taken in one task each: the skews are over both, and small
        assert window["skew_hosts"] == list(HOSTS)
        assert 0 <= window["skew_open_s"] < 5 and 0 <= window["skew_close_s"] < 5
        assert window["samples"]["path"] == f"windows/w1/samples/{host}.jsonl"
        samples = (run / window["samples"]["path"]).read_text().splitlines()
        assert len(samples) == window["samples"]["count"] >= 2
        assert json.loads(samples[0])["interfaces"]["lo"] is not None
        assert (run / "windows" / "w1" / "samples" / f"{host}.log").exists()
        assert window["link_before"]["peer"] is None  # lo has no Thunderbolt peer
        assert window["nvml_before"] == window["nvml_after"] != {}
        assert window["notes"] == []
        opened = json.loads((run / "windows" / "w1" / "open" / f"{host}.json").read_text())
        assert opened["phase"] == "open" and opened["sampler"]["started"]
        assert opened["open"]["at"] == window["opened_at"]
        closed = json.loads((run / "windows" / "w1" / "close" / f"{host}.json").read_text())
        assert closed["skew_close_s"] == window["skew_close_s"] and closed["sampler_entries"]
        # the sampler was recorded before it started and stopped through the ledger
        assert [e["state"] for e in sampler_entries(tmp_path, host)] == ["undone"]
    assert [r["window"] for r in results(tmp_path)] == ["w1", "w1"]
    assert results(tmp_path)[1] == json.loads((run / "fragments" / "window_w1" / "lab-b.json").read_text())
    # the host files came from the ledger role's one manifest, with its version stamp
    names = [name for _source, name in ledger_files()]
    stamp = {"collection": "inferlab.distributed", "files": names,
             "version": str(yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text())["version"])}
    for host in HOSTS:
        folder = tmp_path / f"state-{host}" / "bin"
        assert sorted(os.listdir(folder)) == sorted([*names, "inferlab_host.json"])
        version = subprocess.run([sys.executable, "-I", str(folder / "inferlab_ledger.py"), "version", "--json"],
                                 capture_output=True, text=True, timeout=60, check=False)
        assert version.returncode == 0, version.stdout + version.stderr
        assert {key: json.loads(version.stdout)[key] for key in stamp} == stamp
    # no task per fragment, per snapshot or per fetch: a window's own tasks (the installs aside) are these
    assert [line.split(" : ", 1)[1].split("]")[0] for line in proc.stdout.splitlines()
            if line.startswith("TASK [inferlab.distributed.counters : ") and "window w1" in line] == [
        "Start the sampler and snapshot the opening of window w1", "Remember the opening of window w1",
        "Snapshot the closing and stop the sampler of window w1", "Record the skews and write the deltas of window w1",
        "Keep the deltas and forget the opening of window w1",
        "Export for node_exporter's textfile collector window w1"]


def test_closing_a_window_never_opened_writes_nothing_and_says_so(lab):
    tmp_path = lab[0]
    proc = play(lab, "-v", open=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert ("Window w1 has no opening snapshot on lab-a (its opening failed or was not run here): no deltas are "
            "written. No sampler of it was recorded in the ledger.") in " ".join(proc.stdout.split())
    assert not (tmp_path / "run" / "fragments").exists()
    assert results(tmp_path) == [{}, {}]


def test_a_bad_window_name_is_refused_before_anything_starts(lab):
    tmp_path = lab[0]
    proc = play(lab, window="../w1")
    assert proc.returncode == 2
    assert ("Opening a counter window needs a name made of letters, digits, '.', '_' and '-' (counters_window, "
            "found '../w1')") in " ".join(proc.stdout.split())
    for host in HOSTS:
        assert sampler_entries(tmp_path, host) == []
    assert not (tmp_path / "run" / "windows").exists()


def test_check_mode_starts_no_sampler_and_says_so_in_the_deltas(lab):
    tmp_path = lab[0]
    proc = play(lab, "--check")
    assert proc.returncode == 0, proc.stdout[-4000:]
    for host in HOSTS:
        assert sampler_entries(tmp_path, host) == []
        window = json.loads((tmp_path / "run" / "fragments" / "window_w1" / f"{host}.json").read_text())
        assert window["notes"] == ["Check mode: no sampler ran in this window."]
        assert window["samples"]["path"] is None and window["samples"]["count"] == 0


def test_the_skew_is_the_spread_of_the_hosts_wall_clocks():
    snapshots = [{"host": "a", "counters": {"time": {"wall": 10.25}}},
                 {"host": "b", "counters": {"time": {"wall": 10.0}}}]
    assert _counter_window_controller.skew(snapshots) == (0.25, ["a", "b"])
    assert _counter_window_controller.skew([]) == (None, [])


def test_a_result_with_unreadable_samples_names_them_and_a_retrain():
    link = {"rx_speed_gbps": 20, "tx_speed_gbps": 20, "rx_lanes": 2, "tx_lanes": 2}
    counters = {"time": {"wall": 1.0, "monotonic": 5.0}, "interfaces": {}, "tcp": {"CurrEstab": 3, "InSegs": 1},
                "tcp_ext": {}}
    opened = {"run_id": "r", "opened_at": "t0", "sampler": {"interval_s": 1.0, "max_s": 9.0},
              "open": {"counters": counters, "link": link, "nvml": {}}}
    after = {"at": "t1", "counters": dict(counters, time={"wall": 2.0, "monotonic": 6.0},
                                          tcp={"CurrEstab": 1, "InSegs": 4}),
             "link": dict(link, tx_lanes=1), "nvml": {}}
    result = _counter_window_controller.window_result(
        "w", "a", opened, after, ["e1"], "windows/w/samples/a", "not json\n",
        '{"event": "stop", "reason": "max_seconds"}\n', "tb0", ["tb0"], False)
    assert result["tcp"] == {"InSegs": 3} and result["resets"] == []
    assert result["link_retrained"] is True
    assert result["link_events"][0]["kind"] == "unreadable_sample"
    assert result["samples"]["stop_reason"] == "max_seconds"
    assert result["notes"] == [
        "The sampler stopped by itself after counters_sampler_max_s (9.0 s), before the window closed: the samples "
        "end early.",
        "The link tb0 changed speed or lanes during the window: 20/20/2/2 -> 20/20/2/1 (rx/tx Gb/s per lane, rx/tx "
        "lanes)."]


def test_an_opening_without_bounds_names_every_variable():
    with pytest.raises(_counter_window_controller.EdgeError,
                       match=r"found 0\.0\) and counters_sampler_max_s \(found 1\.0\)"):
        _counter_window_controller.check_opening("w", "r", "/run", ["lo"], 0.0, 1.0)
    with pytest.raises(_counter_window_controller.EdgeError, match=r"counters_run_id, found ''"):
        _counter_window_controller.check_closing("w", "", "/run")
