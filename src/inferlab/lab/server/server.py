# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Process lifecycle: parse, join the TP group, warm up, serve, and stop (SIGTERM) or die (lost TP peer).

Exit codes: 0 after SIGTERM/SIGINT or when the TP peer shut down cleanly; 1 when the configuration is refused, the
emulated GPU has not the memory (``--lab-gpu-dir``), the ranks cannot join or disagree, or the TP connection breaks;
2 for a malformed command line (argparse).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import asdict
from queue import Empty

from inferlab import __version__
from inferlab.lab.server import gpu
from inferlab.lab.server.api import LabHTTPServer, LabService
from inferlab.lab.server.args import SGLANG_VERSION, ConfigError, parse_args, resolve, server_args_dict
from inferlab.lab.server.cache import PrefixCache
from inferlab.lab.server.engine import DONE, Engine, EngineError, kill_if_due
from inferlab.lab.server.metrics import Metrics
from inferlab.lab.server.tp import (
    DistBackendError,
    Link,
    NcclLog,
    PeerLeft,
    check_gloo_interface,
    connect_to_peer,
    handshake,
    handshake_mismatches,
    listen_for_peer,
    select_interface,
)

SERVER_VERSION = f"inferlab.lab.server {__version__}"
FATAL_GRACE_S = 0.5
PR_SET_NAME = 15  # prctl(2): the calling thread's name, the process's comm for its main thread

log = logging.getLogger("inferlab.lab.server")


def versions() -> dict:
    """What ``--print-versions`` prints: the role compares it across ring hosts."""
    return {"sglang": SGLANG_VERSION, "torch": None, "cuda": None, "nccl": None, "server": SERVER_VERSION}


def setup_logging(level: str, rank: int | None) -> None:
    """SGLang's log lines on stderr: ``[time] message``, ``[time TP0] message`` in TP mode."""
    handler = logging.StreamHandler(sys.stderr)
    tag = "" if rank is None else f" TP{rank}"
    handler.setFormatter(logging.Formatter(f"[%(asctime)s{tag}] %(message)s", datefmt="%Y-%m-%d %H:%M:%S"))
    log.handlers[:] = [handler]
    log.setLevel(level.upper())
    log.propagate = False


