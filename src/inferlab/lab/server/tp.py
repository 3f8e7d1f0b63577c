# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tensor parallelism over a real TCP connection, with NCCL's interface rules and log lines.

Interface choice follows NCCL's ``NCCL_SOCKET_IFNAME`` rules: ``=name`` matches exactly, ``^a,b`` excludes, anything
else is a comma-separated list of prefixes; unset, NCCL tries ``ib``, then anything but ``docker``/``lo``, then
``docker``, then ``lo``. Only interfaces with an IPv4 address count (read with ``SIOCGIFADDR``, no commands run).
``GLOO_SOCKET_IFNAME``, when set, must name an interface with an IPv4 address, as torch's Gloo requires.

Rank 0 listens on ``--dist-init-addr``; rank 1 binds its socket to the chosen interface's address (and to the
device with ``SO_BINDTODEVICE`` when root) and connects. Both then exchange a handshake line and refuse to go on when
tp-size, model or speculative settings differ. Every step, rank 0 sends a 24-byte step header plus the payload and
rank 1 answers with a payload of the same size, both directions at once (``poll`` on a non-blocking socket, like
an all-reduce's simultaneous send and receive). A rank that stops cleanly says ``BYE`` first; a connection that
breaks otherwise raises ``PeerLost`` (a ``DistBackendError`` carrying NCCL's words).

Each step is one all-reduce of its payload (the step header is the lab's protocol): with ``NCCL_DEBUG=INFO`` and
COLL in ``NCCL_DEBUG_SUBSYS``, both ranks log its COLL line as NCCL does, the step number as ``opCount``, bf16
(``count`` = payload / 2) or int8 for an odd payload; ``NcclLog`` follows NCCL's timestamp settings.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import select
import socket
import struct
import sys
import threading
import time

from inferlab.lab.server.inspector import NcclInspector

SIOCGIFADDR = 0x8915
SO_BINDTODEVICE = getattr(socket, "SO_BINDTODEVICE", 25)
NCCL_DEFAULT_IFNAME_ORDER = ("ib", "^docker,lo", "docker", "lo")
STEP = struct.Struct("!4sBxxxQQ")
MAGIC = b"ILAB"
KIND_DECODE, KIND_PREFILL, KIND_BYE = 1, 2, 3
STEP_TIMEOUT_S = 300.0
POLL_SLICE_MS = 200
HANDSHAKE_LIMIT = 64 * 1024
BYE_DRAIN_S = 2.0


class DistBackendError(RuntimeError):
    """What torch raises when NCCL fails (the name a rank log shows)."""


class PeerLost(DistBackendError):
    """The TP connection broke: the peer process died or the network failed."""


class PeerLeft(Exception):
    """The TP peer shut down cleanly (it sent BYE)."""


# NCCL's debug settings and their defaults (NCCL 2.26+): INFO lines of these subsystems, timestamps on WARN only.
NCCL_DEFAULT_SUBSYS = "INIT,BOOTSTRAP,ENV"
NCCL_DEFAULT_TIMESTAMP_LEVELS = "WARN"
NCCL_DEFAULT_TIMESTAMP_FORMAT = "[%F %T] "
NCCL_SUBSECONDS = re.compile(r"%([1-9])f")
# ncclDataType_t numbers for the lab's all-reduce: bf16 (2 bytes) when the payload is even, int8 (1 byte) when odd.
NCCL_BFLOAT16, NCCL_INT8 = 9, 0
NCCL_SUM = 0
TP_SIZE = 2


def nccl_flags(value: str | None, default: str) -> tuple[bool, frozenset[str]]:
    """``(inverted, names)`` of a comma-separated NCCL setting: ``^`` first inverts the list; ALL names every one."""
    value = (value or default).upper()
    return value.startswith("^"), frozenset(name.strip() for name in value.lstrip("^").split(",") if name.strip())


def nccl_flag_on(flags: tuple[bool, frozenset[str]], name: str) -> bool:
    inverted, names = flags
    return ("ALL" in names or name in names) != inverted


class NcclLog:
    """NCCL's debug lines on stderr: ``[timestamp ]host:pid:tid [rank] NCCL INFO ...`` with NCCL_DEBUG=INFO (INFO
    lines of the subsystems ``NCCL_DEBUG_SUBSYS`` names), WARN lines always; the timestamp on the levels
    ``NCCL_DEBUG_TIMESTAMP_LEVELS`` names, in ``NCCL_DEBUG_TIMESTAMP_FORMAT`` (``%Nf``: N digits of sub-seconds;
    ``_`` is a space), local time, as NCCL 2.26+ does. ``collective`` writes the COLL line of one collective."""

    def __init__(self, rank: int, env, stream=None):
        self.rank = rank
        self.enabled = env.get("NCCL_DEBUG", "").upper() in ("INFO", "TRACE")
        self.subsystems = nccl_flags(env.get("NCCL_DEBUG_SUBSYS"), NCCL_DEFAULT_SUBSYS)
        self.timestamp_levels = nccl_flags(env.get("NCCL_DEBUG_TIMESTAMP_LEVELS"), NCCL_DEFAULT_TIMESTAMP_LEVELS)
        self.timestamp_format = env.get("NCCL_DEBUG_TIMESTAMP_FORMAT", NCCL_DEFAULT_TIMESTAMP_FORMAT).replace("_", " ")
        self.coll_enabled = self.enabled and nccl_flag_on(self.subsystems, "COLL")
        self.stream = stream or sys.stderr
        self.host = socket.gethostname().split(".")[0]
        self.inspector = NcclInspector(env, rank)

    def _timestamp(self) -> str:
        now = time.time()
        fmt = NCCL_SUBSECONDS.sub(lambda m: f"{int(now % 1 * 10 ** int(m.group(1))):0{m.group(1)}d}",
                                  self.timestamp_format, count=1)
        return time.strftime(fmt, time.localtime(now))

    def _line(self, level: str, message: str) -> None:
        stamp = self._timestamp() if self.timestamp_format and nccl_flag_on(self.timestamp_levels, level) else ""
        print(f"{stamp}{self.host}:{os.getpid()}:{threading.get_native_id()} [{self.rank}] NCCL {level} {message}",
              file=self.stream, flush=True)

    def info(self, message: str, subsystem: str = "INIT") -> None:
        if self.enabled and nccl_flag_on(self.subsystems, subsystem):
            self._line("INFO", message)

    def warn(self, message: str) -> None:
        self._line("WARN", message)

    def completed(self, op_count: int, payload: int, start_s: float, stop_s: float, comm: int) -> None:
        """An all-reduce of ``payload`` bytes done: NCCL Inspector's record of it, where the plugin is on."""
        self.inspector.completed("AllReduce", op_count, payload, start_s, stop_s, comm)

    def collective(self, op_count: int, payload: int, comm: int, sendbuff: int, recvbuff: int) -> None:
        """The COLL line NCCL prints when an AllReduce of ``payload`` bytes is called (no duration; the lab has no
        CUDA stream, so the default one, printed as NCCL prints a NULL pointer)."""
        if not self.coll_enabled:
            return
        datatype, count = (NCCL_BFLOAT16, payload // 2) if payload % 2 == 0 else (NCCL_INT8, payload)
        self._line("INFO", f"AllReduce: opCount {op_count:x} sendbuff {sendbuff:#x} recvbuff {recvbuff:#x} "
                           f"count {count} datatype {datatype} op {NCCL_SUM} root 0 comm {comm:#x} "
                           f"[nranks={TP_SIZE}] stream (nil)")


def ipv4_interfaces() -> list[tuple[str, str]]:
    """``(name, address)`` of every interface with an IPv4 address, in interface-index order."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _index, name in socket.if_nameindex():
            try:
                ifreq = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            found.append((name, socket.inet_ntoa(ifreq[20:24])))
    return found


def match_interfaces(spec: str, names) -> list[str]:
    """The names NCCL_SOCKET_IFNAME ``spec`` selects, in the order given (NCCL's ``matchIfList``)."""
    exclude = spec.startswith("^")
    if exclude:
        spec = spec[1:]
    exact = spec.startswith("=")
    if exact:
        spec = spec[1:]
    wanted = [item.split(":", 1)[0] for item in spec.split(",") if item]

    def hit(name: str) -> bool:
        if not wanted:
            return True
        return any(name == w if exact else name.startswith(w) for w in wanted)

    return [name for name in names if hit(name) != exclude]


def select_interface(env, interfaces=None) -> tuple[str, str] | None:
    """``(name, address)`` NCCL would use for its sockets, or None when nothing matches."""
    interfaces = ipv4_interfaces() if interfaces is None else interfaces
    addresses = dict(interfaces)
    names = [name for name, _address in interfaces]
    spec = env.get("NCCL_SOCKET_IFNAME")
    for candidate in [spec] if spec else NCCL_DEFAULT_IFNAME_ORDER:
        chosen = match_interfaces(candidate, names)
        if chosen:
            return chosen[0], addresses[chosen[0]]
    return None


def check_gloo_interface(env, interfaces=None) -> str | None:
    """torch's complaint when GLOO_SOCKET_IFNAME names an interface without an IPv4 address, else None."""
    wanted = env.get("GLOO_SOCKET_IFNAME")
    if not wanted:
        return None
    names = {name for name, _address in (ipv4_interfaces() if interfaces is None else interfaces)}
    missing = [name for name in wanted.split(",") if name and name not in names]
    if missing:
        return f"Unable to find address for: {missing[0]} (GLOO_SOCKET_IFNAME={wanted})"
    return None


def _peer_name(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
    except OSError:
        return "<gone>"
    return f"{host}<{port}>"


def _tune(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)


def listen_for_peer(host: str, port: int, timeout: float, stop: threading.Event) -> socket.socket | None:
    """Rank 0: accept rank 1 on the dist-init address. None when stopped first; TimeoutError after ``timeout``."""
    with socket.create_server((host, port)) as server:
        server.settimeout(0.2)
        deadline = time.monotonic() + timeout
        while not stop.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError(f"rank 1 did not join {host}:{port} within {timeout:g} s (--lab-rank-timeout)")
            try:
                conn, _addr = server.accept()
            except TimeoutError:
                continue
            _tune(conn)
            return conn
    return None


def connect_to_peer(host: str, port: int, interface: tuple[str, str], timeout: float,
                    stop: threading.Event) -> socket.socket | None:
    """Rank 1: connect to rank 0 from the chosen interface, retrying until ``timeout`` (rank 0 may start later)."""
    ifname, address = interface
    deadline = time.monotonic() + timeout
    last_error = None
    while not stop.is_set():
        if time.monotonic() > deadline:
            raise TimeoutError(f"could not connect to rank 0 at {host}:{port} from {ifname}:{address} within "
                               f"{timeout:g} s (--lab-rank-timeout); last error: {last_error}")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if os.geteuid() == 0:
                sock.setsockopt(socket.SOL_SOCKET, SO_BINDTODEVICE, ifname.encode())
            sock.bind((address, 0))
            sock.settimeout(1.0)
            sock.connect((host, port))
        except OSError as exc:
            sock.close()
            last_error = exc
            stop.wait(0.3)
            continue
        _tune(sock)
        return sock
    return None


def handshake(sock: socket.socket, mine: dict, timeout: float) -> dict:
    """Send our settings as one JSON line and read the peer's (``ConnectionError`` if it does not come)."""
    sock.settimeout(timeout)
    sock.sendall(json.dumps(mine, sort_keys=True).encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        # Peek first: rank 0's first step may follow its line at once, and it must stay in the socket.
        ahead = sock.recv(4096, socket.MSG_PEEK)
        if not ahead:
            raise ConnectionError("the peer closed the connection during the handshake")
        end = ahead.find(b"\n")
        data += sock.recv(len(ahead) if end < 0 else end + 1)
        if len(data) > HANDSHAKE_LIMIT:
            raise ConnectionError("the peer's handshake line is too long")
    return json.loads(data)


def handshake_mismatches(mine: dict, theirs: dict) -> list[str]:
    """What differs between two ranks' handshakes (the rank itself must differ)."""
    problems = [f"{key}: this rank has {mine.get(key)!r}, rank {theirs.get('rank')} has {theirs.get(key)!r}"
                for key in sorted(set(mine) | set(theirs)) if key != "rank" and mine.get(key) != theirs.get(key)]
    if mine.get("rank") == theirs.get("rank"):
        problems.append(f"both ranks are rank {mine.get('rank')} (check --node-rank)")
    return problems


class Link:
    """The TP connection once joined: full-duplex step exchanges, liveness checks, and a clean goodbye."""

    def __init__(self, sock: socket.socket, rank: int, interface: tuple[str, str], nccl: NcclLog):
        self.sock = sock
        self.rank = rank
        self.interface = interface
        host, port = sock.getsockname()[:2]
        self.local = f"{host}:{port}"
        self.peer = _peer_name(sock)
        self.nccl = nccl
        self.bytes_sent = 0
        self.bytes_received = 0
        self.steps = 0
        self._out = bytearray(STEP.size)
        self._in = bytearray(STEP.size)
        sock.setblocking(False)
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)

    def stats(self) -> dict:
        return {"interface": self.interface[0], "address": self.local, "peer": self.peer, "steps": self.steps,
                "bytes_sent": self.bytes_sent, "bytes_received": self.bytes_received}

    def _lost(self, step: int, reason: str, cause: BaseException | None = None) -> PeerLost:
        self.nccl.warn(f"NET/Socket : peer {self.peer} step {step}: {reason}")
        error = PeerLost(
            f"NCCL error in: inferlab/lab/server/tp.py:exchange, remote process exited or there was a network "
            f"error, NCCL version 2.27.3-lab\nncclRemoteError: A call failed possibly due to a network error or a "
            f"remote process exiting prematurely.\nLast error:\nNET/Socket : peer {self.peer}: {reason}")
        error.__cause__ = cause
        return error

    def _buffers(self, payload: int) -> tuple[memoryview, memoryview]:
        if len(self._out) < STEP.size + payload:
            self._out = bytearray(STEP.size + payload)
            self._in = bytearray(STEP.size + payload)
        return memoryview(self._out), memoryview(self._in)

    def _duplex(self, out: memoryview, inbox: memoryview, step: int) -> None:
        """Send ``out`` while receiving ``len(inbox)`` bytes; PeerLeft/PeerLost when the other side went away."""
        sent = received = 0
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while sent < len(out) or received < len(inbox):
            events = (select.POLLIN if received < len(inbox) else 0) | (select.POLLOUT if sent < len(out) else 0)
            self._poll.modify(self.sock, events)
            ready = self._poll.poll(POLL_SLICE_MS)
            if not ready:
                if time.monotonic() > deadline:
                    raise self._lost(step, f"no progress for {STEP_TIMEOUT_S:g} s (NCCL watchdog timeout)")
                continue
            revents = ready[0][1]
            try:
                if revents & (select.POLLIN | select.POLLERR | select.POLLHUP) and received < len(inbox):
                    n = self.sock.recv_into(inbox[received:])
                    if n == 0:
                        if received >= STEP.size and self._is_bye(inbox[:STEP.size]):
                            raise PeerLeft(f"TP peer rank {1 - self.rank} shut down")
                        raise self._lost(step, "connection closed by the remote peer (recv returned 0)")
                    received += n
                    self.bytes_received += n
                if revents & (select.POLLOUT | select.POLLERR | select.POLLHUP) and sent < len(out):
                    n = self.sock.send(out[sent:])
                    sent += n
                    self.bytes_sent += n
                deadline = time.monotonic() + STEP_TIMEOUT_S
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as exc:
                raise self._lost(step, f"{errno.errorcode.get(exc.errno, exc.errno)}: {exc.strerror}", exc) from exc

    @staticmethod
    def _is_bye(header) -> bool:
        magic, kind, _step, _size = STEP.unpack(bytes(header))
        return magic == MAGIC and kind == KIND_BYE

    def _log_allreduce(self, step: int, payload: int) -> None:
        """The exchange is one all-reduce of ``payload`` bytes (the 24-byte step header is the lab's protocol, like
        NCCL's own): both ranks log it, with the step as opCount, before it starts, as NCCL logs at enqueue."""
        self.nccl.collective(step, payload, id(self), id(self._out), id(self._in))

    def exchange(self, kind: int, payload: int) -> None:
        """Rank 0: one step, ``payload`` bytes each way."""
        out, inbox = self._buffers(payload)
        STEP.pack_into(out, 0, MAGIC, kind, self.steps, payload)
        self._log_allreduce(self.steps, payload)
        start = time.time()
        self._duplex(out[:STEP.size + payload], inbox[:payload], self.steps)
        self.nccl.completed(self.steps, payload, start, time.time(), id(self))
        self.steps += 1

    def serve_step(self, stop: threading.Event) -> bool:
        """Rank 1: wait for rank 0's next step and answer it. False once ``stop`` is set between steps."""
        header = bytearray(STEP.size)
        received = 0
        while received < STEP.size:
            if received == 0 and stop.is_set():
                return False
            self._poll.modify(self.sock, select.POLLIN)
            if not self._poll.poll(POLL_SLICE_MS):
                continue
            try:
                n = self.sock.recv_into(memoryview(header)[received:])
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as exc:
                raise self._lost(self.steps, f"{errno.errorcode.get(exc.errno, exc.errno)}: {exc.strerror}",
                                 exc) from exc
            if n == 0:
                raise self._lost(self.steps, "connection closed by the remote peer (recv returned 0)")
            received += n
            self.bytes_received += n
        magic, kind, step, payload = STEP.unpack(bytes(header))
        if magic != MAGIC:
            raise self._lost(self.steps, f"bad step header {bytes(header)!r}")
        if kind == KIND_BYE:
            raise PeerLeft(f"TP peer rank {1 - self.rank} shut down")
        out, inbox = self._buffers(payload)
        self._log_allreduce(step, payload)
        start = time.time()
        self._duplex(out[STEP.size:STEP.size + payload], inbox[:payload], step)
        self.nccl.completed(step, payload, start, time.time(), id(self))
        self.steps += 1
        return True

    def check_alive(self) -> None:
        """Rank 0 between steps: the peer never speaks first, so readable means it said BYE or went away."""
        self._poll.modify(self.sock, select.POLLIN)
        if not self._poll.poll(0):
            return
        try:
            data = self.sock.recv(STEP.size, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            raise self._lost(self.steps, f"{errno.errorcode.get(exc.errno, exc.errno)}: {exc.strerror}",
                             exc) from exc
        if not data:
            raise self._lost(self.steps, "connection closed by the remote peer (recv returned 0)")
        if len(data) == STEP.size and self._is_bye(data):
            raise PeerLeft(f"TP peer rank {1 - self.rank} shut down")

    def close(self) -> None:
        self.sock.close()

    def goodbye(self) -> None:
        """Tell the peer we stop, then wait (briefly) for it to close, so neither side sees a reset."""
        try:
            self.sock.setblocking(True)
            self.sock.settimeout(BYE_DRAIN_S)
            self.sock.sendall(STEP.pack(MAGIC, KIND_BYE, self.steps, 0))
            self.sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + BYE_DRAIN_S
            while time.monotonic() < deadline and self.sock.recv(65536):
                pass
        except OSError:
            pass
        finally:
            self.close()
