# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""TP mode on loopback: two real processes, NCCL_SOCKET_IFNAME==lo, dist-init on 127.0.0.1."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time

import pytest
from labservers import MODEL, free_port, parse_sse

from ansible_collections.inferlab.distributed.plugins.module_utils._nccl import parse_coll_log
from inferlab.lab.server.tp import STEP

NCCL_LO = {"NCCL_SOCKET_IFNAME": "=lo", "NCCL_DEBUG": "INFO"}
NCCL_LO_COLL = {**NCCL_LO, "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,COLL", "NCCL_DEBUG_TIMESTAMP_LEVELS": "INFO"}
PEER_LOST = "remote process exited or there was a network error"


def tp_flags(dist_port, rank, *extra):
    return ("--tp-size", "2", "--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr",
            f"127.0.0.1:{dist_port}", "--lab-allreduce-bytes", "65536", "--lab-rank-timeout", "10", *extra)


def start_pair(start_server, env=None):
    """Rank 0 (HTTP) and rank 1, both joined and ready (NCCL_LO unless ``env`` says otherwise)."""
    env = env or NCCL_LO
    dist = free_port()
    rank0 = start_server(*tp_flags(dist, 0), env=env, wait=False, name="rank0")
    rank1 = start_server(*tp_flags(dist, 1), env=env, wait=False, name="rank1")
    rank1.wait_ready()
    rank0.wait_ready()
    return rank0, rank1


def test_tp_pair_serves_over_the_link_and_stops_cleanly(start_server):
    rank0, rank1 = start_pair(start_server, env=NCCL_LO_COLL)
    status, headers, _body = rank0.request("GET", "/health")
    assert (status, headers["x-inferlab-server"]) == (200, "tp")
    before = rank0.json("GET", "/get_server_info")["internal_states"][0]["lab_exchange"]
    assert before["interface"] == "lo" and before["peer"].startswith("127.0.0.1<")
    assert before["steps"] >= 1 and before["bytes_sent"] > 0           # the warm-up went over the link
    reply = rank0.json("POST", "/v1/chat/completions", {"model": MODEL, "max_tokens": 20,
                                                        "messages": [{"role": "user", "content": "over the link"}]})
    assert reply["usage"]["completion_tokens"] == 20
    after = rank0.json("GET", "/get_server_info")["internal_states"][0]["lab_exchange"]
    assert after["steps"] - before["steps"] == 20                       # one prefill + 19 decode steps
    assert after["bytes_sent"] - before["bytes_sent"] >= 20 * 65536
    assert after["bytes_received"] - before["bytes_received"] >= 20 * 65536
    with pytest.raises(ConnectionRefusedError):                         # rank 1 serves no HTTP
        socket.create_connection(("127.0.0.1", rank1.port), timeout=1).close()
    for rank, log in ((0, rank0.log_text()), (1, rank1.log_text())):
        assert f"[{rank}] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>" in log
        assert f"[{rank}] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>" in log
        assert f"[{rank}] NCCL INFO Connected all rings" in log
    assert "NCCL INFO Channel 00/02 :    0   1" in rank0.log_text()
    rank0.proc.send_signal(signal.SIGTERM)
    assert (rank0.wait_exit(), rank1.wait_exit()) == (0, 0)
    assert not rank0.pidfile.exists() and not rank1.pidfile.exists()
    assert "TP peer rank 0 shut down" in rank1.log_text()
    for log in (rank0.log_text(), rank1.log_text()):                   # one timed COLL line per step, both ranks
        parsed = parse_coll_log(log)
        assert parsed["problems"] == []
        assert [(r["op"], r["opcount"]) for r in parsed["records"]] == [("AllReduce", n) for n in range(after["steps"])]
        assert all(r["timestamp"] is not None for r in parsed["records"])
        assert sum(r["bytes"] for r in parsed["records"]) == after["bytes_sent"] - STEP.size * after["steps"]


def test_rank1_stopping_stops_rank0_cleanly(start_server):
    rank0, rank1 = start_pair(start_server)
    rank1.proc.send_signal(signal.SIGTERM)
    assert (rank1.wait_exit(), rank0.wait_exit()) == (0, 0)
    assert "TP peer rank 1 shut down" in rank0.log_text()
    assert "Traceback" not in rank0.log_text()