def write_pidfile(path: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        fh.write(f"{os.getpid()}\n")
    os.replace(tmp, path)


def remove_pidfile(path: str | None) -> None:
    if not path:
        return
    try:
        with open(path) as fh:
            if fh.read().strip() == str(os.getpid()):
                os.unlink(path)
    except OSError:
        pass


class Lifecycle:
    """The stop signal and the exit code, shared by the signal handlers, the engine and ``main``."""

    def __init__(self):
        self.stop = threading.Event()
        self.exit_code = 0

    def on_signal(self, signum, _frame) -> None:
        log.info("Received signal %d, shutting down", signum)
        self.stop.set()

    def on_fatal(self, clean: bool) -> None:
        self.exit_code = 0 if clean else 1
        self.stop.set()


def handshake_settings(cfg) -> dict:
    """What both ranks must agree on. The model is compared by its config (each host may keep it at its own path,
    as SGLang allows; the sglang_tp role compares the files themselves before launch)."""
    return {"rank": cfg.rank, "tp_size": cfg.args.tp_size, "nnodes": cfg.args.nnodes,
            "model_config": cfg.model_config, "served_model_name": cfg.served_model_name,
            "context_length": cfg.context_length, "allreduce_bytes": cfg.allreduce_bytes,
            "speculative": asdict(cfg.speculative) if cfg.speculative else None, "server": SERVER_VERSION}


def nccl_setup(cfg, nccl: NcclLog) -> tuple[str, str] | None:
    """NCCL's and Gloo's interface choice, logged as they log it; None (after logging why) when there is none."""
    env = os.environ
    for name in ("NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE"):
        if env.get(name):
            nccl.info(f"{name} set by environment to {env[name]}")
    if env.get("GLOO_SOCKET_IFNAME"):
        log.info("GLOO_SOCKET_IFNAME=%s", env["GLOO_SOCKET_IFNAME"])
    gloo_problem = check_gloo_interface(env)
    if gloo_problem:
        log.error("RuntimeError: [enforce fail at gloo/transport/tcp/device.cc] ifa != nullptr. %s", gloo_problem)
        return None
    interface = select_interface(env)
    if interface is None:
        nccl.warn("Bootstrap : no socket interface found")
        log.error("RuntimeError: NCCL found no socket interface (NCCL_SOCKET_IFNAME=%s)",
                  env.get("NCCL_SOCKET_IFNAME", "<unset>"))
        return None
    name, address = interface
    nccl.info(f"Bootstrap : Using {name}:{address}<0>")
    nccl.info("NET/IB : Disabled." if env.get("NCCL_IB_DISABLE") == "1" else "NET/IB : No device found.")
    nccl.info(f"NET/Socket : Using [0]{name}:{address}<0>")
    nccl.info("Using network Socket")
    return interface


def join(cfg, interface, nccl: NcclLog, lifecycle: Lifecycle) -> Link | None:
    """Connect the two ranks and compare their settings; None when stopped or refused (exit code set)."""
    host, port = cfg.dist_init
    timeout = cfg.args.lab_rank_timeout
    try:
        if cfg.rank == 0:
            log.info("Waiting for rank 1 on %s:%d (--lab-rank-timeout %g s)", host, port, timeout)
            sock = listen_for_peer(host, port, timeout, lifecycle.stop)
        else:
            log.info("Connecting to rank 0 at %s:%d from %s:%s", host, port, *interface)
            sock = connect_to_peer(host, port, interface, timeout, lifecycle.stop)
    except (TimeoutError, OSError) as exc:
        log.error("RuntimeError: TP group init failed: %s", exc)
        lifecycle.exit_code = 1
        return None
    if sock is None:
        return None
    mine = handshake_settings(cfg)
    try:
        theirs = handshake(sock, mine, timeout)
    except (OSError, ValueError) as exc:
        log.error("RuntimeError: TP handshake failed: %s", exc)
        sock.close()
        lifecycle.exit_code = 1
        return None
    problems = handshake_mismatches(mine, theirs)
    if problems:
        for problem in problems:
            log.error("TP handshake mismatch: %s", problem)
        log.error("RuntimeError: the TP ranks disagree; both exit")
        sock.close()
        lifecycle.exit_code = 1
        return None
    link = Link(sock, cfg.rank, interface, nccl)
    peer = 1 - cfg.rank
    log.info("TP rank %d joined: %s -> %s over %s", peer, link.local, link.peer, interface[0])
    if cfg.rank == 0:
        nccl.info("Channel 00/02 :    0   1")
        nccl.info("Channel 01/02 :    0   1")
    nccl.info(f"Channel 00/0 : {cfg.rank}[0] -> {peer}[0] [send] via NET/Socket/0")
    nccl.info(f"Channel 00/0 : {peer}[0] -> {cfg.rank}[0] [receive] via NET/Socket/0")
    nccl.info("Connected all rings")
    nccl.info(f"ncclCommInitRank rank {cfg.rank} nranks 2 - Init COMPLETE")
    return link


def serve_follower(cfg, link: Link, lifecycle: Lifecycle) -> int:
    """Rank 1: no HTTP API (like SGLang's non-zero node ranks); answer rank 0's steps until told to stop."""
    log.info("Rank 1 serves TP steps for rank 0 and opens no HTTP port")
    try:
        while link.serve_step(lifecycle.stop):
            kill_if_due(link.steps, cfg.args.lab_kill_after_steps)
    except PeerLeft as exc:
        log.info("%s; the TP group is gone, stopping", exc)
        link.close()
        return 0
    except DistBackendError:
        log.error("Scheduler hit an exception: %s", traceback.format_exc())
        link.close()
        return 1
    link.goodbye()
    return 0


def load(lab: LabService, args, lifecycle: Lifecycle) -> bool:
    """``--lab-ready-after``: the time a real server spends loading its weights after every start (minutes for a
    27B model), with its port open and every request answered 503. The pidfile names the process from the load's
    start, as a daemon's does; False when a signal ended the load."""
    if not args.lab_ready_after:
        return True
    lab.loading = True
    log.info("Loading the model weights (--lab-ready-after %.1f s)", args.lab_ready_after)
    if args.lab_pidfile:
        write_pidfile(args.lab_pidfile)
    stopped = lifecycle.stop.wait(args.lab_ready_after)
    lab.loading = False
    return not stopped


def warm_up(lab: LabService, timeout: float) -> bool:
    """One request through the engine (and, in TP mode, over the link) before the server says it is ready."""
    req = lab.make_request("warmup", [0], "warmup", 1, 1, [], None, stream=False, log_metrics=False)
    try:
        lab.engine.submit(req)
    except EngineError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            item = req.queue.get(timeout=0.2)
        except Empty:
            continue
        if item is DONE:
            return True
        if isinstance(item, EngineError):
            return False
    return False


def serve_api(cfg, interface, nccl: NcclLog, lifecycle: Lifecycle) -> int:
    """Rank 0 or a replica: the HTTP API over the engine; in TP mode after rank 1 joined."""
    args = cfg.args
    metrics = Metrics(cfg.served_model_name)
    engine = Engine(cfg, metrics, PrefixCache(cfg.cache_budget_tokens))
    engine.on_fatal = lifecycle.on_fatal
    lab = LabService(cfg, engine, metrics)
    try:
        httpd = LabHTTPServer((args.host, args.port), lab)
    except OSError as exc:
        log.error("OSError: cannot listen on %s:%d: %s", args.host, args.port, exc.strerror)
        return 1
    http_thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="http",
                                   daemon=True)
    http_thread.start()
    log.info("HTTP API on http://%s:%d (503 until ready)", args.host, httpd.server_address[1])
    link = None
    try:
        if cfg.tp:
            link = join(cfg, interface, nccl, lifecycle)
            if link is None:
                return lifecycle.exit_code
            engine.link = lab.link = link
        engine.start()
        if not load(lab, args, lifecycle):
            if link is not None:
                link.goodbye()
            return lifecycle.exit_code
        if not warm_up(lab, args.lab_rank_timeout):
            log.error("RuntimeError: the warm-up request did not complete")
            return 1
        if args.lab_fault == "hang":
            engine.hang()
            log.warning("--lab-fault hang: requests are accepted, no token will be produced")
        lab.ready = True
        if args.lab_pidfile:
            write_pidfile(args.lab_pidfile)
        log.info("The server is fired up and ready to roll!")
        lifecycle.stop.wait()
        lab.ready = False
        died = engine.failed is not None
        refused = engine.failed_requests if died else engine.stop()
        if link is not None and not died:
            link.goodbye()
        if refused:
            time.sleep(FATAL_GRACE_S)  # let the handlers send their 500s before the process goes
        return lifecycle.exit_code
    finally:
        if link is not None:
            link.close()
        httpd.shutdown()
        httpd.server_close()
        remove_pidfile(args.lab_pidfile)
        log.info("Stopped (exit %d)", lifecycle.exit_code)


