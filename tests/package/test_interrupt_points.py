"""The interruption driver's points (tests/interrupt/interrupt.py): a stage, a delay into it, the dead man's
switch, and the plan a point's run gets."""

import importlib.util
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "interrupt" / "interrupt.py"


@pytest.fixture(name="interrupt", scope="module")
def fixture_interrupt():
    spec = importlib.util.spec_from_file_location("inferlab_interrupt", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("text, expected", [
    ("pause", {"point": "pause", "stage": "pause", "delay_s": 0.0, "deadman": False, "signal": None, "stages": None}),
    ("tp2_nextn+4", {"point": "tp2_nextn+4", "stage": "tp2_nextn", "delay_s": 4.0, "deadman": False,
                     "signal": None, "stages": None}),
    ("deadman:tp2_baseline+2.5@verify,pause,tp2_baseline",
     {"point": "deadman:tp2_baseline+2.5", "stage": "tp2_baseline", "delay_s": 2.5, "deadman": True, "signal": None,
      "stages": ["verify", "pause", "tp2_baseline"]}),
    ("hup:pause+1@verify,pause",
     {"point": "hup:pause+1", "stage": "pause", "delay_s": 1.0, "deadman": False, "signal": signal.SIGHUP,
      "stages": ["verify", "pause"]}),
    ("term:tp2_nextn", {"point": "term:tp2_nextn", "stage": "tp2_nextn", "delay_s": 0.0, "deadman": False,
                        "signal": signal.SIGTERM, "stages": None}),
    ("pause@verify,known_good,prober,fallback,pause",
     {"point": "pause", "stage": "pause", "delay_s": 0.0, "deadman": False, "signal": None,
      "stages": ["verify", "known_good", "prober", "fallback", "pause"]}),
])
def test_a_point_names_its_stage_delay_switch_and_plan(interrupt, text, expected):
    assert interrupt.parse_point(text) == expected


def test_a_malformed_delay_is_refused(interrupt):
    with pytest.raises(ValueError):
        interrupt.parse_point("tp2_nextn+soon")


def test_the_failed_tasks_of_a_run_log_are_its_first_and_last_fatal_lines_on(interrupt, tmp_path):
    log = tmp_path / "ansible.log"
    log.write_text("TASK [a]\nfatal: [lab-a]: FAILED! => stage\nTASK [b]\nfatal: [lab-b]: FAILED! => {\n"
                   "    \"msg\": \"" + "x" * 400 + "\"\n}\nPLAY RECAP\n")
    msg_line = ("    \"msg\": \"" + "x" * 400)[:300]
    assert interrupt.failed_task(log, lines=3) == ["fatal: [lab-a]: FAILED! => stage", "TASK [b]",
                                                   "fatal: [lab-b]: FAILED! => {", "fatal: [lab-b]: FAILED! => {",
                                                   msg_line, "}"]
    log.write_text("TASK [b]\nfatal: [lab-b]: FAILED! => once\n")
    assert interrupt.failed_task(log, lines=3) == ["fatal: [lab-b]: FAILED! => once"]


def test_a_coloured_run_log_gives_its_failed_tasks_without_the_colour(interrupt, tmp_path):
    log = tmp_path / "ansible.log"
    log.write_text("TASK [a]\n\x1b[0;31mfailed: [localhost -> lab-a] (item=lab-a: primary) => stopped\x1b[0m\n"
                   "TASK [b]\n\x1b[0;31mfatal: [localhost]: FAILED! => outcome\x1b[0m\nPLAY RECAP\n")
    assert interrupt.failed_task(log, lines=1) == ["failed: [localhost -> lab-a] (item=lab-a: primary) => stopped",
                                                   "fatal: [localhost]: FAILED! => outcome"]


def test_a_run_log_without_a_failed_task_gives_its_last_lines_and_a_missing_log_nothing(interrupt, tmp_path):
    log = tmp_path / "ansible.log"
    log.write_text("one\ntwo\nthree\n")
    assert interrupt.failed_task(log, lines=2) == ["two", "three"]
    assert interrupt.failed_task(tmp_path / "missing.log") == []


def test_kill_run_removes_the_socket_files_its_process_group_held(interrupt, tmp_path):
    """A real process group holding a listening unix socket named as Mitogen names its multiplexer's, and one
    named otherwise: the kill removes only the first. A socket file of another process is never touched."""
    ours, other, foreign = (tmp_path / "mitogen_unix_t1.sock", tmp_path / "other.sock",
                            tmp_path / "mitogen_unix_foreign.sock")
    script = ("import socket, sys, time\n"
              "held = []\n"
              "for path in sys.argv[1:]:\n"
              "    s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(); held.append(s)\n"
              "print('ready', flush=True); time.sleep(60)\n")
    foreign_socket = socket.socket(socket.AF_UNIX)
    foreign_socket.bind(str(foreign))
    proc = subprocess.Popen([sys.executable, "-c", script, str(ours), str(other)], stdout=subprocess.PIPE,
                            start_new_session=True, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        assert proc.pid in interrupt.group_members(proc.pid)
        assert interrupt.unix_socket_paths([proc.pid]) == {str(ours), str(other)}
        assert interrupt.kill_run(proc) == [str(ours)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        foreign_socket.close()
    assert proc.returncode == -9
    assert not ours.exists() and other.exists() and foreign.exists()


def test_the_switch_wait_finds_nothing_to_wait_for_a_failure_and_an_open_entry_a_wait(interrupt, tmp_path):
    # no ring or gateway ledger at all: nothing fired, so no time is reported (the point fails)
    (tmp_path / "controller" / "state" / "ledger").mkdir(parents=True)
    (tmp_path / "controller" / "state" / "ledger" / "localhost.jsonl").write_text("")
    assert interrupt.wait_for_deadman(tmp_path, 5.0) is None
    ledger = tmp_path / "hosts" / "a" / "state" / "ledger"
    ledger.mkdir(parents=True)
    line = '{"id": "x", "time": "t", "kind": "file", "params": {}, "state": "%s"}\n'
    (ledger / "lab-a.jsonl").write_text(line % "applied")
    assert interrupt.wait_for_deadman(tmp_path, 0.2) is None  # still open when the time is up
    (ledger / "lab-a.jsonl").write_text(line % "applied" + line % "undone")
    assert interrupt.wait_for_deadman(tmp_path, 5.0) == 0.0


def test_the_ledger_locks_name_their_holders_and_an_unreadable_lock_its_problem(interrupt, tmp_path):
    assert not interrupt.ledger_locks(tmp_path)  # no ledger at all: nothing held
    for part, host in (("hosts/a", "lab-a"), ("gateway", "lab-gw")):
        (tmp_path / part / "state" / "ledger").mkdir(parents=True)
        (tmp_path / part / "state" / "ledger" / f"{host}.lock").write_text(
            '{"run_id": "01-pause", "controller": "ctl", "pid": 4242, "time": "t"}\n')
    (tmp_path / "controller" / "state" / "ledger").mkdir(parents=True)
    (tmp_path / "controller" / "state" / "ledger" / "localhost.lock").write_text("")  # killed while taking it
    locks = interrupt.ledger_locks(tmp_path)
    assert {k: v for k, v in locks.items() if "controller" not in k} == {
        "gateway/state/ledger/lab-gw.lock": "01-pause", "hosts/a/state/ledger/lab-a.lock": "01-pause"}
    assert locks["controller/state/ledger/localhost.lock"].startswith("unreadable: ")


def test_the_leftover_scan_finds_its_own_labs_processes_and_not_a_lab_whose_name_it_prefixes(interrupt, tmp_path):
    # two labs at once: imol's directory is a prefix of imolnr's
    for name in ("imol", "imolnr"):
        (tmp_path / name).mkdir()
    (tmp_path / "imol" / "link.json").write_text("{}")
    # one process each, exec'd when Popen returns (a shell's forked child would carry its command line too)
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "iperf3",
                               str(tmp_path / name / "state")]) for name in ("imol", "imolnr")]
    try:
        found = interrupt.leftovers({"hosts": []}, tmp_path / "imol", None, "no-such-run")["processes"]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert [line.split(":")[0] for line in found] == [str(procs[0].pid)]
