"""A ledger filesystem that fills in the middle of an undo (RLIMIT_FSIZE at the ledger's size: every append fails
with EFBIG, as on a full disk) stops nothing: the script undoes every entry, reports each mark it could not write,
and a later undo, with room again, finds the changes already undone and records them. The same for the dead man's
switch, whose own mark cannot be written either."""

import json
import os
import resource
import shlex
import subprocess
import sys
from pathlib import Path

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core
from ansible_collections.inferlab.distributed.tests.unit.ledger_host import ledger_script

REPO_ROOT = Path(__file__).resolve().parents[4]
HOST = "lab-a"


def created_files(tmp_path, ledger_dir, count=3):
    """``count`` files a change created (entries with existed: false, applied); their undo removes them."""
    paths = []
    for n in range(count):
        path = tmp_path / f"made-{n}.conf"
        entry = _ledger_core.record(str(ledger_dir), HOST, "file", {"path": str(path), "existed": False})["id"]
        path.write_text("made by the change\n")
        _ledger_core.mark(str(ledger_dir), HOST, entry, "applied")
        paths.append(path)
    return paths


def run_full(argv, ledger_dir):
    """The script with its file-size limit at the ledger's size: no line can be appended (EFBIG)."""
    size = os.path.getsize(_ledger_core.ledger_path(str(ledger_dir), HOST))

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return subprocess.run([sys.executable, str(ledger_script()), *argv], capture_output=True, text=True, timeout=60,
                          preexec_fn=limit, check=False)


def test_a_full_ledger_filesystem_stops_no_undo_and_every_unwritten_mark_is_reported(tmp_path):
    ledger_dir = tmp_path / "ledger"
    paths = created_files(tmp_path, ledger_dir)
    before = _ledger_core.ledger_path(str(ledger_dir), HOST)
    size = os.path.getsize(before)
    proc = run_full(["undo", "--ledger-dir", str(ledger_dir), "--host", HOST, "--json"], ledger_dir)
    result = json.loads(proc.stdout)
    assert proc.returncode == 1, proc.stderr
    assert not any(p.exists() for p in paths)  # all three undone, not one
    assert result["undone"] == [] and len(result["failed"]) == 3
    assert all("could not be written to the ledger" in f["error"] and "File too large" in f["error"]
               for f in result["failed"])
    assert {d["result"] for d in result["details"]} == {"mark_not_written"}
    assert os.path.getsize(before) == size
    assert len(_ledger_core.status(str(ledger_dir), HOST)["open"]) == 3  # nothing was lost: every entry still open

    # room again: the next undo finds the changes undone and records them
    again = subprocess.run([sys.executable, str(ledger_script()), "undo", "--ledger-dir", str(ledger_dir), "--host",
                            HOST,
                            "--json"], capture_output=True, text=True, timeout=60, check=False)
    assert again.returncode == 0, again.stderr
    assert len(json.loads(again.stdout)["undone"]) == 3
    assert _ledger_core.status(str(ledger_dir), HOST)["open"] == []


def test_the_dead_mans_switch_on_a_full_ledger_filesystem_undoes_everything_and_says_what_it_could_not_mark(
        tmp_path):
    ledger_dir = tmp_path / "ledger"
    paths = created_files(tmp_path, ledger_dir)
    own = _ledger_core.record(str(ledger_dir), HOST, "process", {"pid": os.getpid(), "start_time": 1})["id"]
    renew = tmp_path / "renew"
    renew.write_text("")
    os.utime(renew, (1, 1))  # last renewed long ago: it fires at once
    proc = run_full(["deadman", "--ledger-dir", str(ledger_dir), "--host", HOST, "--renew-file", str(renew),
                     "--deadline", "0.2", "--poll", "0.05", "--self-id", own, "--json"], ledger_dir)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["fired"] and not any(p.exists() for p in paths)
    assert len(result["failed"]) == 4  # three unwritten marks, and its own entry's
    assert "cannot mark its own entry undone" in result["failed"][-1]["error"]


def test_a_read_only_ledger_filesystem_stops_no_undo_either(tmp_path):
    """The ledger directory bind-mounted read-only (in a mount namespace of the test's own, as root: the lab's
    namespaces need the same rights): every change is undone, every mark reported unwritten, nothing lost."""
    ledger_dir = tmp_path / "ledger"
    paths = created_files(tmp_path, ledger_dir)
    script = shlex.join([sys.executable, str(ledger_script()), "undo", "--ledger-dir", str(ledger_dir), "--host",
                         HOST, "--json"])
    where = shlex.quote(str(ledger_dir))
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           f"mount --bind {where} {where} && mount -o remount,ro,bind {where} && exec {script}"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert not any(p.exists() for p in paths)
    assert len(result["failed"]) == 3 and all("Read-only file system" in f["error"] for f in result["failed"])
    assert len(_ledger_core.status(str(ledger_dir), HOST)["open"]) == 3  # nothing was lost: every entry still open