def set_title(cfg) -> None:
    """Rename the process as SGLang's scheduler renames itself (setproctitle, which also sets ``comm``, cut to 15
    characters): what NVML's process table and ps show for a real server's GPU process."""
    title = "sglang::scheduler" + (f"_TP{cfg.rank}" if cfg.args.tp_size > 1 else "")
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, title.encode()[:15], 0, 0, 0)


def hold_gpu(cfg) -> bool:
    """Claim the server's GPU memory in ``--lab-gpu-dir`` (none without it); False, logged as PyTorch logs it,
    when the card has not that much free."""
    args = cfg.args
    if not args.lab_gpu_dir:
        return True
    total = gpu.read_device(args.lab_gpu_dir)["gpus"][0]["memory_total_bytes"]
    need = gpu.server_claim_bytes(total, args.mem_fraction_static)
    try:
        gpu.claim(args.lab_gpu_dir, os.getpid(), need)
    except gpu.OutOfMemory as exc:
        log.error("torch.OutOfMemoryError: %s", exc)
        return False
    log.info("Holding %.2f GiB of GPU 0 (%s)", need / gpu.GIB, args.lab_gpu_dir)
    return True


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.print_versions:
        print(json.dumps(versions()))
        return 0
    setup_logging(args.log_level, args.node_rank if args.tp_size > 1 else None)
    try:
        cfg = resolve(args)
    except ConfigError as exc:
        log.error("ValueError: %s", exc)
        return 1
    for warning in cfg.warnings:
        log.warning("%s", warning)
    log.info("%s (sglang %s API), server_args=%s", SERVER_VERSION, SGLANG_VERSION,
             json.dumps(server_args_dict(cfg), sort_keys=True))
    lifecycle = Lifecycle()
    signal.signal(signal.SIGTERM, lifecycle.on_signal)
    signal.signal(signal.SIGINT, lifecycle.on_signal)
    set_title(cfg)
    if not hold_gpu(cfg):
        return 1
    try:
        return run(cfg, lifecycle)
    finally:
        if args.lab_gpu_dir:
            gpu.release(args.lab_gpu_dir, os.getpid())


def run(cfg, lifecycle: Lifecycle) -> int:
    """The server's life after its GPU memory is held: a replica or rank 0's API, or rank 1's steps."""
    args = cfg.args
    nccl = NcclLog(cfg.rank, os.environ)
    interface = None
    if cfg.tp:
        interface = nccl_setup(cfg, nccl)
        if interface is None:
            return 1
    if cfg.tp and cfg.rank == 1:
        link = join(cfg, interface, nccl, lifecycle)
        if link is None:
            return lifecycle.exit_code
        if args.lab_pidfile:
            write_pidfile(args.lab_pidfile)
        try:
            return serve_follower(cfg, link, lifecycle)
        finally:
            remove_pidfile(args.lab_pidfile)
    return serve_api(cfg, interface, nccl, lifecycle)
