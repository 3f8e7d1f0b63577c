"""A real signal to a real run: SIGINT, SIGTERM and SIGHUP to a process running `api.run` of a playbook that has
changed something and left a process of its own session (as a strategy's worker does) below ansible-playbook.

Each must end the run's whole process tree (that process included: ansible-runner's kill of the playbook's process
group misses it), run the restore, and exit 11. A hang-up also moves the console into the run directory."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from inferlab.run import cancel
from inferlab.system import process_tree

# The playbook changes something, then starts a process in a session of its own that ticks into a file until it is
# killed (its ticks show it ran), and waits.
PLAYBOOK = """\
- name: A run that changes something, then leaves a session leader below ansible-playbook
  hosts: local
  gather_facts: false
  tasks:
    - name: Change something
      ansible.builtin.file:
        path: "{{ inferlab_run_dir }}/changed"
        state: touch
        mode: "0644"

    - name: Start a process of its own session, and wait
      ansible.builtin.shell: "setsid {{ ansible_python_interpreter }} {{ ticker }} {{ inferlab_run_dir }} & sleep 300"
      changed_when: false
"""

TICKER = """\
import os, sys, time
run_dir = sys.argv[1]
with open(f"/proc/{os.getpid()}/stat") as handle:
    start = handle.read().rsplit(")", 1)[1].split()[19]
with open(os.path.join(run_dir, "ticker.tmp"), "w") as handle:
    handle.write(f"{os.getpid()} {start}")
os.rename(os.path.join(run_dir, "ticker.tmp"), os.path.join(run_dir, "ticker"))
while True:
    with open(os.path.join(run_dir, "ticks"), "a") as handle:
        handle.write("tick\\n")
    time.sleep(0.05)
"""

RESTORE = """\
- name: A restore that says it verified
  hosts: local
  gather_facts: false
  tasks:
    - name: Write a verified restore fragment
      ansible.builtin.copy:
        content: '{"host": "local", "time": "2026-12-06T00:00:00Z", "verified": true, "undo": {}, "differences": []}'
        dest: "{{ inferlab_run_dir }}/fragments/restore/local.json"
        mode: "0644"
