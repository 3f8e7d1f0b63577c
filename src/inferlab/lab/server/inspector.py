# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NCCL Inspector's JSON output for the lab's all-reduces, as the profiler plugin writes it (output format v4.0).

On when ``NCCL_PROFILER_PLUGIN`` names a plugin and ``NCCL_INSPECTOR_ENABLE=1``, as NCCL needs both. The dump
directory is ``NCCL_INSPECTOR_DUMP_DIR``, else ``nccl-inspector-<SLURM_JOBID>``, else
``nccl-inspector-unknown-jobid`` (relative to the working directory), created if missing (one level, as the
plugin's ``ensureDir``); the file is ``<hostname>-pid<pid>.log``, one JSON object per line per completed collective.
The lab has no GPU kernel: every collective is timed on the CPU (``coll_timing_source`` ``collective_cpu``), and
NCCL 2.30's default ``NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING=1`` drops such events, as the plugin does, unless set to
0. Messages under ``NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES`` (default 8192) are not tracked. With
``NCCL_INSPECTOR_DUMP_VERBOSE=1`` each record carries ``event_trace_sn`` and ``event_trace_ts`` (the collective's
start and stop in microseconds since the epoch; no kernel events).
"""

from __future__ import annotations

import json
import os
import socket
import threading

FORMAT_VERSION = "v4.0"
DEFAULT_MIN_SIZE_BYTES = 8192
TIMING_SOURCE = "collective_cpu"


def dump_dir(env) -> str:
    if env.get("NCCL_INSPECTOR_DUMP_DIR"):
        return env["NCCL_INSPECTOR_DUMP_DIR"]
    jobid = env.get("SLURM_JOBID", "")
    return f"nccl-inspector-{int(jobid)}" if jobid.strip().lstrip("-").isdigit() else "nccl-inspector-unknown-jobid"


class NcclInspector:
    """Writes one record per completed collective of a communicator (``comm`` its id), rank ``rank`` of ``nranks``."""

    def __init__(self, env, rank: int, nranks: int = 2, nnodes: int = 2):
        self.rank, self.nranks, self.nnodes = rank, nranks, nnodes
        self.enabled = bool(env.get("NCCL_PROFILER_PLUGIN")) and env.get("NCCL_INSPECTOR_ENABLE") == "1"
        self.verbose = env.get("NCCL_INSPECTOR_DUMP_VERBOSE") == "1"
        self.require_kernel_timing = env.get("NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING", "1") != "0"
        self.min_size = int(env.get("NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES") or DEFAULT_MIN_SIZE_BYTES)
        self.host = socket.gethostname()
        self.path = None
        self._lock = threading.Lock()
        self._trace_sn = 0
        if self.enabled:
            directory = dump_dir(env)
            try:
                os.mkdir(directory)
            except FileExistsError:
                pass
            except OSError:
                self.enabled = False  # the plugin says so at INFO and writes nothing
            if os.path.isdir(directory) and os.access(directory, os.W_OK):
                self.path = os.path.join(directory, f"{self.host}-pid{os.getpid()}.log")
            else:
                self.enabled = False

    def completed(self, op: str, sn: int, size: int, start_s: float, stop_s: float, comm: int) -> None:
        """A collective of ``size`` bytes that ran from ``start_s`` to ``stop_s`` (epoch seconds)."""
        if not self.enabled or size < self.min_size or self.require_kernel_timing:
            return
        start_us, stop_us = int(start_s * 1e6), int(stop_s * 1e6)
        exec_us = max(stop_us - start_us, 1)
        algobw = size / (exec_us / 1e6) / 1e9
        busbw = algobw * 2 * (self.nranks - 1) / self.nranks
        perf = {"coll": op, "coll_sn": sn, "coll_msg_size_bytes": size, "coll_exec_time_us": exec_us,
                "coll_timing_source": TIMING_SOURCE, "coll_algobw_gbs": round(algobw, 6),
                "coll_busbw_gbs": round(busbw, 6)}
        with self._lock:
            if self.verbose:
                first = self._trace_sn + 1
                self._trace_sn += 2
                perf["event_trace_sn"] = {"coll_start_sn": first, "coll_stop_sn": first + 1, "kernel_events": []}
                perf["event_trace_ts"] = {"coll_start_ts": start_us, "coll_stop_ts": stop_us, "kernel_events": []}
            record = {"header": {"id": f"{comm:#x}", "rank": self.rank, "n_ranks": self.nranks, "nnodes": self.nnodes},
                      "metadata": {"inspector_output_format_version": FORMAT_VERSION, "git_rev": "",
                                   "rec_mechanism": "nccl_profiler_interface",
                                   "dump_timestamp_us": int(stop_s * 1e6) + 1, "hostname": self.host,
                                   "pid": os.getpid()},
                      "coll_perf": perf}
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record, separators=(",", ":")) + "\n")