def test_losing_rank1_fails_requests_and_rank0(start_server):
    rank0, rank1 = start_pair(start_server)
    results = {}

    def long_request(kind):
        if kind == "json":
            results[kind] = rank0.request("POST", "/generate", {"text": "long", "sampling_params": {
                "max_new_tokens": 5000}})
        else:
            results[kind] = rank0.request("POST", "/generate", {"text": "long stream", "stream": True,
                                                                "sampling_params": {"max_new_tokens": 5000}})

    threads = [threading.Thread(target=long_request, args=(kind,)) for kind in ("json", "stream")]
    for t in threads:
        t.start()
    time.sleep(0.3)
    rank1.proc.kill()
    for t in threads:
        t.join(timeout=10)
    status, _headers, body = results["json"]
    assert status == 500 and PEER_LOST in json.loads(body)["error"]["message"]
    status, _headers, raw = results["stream"]
    events = parse_sse(raw)
    assert status == 200 and events[-1] == "[DONE]" and PEER_LOST in events[-2]["error"]["message"]
    assert rank0.wait_exit() == 1
    log = rank0.log_text()
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert "NCCL WARN NET/Socket : peer 127.0.0.1<" in log
    assert f"PeerLost: NCCL error in: inferlab/lab/server/tp.py:exchange, {PEER_LOST}" in log
    assert not rank0.pidfile.exists()


def test_a_rank_killed_after_n_steps_takes_the_group_down(start_server):
    dist = free_port()
    rank0 = start_server(*tp_flags(dist, 0), env=NCCL_LO, wait=False, name="rank0")
    rank1 = start_server(*tp_flags(dist, 1), "--lab-kill-after-steps", "30", env=NCCL_LO, wait=False, name="rank1")
    rank1.wait_ready()
    rank0.wait_ready()
    status, _headers, body = rank0.request("POST", "/generate", {"text": "long", "sampling_params": {
        "max_new_tokens": 500}})
    assert status == 500 and PEER_LOST in json.loads(body)["error"]["message"]
    assert rank1.wait_exit() == -signal.SIGKILL
    assert "--lab-kill-after-steps 30: killing this rank (SIGKILL)" in rank1.log_text()
    assert rank0.wait_exit() == 1


def test_no_matching_interface(start_server):
    dist = free_port()
    rank0 = start_server(*tp_flags(dist, 0), env={"NCCL_SOCKET_IFNAME": "=nosuchif0"}, wait=False)
    assert rank0.wait_exit() == 1
    assert "[0] NCCL WARN Bootstrap : no socket interface found" in rank0.log_text()
    gloo = start_server(*tp_flags(dist, 0), env={"NCCL_SOCKET_IFNAME": "=lo", "GLOO_SOCKET_IFNAME": "nosuchif0"},
                        wait=False)
    assert gloo.wait_exit() == 1
    assert "Unable to find address for: nosuchif0" in gloo.log_text()


def test_ranks_that_disagree_both_exit(start_server):
    dist = free_port()
    rank0 = start_server(*tp_flags(dist, 0, "--speculative-algorithm", "NEXTN"), env=NCCL_LO, wait=False)
    rank1 = start_server(*tp_flags(dist, 1), env=NCCL_LO, wait=False)
    assert (rank0.wait_exit(), rank1.wait_exit()) == (1, 1)
    for server in (rank0, rank1):
        assert "TP handshake mismatch: speculative:" in server.log_text()


def test_rank0_answers_503_until_rank1_joins_and_times_out(start_server):
    rank0 = start_server(*tp_flags(free_port(), 0), "--lab-rank-timeout", "1", env=NCCL_LO, wait=False)
    deadline = time.monotonic() + 5
    while True:
        try:
            status = rank0.request("GET", "/health", timeout=1)[0]
            break
        except ConnectionRefusedError:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    assert status == 503 and rank0.request("GET", "/health_generate")[0] == 503
    assert rank0.wait_exit() == 1
    assert "rank 1 did not join" in rank0.log_text()
    assert not rank0.pidfile.exists()
