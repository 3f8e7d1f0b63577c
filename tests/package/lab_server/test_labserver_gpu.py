# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab's GPU (src/inferlab/labserver/gpu.py): claims that hold memory while their process lives, the refusal of
a claim that does not fit, and the snapshot rendered from the idle card and the live claims. Process identity is read
from a procfs fixture tree (stat and comm, malformed ones included) and, for a process that is really killed, from
this machine's /proc."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from unit_fixtures import FIXTURE_ROOT

from inferlab.lab.server import gpu

PROC = str(FIXTURE_ROOT / "proc-gpu")
DEVICE = json.loads((FIXTURE_ROOT / "nvml" / "rtx5090.json").read_text())
TOTAL = DEVICE["gpus"][0]["memory_total_bytes"]
IDLE = DEVICE["gpus"][0]["memory_used_bytes"]


@pytest.fixture(name="gpu_dir")
def fixture_gpu_dir(tmp_path):
    (tmp_path / "claims").mkdir()
    idle = json.loads(json.dumps(DEVICE))
    idle["gpus"][0]["compute_processes"] = []
    (tmp_path / "device.json").write_text(json.dumps(idle))
    return tmp_path


def test_start_time_reads_stat_after_the_last_parenthesis():
    assert gpu.start_time(4100, PROC) == "987654"


@pytest.mark.parametrize("pid", [4200, 4300, 4999])  # a zombie (its comm has ") " in it), a cut stat, no process
def test_start_time_is_none_for_a_process_that_holds_nothing(pid):
    assert gpu.start_time(pid, PROC) is None


def test_a_claim_holds_memory_and_shows_the_process_by_name(gpu_dir):
    need = gpu.server_claim_bytes(TOTAL, 0.85)
    document = gpu.claim(gpu_dir, 4100, need, procfs_root=PROC)
    [card] = document["gpus"]
    assert card["memory_used_bytes"] == IDLE + need
    assert card["memory_free_bytes"] == TOTAL - IDLE - need
    assert card["compute_processes"] == [{"pid": 4100, "name": "sglang::schedul", "used_memory_bytes": need}]
    assert json.loads((gpu_dir / gpu.SNAPSHOT).read_text()) == document


def test_a_claim_that_does_not_fit_is_refused_as_pytorch_refuses_it_and_changes_nothing(gpu_dir):
    gpu.claim(gpu_dir, 4100, gpu.server_claim_bytes(TOTAL, None), procfs_root=PROC)
    before = (gpu_dir / gpu.SNAPSHOT).read_text()
    with pytest.raises(gpu.OutOfMemory, match=r"CUDA out of memory\. Tried to allocate 27\.57 GiB\. GPU 0 has a "
                                              r"total capacity of 31\.84 GiB of which 3\.28 GiB is free\. "
                                              r"Including non-PyTorch memory, process 4100 \(sglang::schedul\) has "
                                              r"27\.57 GiB"):
        gpu.claim(gpu_dir, 4101, gpu.server_claim_bytes(TOTAL, None), procfs_root=PROC)
    assert sorted(p.name for p in (gpu_dir / "claims").iterdir()) == ["4100.json"]
    assert (gpu_dir / gpu.SNAPSHOT).read_text() == before


def test_a_claim_on_a_gpu_the_host_lacks_is_refused(gpu_dir):
    with pytest.raises(gpu.OutOfMemory, match="invalid device ordinal"):
        gpu.claim(gpu_dir, 4100, gpu.MIB, gpu=1, procfs_root=PROC)


def test_a_claim_whose_process_is_gone_or_reused_is_dropped(gpu_dir):
    for pid, started in ((4100, "987654"), (4200, "987700"), (4999, "1"), (4100, "5")):
        name = f"{pid}-{started}.json"
        (gpu_dir / "claims" / name).write_text(json.dumps(
            {"pid": pid, "start_time": started, "gpu": 0, "used_memory_bytes": gpu.GIB}))
    (gpu_dir / "claims" / "half.json").write_text('{"pid": 41')  # being written: skipped, kept
    [claim] = gpu.live_claims(gpu_dir, PROC)
    assert claim["pid"] == 4100 and claim["start_time"] == "987654"
    assert sorted(p.name for p in (gpu_dir / "claims").iterdir()) == ["4100-987654.json", "half.json"]


def test_release_gives_the_memory_back(gpu_dir):
    gpu.claim(gpu_dir, 4100, 8 * gpu.GIB, procfs_root=PROC)
    gpu.release(gpu_dir, 4100, procfs_root=PROC)
    [card] = json.loads((gpu_dir / gpu.SNAPSHOT).read_text())["gpus"]
    assert card["memory_used_bytes"] == IDLE and card["compute_processes"] == []


def test_a_killed_process_memory_comes_back_at_the_next_refresh(gpu_dir):
    """SIGKILL: the process never releases; the render (the lab's GPU daemon polls it) frees it as a driver does."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        gpu.claim(gpu_dir, sleeper.pid, 4 * gpu.GIB)
        assert gpu.refresh(gpu_dir) is False  # nothing changed
        os.kill(sleeper.pid, signal.SIGKILL)
        sleeper.wait()
        assert gpu.refresh(gpu_dir) is True
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()
    [card] = json.loads((gpu_dir / gpu.SNAPSHOT).read_text())["gpus"]
    assert card["memory_used_bytes"] == IDLE and card["compute_processes"] == []
    assert not list((gpu_dir / "claims").iterdir())


def test_a_server_holds_its_static_pool_and_its_context():
    assert gpu.server_claim_bytes(32 * gpu.GIB, 0.5) == 16 * gpu.GIB + gpu.CONTEXT_BYTES
    assert gpu.server_claim_bytes(32 * gpu.GIB, None) == int(32 * gpu.GIB * 0.85) + gpu.CONTEXT_BYTES


def test_a_real_server_holds_its_memory_under_sglangs_title_and_a_second_one_does_not_fit(start_server, gpu_dir):
    """Two replicas on one emulated card: the first holds --mem-fraction-static of it and shows as SGLang's
    scheduler; the second is refused with PyTorch's message (exit 1) and holds nothing; the first's SIGTERM gives the
    memory back."""
    first = start_server("--lab-gpu-dir", gpu_dir, "--mem-fraction-static", "0.6")
    [card] = json.loads((gpu_dir / gpu.SNAPSHOT).read_text())["gpus"]
    need = gpu.server_claim_bytes(TOTAL, 0.6)
    assert card["compute_processes"] == [{"pid": first.proc.pid, "name": "sglang::schedul", "used_memory_bytes": need}]
    assert card["memory_used_bytes"] == IDLE + need
    second = start_server("--lab-gpu-dir", gpu_dir, "--mem-fraction-static", "0.6", wait=False)
    assert second.proc.wait(timeout=30) == 1
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in second.log.read_text()
    first.proc.send_signal(signal.SIGTERM)
    assert first.proc.wait(timeout=30) == 0
    [card] = json.loads((gpu_dir / gpu.SNAPSHOT).read_text())["gpus"]
    assert card["memory_used_bytes"] == IDLE and card["compute_processes"] == []