"""

DRIVER = """\
import sys
from inferlab import api
result = api.run(sys.argv[1], sys.argv[2], {"ticker": sys.argv[5]}, sys.argv[3], restore_playbook=sys.argv[4])
print(result.canceled_by, result.restore, result.problems, file=sys.stderr)
sys.exit(result.rc)
"""


@pytest.fixture
def project(tmp_path):
    files = {"run.yml": PLAYBOOK, "restore.yml": RESTORE, "ticker.py": TICKER, "driver.py": DRIVER,
             "hosts.ini": f"local ansible_connection=local ansible_python_interpreter={sys.executable}\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "fragments").mkdir()
    return tmp_path


def wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_the_whole_tree_restores_and_exits_11(project, sig):
    run_dir = project / "run"
    (run_dir / "fragments" / "restore").mkdir(parents=True)
    driver = subprocess.Popen(
        [sys.executable, str(project / "driver.py"), str(project / "run.yml"), str(project / "hosts.ini"),
         str(run_dir), str(project / "restore.yml"), str(project / "ticker.py")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    ticker = None
    try:
        ticker = wait_for(lambda: (run_dir / "ticker").is_file() and (run_dir / "ticker").read_text().split(),
                          120, "the run's session leader to start")
        pid, start = int(ticker[0]), int(ticker[1])
        assert process_tree.alive(pid, start)
        run_id = json.loads((run_dir / "env" / "extravars").read_text())["inferlab_run_id"]
        assert pid in process_tree.marked(run_id)  # every process of the run carries its mark
        driver.send_signal(sig)
        _out, err = driver.communicate(timeout=180)
        assert driver.returncode == 11, err
        # the session leader was ended by the cancel, before the restore ran: not left to init
        assert not process_tree.alive(pid, start)
        summary = json.loads((run_dir / "run.json").read_text())
        assert summary["status"] == "canceled" and summary["canceled_by"] == sig.name
        assert pid in summary["ended_pids"]
        assert (run_dir / "artifacts" / "restore" / "status").read_text() == "successful"
        console = run_dir / cancel.CONSOLE_AFTER_HANGUP
        if sig == signal.SIGHUP:  # the rest of the console went to the run directory, the terminal being gone
            assert sig.name in console.read_text()
        else:
            assert not console.exists()
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
        if ticker and process_tree.alive(int(ticker[0]), int(ticker[1])):
            os.kill(int(ticker[0]), signal.SIGKILL)


def test_end_tree_kills_children_in_their_own_sessions(tmp_path):
    marker = tmp_path / "grandchild"
    script = textwrap.dedent(f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
        open({str(marker)!r}, "w").write(str(child.pid))
        time.sleep(300)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        grandchild = int(wait_for(lambda: marker.is_file() and marker.read_text(), 30, "the grandchild"))
        assert process_tree.descendants(parent.pid) == [parent.pid, grandchild]
        ended = process_tree.end_tree(parent.pid)
        assert ended == [parent.pid, grandchild]
        parent.wait(timeout=10)
        assert process_tree.stat_fields(grandchild) is None or process_tree.stat_fields(grandchild)[0] in "ZX"
    finally:
        for pid in (parent.pid,):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        parent.wait()


def test_end_tree_of_a_process_that_is_gone_is_nothing():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert process_tree.end_tree(gone.pid) == []


def test_the_restore_playbook_is_not_canceled_by_a_hang_up(tmp_path):
    with cancel.Cancel(tmp_path, "test-run-none", cancel_on_hangup=False) as canceler:
        saved = os.dup(1), os.dup(2)
        try:
            canceler.on_signal(signal.SIGHUP, None)
            os.write(1, b"after the hang-up\n")
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
        assert canceler() is False
        canceler.on_signal(signal.SIGTERM, None)
        assert canceler() is True and canceler.requested_by == "SIGTERM"
    assert "after the hang-up" in (tmp_path / cancel.CONSOLE_AFTER_HANGUP).read_text()


def test_a_marked_orphan_is_ended_by_its_run_id_and_nothing_else_is(tmp_path):
    """A process of the run whose parents are gone (an orphan of init, as after a kill of the whole controller
    process) is found by the run's mark alone; a process of another run, or with no mark, is left alone."""
    pids = tmp_path / "pids"
    spawn = textwrap.dedent(f"""
        import os, subprocess, sys
        pids = []
        for run_id in ("run-mine", "run-other", None):
            env = dict(os.environ, **({{"INFERLAB_RUN_ID": run_id}} if run_id else {{}}))
            if not run_id:
                env.pop("INFERLAB_RUN_ID", None)
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env,
                                     start_new_session=True)
            pids.append(str(child.pid))
        open({str(pids)!r}, "w").write(" ".join(pids))
    """)
    subprocess.run([sys.executable, "-c", spawn], check=True)  # exits at once: its children are orphans of init
    mine, other, unmarked = (int(p) for p in pids.read_text().split())
    try:
        ended = json.loads(subprocess.run([sys.executable, "-m", "inferlab.system.process_tree", "end-run", "run-mine"],
                                          capture_output=True, text=True, check=True).stdout)
        assert ended == {"run_id": "run-mine", "ended": [mine]}
        assert process_tree.stat_fields(mine) is None or process_tree.stat_fields(mine)[0] in "ZX"
        assert process_tree.stat_fields(other)[0] not in "ZX" and process_tree.stat_fields(unmarked)[0] not in "ZX"
    finally:
        for pid in (mine, other, unmarked):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_end_run_needs_a_run_id():
    proc = subprocess.run([sys.executable, "-m", "inferlab.system.process_tree", "end-run"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 2 and "usage: python -m inferlab.system.process_tree end-run RUN_ID" in proc.stderr
