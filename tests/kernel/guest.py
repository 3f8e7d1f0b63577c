# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Boot, watch and stop the kernel guest that tests/kernel/build_guest.sh builds (tests/kernel/README.md).

Standard library only::

    python3 tests/kernel/guest.py start  --cache DIR --port PORT --pidfile F --console F [--timeout S] [--memory M]
    python3 tests/kernel/guest.py status --pidfile F
    python3 tests/kernel/guest.py stop   --pidfile F [--grace S]

``start`` boots the kernel and initramfs named in ``DIR/guest.json`` under QEMU TCG (``-machine q35 -accel
tcg,tb-size=256 -m 512M -nographic -no-reboot``), with user networking that reaches nothing (``restrict=on``) and
one forward, ``127.0.0.1:PORT`` to the guest's port 22 (``--port 0`` picks a free port). The serial console and
QEMU's own messages go to the console file. QEMU runs in a session of its own and writes its pid to the pidfile;
``start`` returns once the forwarded port answers with an ``SSH-2.0`` banner (QEMU accepts the TCP connection
before sshd listens, so an accept proves nothing), and prints ``{pid, port, ssh_key, seconds, abi, console}``. On a
timeout, or when QEMU exits early, it stops what it started and prints the console's tail.

``stop`` sends SIGTERM, then SIGKILL after ``--grace`` seconds, to the pid in the pidfile, and only when that pid
is a ``qemu-system-x86_64`` whose command line names this pidfile (a pid can be reused). ``status`` says whether
that QEMU runs and whether its forwarded port answers with the banner. Neither looks at QEMU's exit code: it says
nothing about what happened inside the guest.

Exit codes: 0 success (``status``: the guest runs); 1 ``status``: no guest; 2 usage error; 3 the guest did not come
up, or could not be stopped. stdout is one JSON object.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

QEMU = "qemu-system-x86_64"
BANNER = b"SSH-2.0"


class GuestError(Exception):
    """A guest that cannot be started or stopped; the message says why."""


def read_pidfile(pidfile):
    """The pid in ``pidfile``, or None when there is no readable pid."""
    try:
        with open(pidfile, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def proc_argv(pid):
    """The command line of a live (not zombie) process, or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except (OSError, IndexError):
        return None
    if state in ("Z", "X") or not raw:
        return None
    return [arg.decode("utf-8", "replace") for arg in raw.rstrip(b"\0").split(b"\0")]


def is_our_qemu(pid, pidfile):
    """True when ``pid`` is a running qemu-system-x86_64 whose command line names ``pidfile``."""
    argv = proc_argv(pid)
    if not argv or os.path.basename(argv[0]) != QEMU:
        return False
    wanted = {os.path.abspath(pidfile), os.path.realpath(pidfile)}
    return any(arg in wanted for arg in argv[1:])


def forwarded_port(argv):
    """The host port of the ``hostfwd=tcp:127.0.0.1:PORT-:22`` rule in a QEMU command line, or None."""
    for arg in argv:
        for part in arg.split(","):
            if part.startswith("hostfwd=tcp:127.0.0.1:") and part.endswith("-:22"):
                return int(part[len("hostfwd=tcp:127.0.0.1:"):-len("-:22")])
    return None


def ssh_banner(port, timeout=3.0):
    """The first line the server on 127.0.0.1:port sends, or None (refused, closed, silent)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            data = b""
            while b"\n" not in data and len(data) < 256:
                chunk = sock.recv(256)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    line = data.split(b"\n", 1)[0].strip()
    return line if line.startswith(BANNER) else None


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def console_tail(path, lines=40):
    """The last lines of the console file, for error messages."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as exc:
        return f"(console {path} unreadable: {exc})"


def load_guest(cache):
    """``CACHE/guest.json`` as written by build_guest.sh, with its files checked."""
    path = os.path.join(cache, "guest.json")
    try:
        with open(path, encoding="utf-8") as f:
            guest = json.load(f)
    except (OSError, ValueError) as exc:
        raise GuestError(f"cannot read {path} ({exc}): run tests/kernel/build_guest.sh {cache} first") from exc
    for key in ("vmlinuz", "initrd", "ssh_key"):
        if not os.path.isfile(guest.get(key) or ""):
            raise GuestError(f"{path} names {key}={guest.get(key)!r}, which is not a file: rebuild with build_guest.sh")
    return guest


def qemu_argv(qemu, guest, port, pidfile, console, memory):
    """The QEMU command line of the guest."""
    return [
        qemu,
        "-machine", "q35",
        "-accel", "tcg,tb-size=256",
        "-m", memory,
        "-smp", "1",
        "-nographic",
        "-no-reboot",
        "-monitor", "none",
        "-kernel", guest["vmlinuz"],
        "-initrd", guest["initrd"],
        "-append", "console=ttyS0 panic=-1 rdinit=/init",
        "-netdev", f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:22",
        "-device", "virtio-net-pci,netdev=n0,romfile=",
        "-device", "virtio-rng-pci",
        "-chardev", f"file,id=con0,path={console},append=on",
        "-serial", "chardev:con0",
        "-pidfile", pidfile,
    ]


def stop_pid(pid, pidfile, grace):
    """SIGTERM, then SIGKILL after ``grace`` seconds, while ``pid`` is still our QEMU. Returns the last signal sent."""
    sent = None
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if not is_our_qemu(pid, pidfile):
            break
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        sent = sig
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and is_our_qemu(pid, pidfile):
            time.sleep(0.1)
    if is_our_qemu(pid, pidfile):
        raise GuestError(f"QEMU pid {pid} still runs after SIGKILL")
    if read_pidfile(pidfile) == pid:
        try:
            os.unlink(pidfile)
        except OSError:
            pass
    return sent


def cmd_start(args):
    started = time.monotonic()
    cache = os.path.abspath(args.cache)
    pidfile = os.path.abspath(args.pidfile)
    console = os.path.abspath(args.console)
    guest = load_guest(cache)
    qemu = shutil.which(args.qemu)
    if qemu is None:
        raise GuestError(f"{args.qemu} not found: build_guest.sh installs qemu-system-x86")
    old = read_pidfile(pidfile)
    if old is not None and is_our_qemu(old, pidfile):
        raise GuestError(f"a guest already runs with pidfile {pidfile} (pid {old}): stop it first")
    port = args.port or free_port()
    if ssh_banner(port, timeout=0.5) is not None:
        raise GuestError(f"something already answers SSH on 127.0.0.1:{port}")
    for path in (pidfile, console):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        os.unlink(pidfile)
    except FileNotFoundError:
        pass
    argv = qemu_argv(qemu, guest, port, pidfile, console, args.memory)
    with open(console, "w", encoding="utf-8") as log:
        log.write("")
    # Append mode, as QEMU's serial chardev (append=on): both writers add at the end, neither overwrites.
    with open(console, "a", encoding="utf-8") as log:
        log.write(f"inferlab guest.py: {' '.join(argv)}\n")
        log.flush()
        with open(os.devnull, "rb") as devnull:
            proc = subprocess.Popen(argv, stdin=devnull, stdout=log, stderr=log, start_new_session=True,
                                    close_fds=True)
    deadline = started + args.timeout
    try:
        while True:
            if proc.poll() is not None:
                raise GuestError("QEMU exited during boot (its exit code says nothing about the guest); console "
                                 f"{console} ends with:\n{console_tail(console)}")
            if read_pidfile(pidfile) == proc.pid and ssh_banner(port) is not None:
                break
            if time.monotonic() > deadline:
                raise GuestError(f"no SSH-2.0 banner on 127.0.0.1:{port} after {args.timeout:g} s; console "
                                 f"{console} ends with:\n{console_tail(console)}")
            time.sleep(0.5)
    except BaseException:
        if is_our_qemu(proc.pid, pidfile) or proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if read_pidfile(pidfile) == proc.pid:
            os.unlink(pidfile)
        raise
    return {"pid": proc.pid, "port": port, "ssh_key": guest["ssh_key"], "abi": guest.get("abi"),
            "console": console, "seconds": round(time.monotonic() - started, 1)}


def cmd_status(args):
    pidfile = os.path.abspath(args.pidfile)
    pid = read_pidfile(pidfile)
    result = {"running": False, "pid": pid, "port": None, "ssh": False}
    if pid is not None and is_our_qemu(pid, pidfile):
        result["running"] = True
        result["port"] = forwarded_port(proc_argv(pid) or [])
        if result["port"] is not None:
            result["ssh"] = ssh_banner(result["port"]) is not None
    return result


def cmd_stop(args):
    started = time.monotonic()
    pidfile = os.path.abspath(args.pidfile)
    pid = read_pidfile(pidfile)
    if pid is None:
        return {"pid": None, "stopped": False, "message": f"no pid in {pidfile}: nothing to stop"}
    if not is_our_qemu(pid, pidfile):
        return {"pid": pid, "stopped": False,
                "message": f"pid {pid} is not a {QEMU} naming {pidfile}: nothing to stop"}
    sent = stop_pid(pid, pidfile, args.grace)
    return {"pid": pid, "stopped": True, "signal": signal.Signals(sent).name if sent else None,
            "seconds": round(time.monotonic() - started, 1)}


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="boot the guest and wait for its SSH banner")
    start.add_argument("--cache", required=True, help="build_guest.sh's cache directory (holds guest.json)")
    start.add_argument("--port", type=int, required=True, help="host port on 127.0.0.1 forwarded to the guest's 22")
    start.add_argument("--pidfile", required=True)
    start.add_argument("--console", required=True, help="file that receives the serial console and QEMU's messages")
    start.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for the SSH banner")
    start.add_argument("--memory", default="512M")
    start.add_argument("--qemu", default=QEMU)
    status = sub.add_parser("status", help="is the guest running, does it answer SSH")
    status.add_argument("--pidfile", required=True)
    stop = sub.add_parser("stop", help="SIGTERM, then SIGKILL, the guest's QEMU")
    stop.add_argument("--pidfile", required=True)
    stop.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.command == "start" and not 0 <= args.port < 65536:
        print(json.dumps({"error": "--port must be 0..65535"}))
        return 2
    handler = {"start": cmd_start, "status": cmd_status, "stop": cmd_stop}[args.command]
    try:
        result = handler(args)
    except GuestError as exc:
        print(json.dumps({"error": str(exc)}))
        return 3
    print(json.dumps(result, sort_keys=True))
    if args.command == "status" and not result["running"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
